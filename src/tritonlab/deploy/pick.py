"""Which configuration a run folder recommends, and what one server of it was measured to do.

A sweep's throughput-first pick (``results/recommendations.json``; ``latency`` picks its
latency-first one), a tune's pick (``results/tune.json``), or for a plain run the operating
point of highest median throughput among those measured (``analysis.recommend`` with no
latency budget). The figures are the medians and ranges of that point's repeats.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonlab.analysis.aggregate import VariantSummary
from tritonlab.analysis.recommend import recommend
from tritonlab.errors import ConfigError
from tritonlab.experiments.manifest import Manifest
from tritonlab.models.source import RepositorySource
from tritonlab.report.run_data import load_run
from tritonlab.repository.variants import ServingVariant

PICKS = ("throughput", "latency")


@dataclass(frozen=True)
class DeployPick:
    """The configuration to deploy and its measured capacity per server (one replica)."""

    variant: ServingVariant
    model_name: str
    source: str  # where the choice came from, in words
    load_key: str
    protocol: str
    concurrency: int | None
    throughput_infer_per_s: float
    throughput_range: tuple[float, float] | None
    latency_p99_us: float
    queue_us_per_request: float | None
    repeats: int
    machine: str  # what it was measured on
    machine_cores: int  # the cores available there (what unset threads used)
    server_version: str
    # A model of a user's repository (the manifest's record of it): the deployed repository
    # holds the whole pipeline, the models it calls beside it. None for an ONNX file.
    repository: RepositorySource | None = None

    def capacity_comment(self) -> str:
        """One line for the manifests: infer/s per replica, load, p99 (µs), machine and server."""
        spread = (
            f" (repeats {self.throughput_range[0]:,.0f}–{self.throughput_range[1]:,.0f})"
            if self.throughput_range
            else ""
        )
        load = f"concurrency {self.concurrency}" if self.concurrency else self.load_key
        return (
            f"measured per replica: {self.throughput_infer_per_s:,.0f} infer/s{spread} at "
            f"{load} over {self.protocol}, p99 {self.latency_p99_us:,.0f} us, median of "
            f"{self.repeats} repeats, on {self.machine} (tritonserver {self.server_version})"
        )


def resolve_pick(run_dir: Path, which: str = "throughput") -> DeployPick:
    """The configuration to deploy from ``run_dir``: tune's pick, else the ``which``-first
    recommendation; ``ConfigError`` for an unknown ``which`` or no such pick.
    """
    if which not in PICKS:
        raise ConfigError(f"--pick must be one of {', '.join(PICKS)}, got {which!r}")
    run = load_run(run_dir)
    manifest = run.manifest
    summaries = run.summaries
    if run.tune and run.tune.pick:
        pick = run.tune.pick
        summary = _best_summary(
            summaries, pick.variant, pick.configuration.protocol, pick.concurrency
        )
        source = f"tune's pick ({pick.description})"
    else:
        recs = run.recommendations or recommend(summaries, float("inf"))
        chosen = recs.throughput_pick if which == "throughput" else recs.latency_pick
        if chosen is None:
            raise ConfigError(
                f"{run_dir} has no {which}-first pick (no operating point met the latency "
                "budget); pass --pick throughput, or re-run with a larger --latency-budget-us"
            )
        point = chosen.point
        summary = next(
            s for s in summaries if s.variant.name == point.variant and s.load_key == point.load_key
        )
        source = (
            f"the sweep's {chosen.kind} pick"
            if run.recommendations
            else "the highest median throughput of this run (no latency budget was set)"
        )
    return _from_summary(manifest, summary, source)


def _best_summary(
    summaries: list[VariantSummary], variant: str, protocol: str, concurrency: object
) -> VariantSummary:
    mine = [s for s in summaries if s.variant.name == variant]
    if not mine:
        raise ConfigError(f"the pick {variant!r} has no stored cells; run `tritonlab report`")
    exact = [
        s for s in mine if s.settings.protocol == protocol and s.settings.concurrency == concurrency
    ]
    return max(exact or mine, key=lambda s: s.throughput.median or 0.0)


def _from_summary(manifest: Manifest, summary: VariantSummary, source: str) -> DeployPick:
    machine = manifest.machine
    settings = summary.settings
    return DeployPick(
        variant=summary.variant,
        model_name=manifest.model.name,
        source=source,
        load_key=summary.load_key,
        protocol=settings.protocol,
        concurrency=settings.concurrency,
        throughput_infer_per_s=summary.throughput.median or 0.0,
        throughput_range=summary.throughput.range,
        latency_p99_us=summary.latency_p99.median or 0.0,
        queue_us_per_request=summary.queue_us.median,
        repeats=summary.throughput.n,
        machine=f"{machine.cpu_model} x{machine.cores}"
        + (f" + {', '.join(machine.gpus)}" if machine.gpus else ""),
        machine_cores=machine.cores,
        server_version=manifest.server.version,
        repository=_repository_source(manifest),
    )


def _repository_source(manifest: Manifest) -> RepositorySource | None:
    """Where the run's model came from, if a user's repository; a damaged record is one line."""
    stored = manifest.model.repository
    if stored is None:
        return None
    try:
        return RepositorySource.from_dict(stored)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"the run's manifest describes the model's repository without {exc}; the manifest "
            "is damaged: restore it"
        ) from exc
