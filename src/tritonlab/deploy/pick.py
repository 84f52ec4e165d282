"""Which configuration a run folder recommends, and what one server of it was measured to do.

A sweep's throughput-first pick (``results/recommendations.json``; ``latency`` picks its
latency-first one), a tune's pick (``results/tune.json``), or for a plain run the operating
point of highest median throughput among those measured (``decisions.recommend`` with no
latency budget). The figures are the medians and ranges of that point's repeats.

With a p99 budget, the pick's configuration (at its client) is sized by ``decisions.capacity``,
the same figure ``tritonlab capacity`` prints: the operating point becomes the load point of
highest throughput whose p99 holds the budget by the upper end of its interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonlab.decisions.capacity import Capacity, capacity_of
from tritonlab.decisions.recommend import recommend
from tritonlab.errors import ConfigError
from tritonlab.experiments.manifest import Manifest
from tritonlab.models.source import RepositorySource
from tritonlab.records import RecordError
from tritonlab.report.run_data import load_run
from tritonlab.repository.variants import ServingVariant
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.run_trust import RunTrust

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
    # The capacity the replicas are sized from (``decisions.capacity``): at the p99 budget when
    # one was given, else this point as measured (no budget).
    capacity: Capacity | None = None
    # The run's trust (``stats/run_trust.py``): a deployment sized from a doubtful run says so.
    trust: RunTrust | None = None

    @property
    def budget_sized(self) -> bool:
        """True when the capacity was taken at a p99 budget (``--p99-budget-ms``)."""
        return self.capacity is not None and self.capacity.latency_budget_p99_us is not None

    def capacity_comment(self) -> str:
        """One line for the manifests: infer/s per replica, load, p99 (µs), machine and server."""
        point = self.capacity.point if self.capacity else None
        load = f"concurrency {self.concurrency}" if self.concurrency else self.load_key
        if self.capacity and self.capacity.latency_budget_p99_us is not None and point:
            low, high = point.throughput_ci95_infer_per_s or (0.0, 0.0)
            p99_high = (point.latency_p99_ci95_us or (0.0, 0.0))[1]
            return (
                f"measured per replica at the p99 budget of "
                f"{self.capacity.latency_budget_p99_us / 1000:g} ms: "
                f"{point.throughput_infer_per_s:,.0f} infer/s (95% interval {low:,.0f}–"
                f"{high:,.0f}) at {load} over {self.protocol}, p99 {point.latency_p99_us:,.0f} "
                f"us (interval up to {p99_high:,.0f} us), {point.repeats} repeats, on "
                f"{self.machine} (tritonserver {self.server_version})"
            )
        spread = (
            f" (repeats {self.throughput_range[0]:,.0f}–{self.throughput_range[1]:,.0f})"
            if self.throughput_range
            else ""
        )
        return (
            f"measured per replica: {self.throughput_infer_per_s:,.0f} infer/s{spread} at "
            f"{load} over {self.protocol}, p99 {self.latency_p99_us:,.0f} us, median of "
            f"{self.repeats} repeats, on {self.machine} (tritonserver {self.server_version})"
        )


def resolve_pick(
    run_dir: Path, which: str = "throughput", p99_budget_us: float | None = None
) -> DeployPick:
    """The configuration to deploy from ``run_dir``: tune's pick, else the ``which``-first
    recommendation; with ``p99_budget_us``, at its capacity at that budget (module text)."""
    if which not in PICKS:
        raise ConfigError(f"--pick must be one of {', '.join(PICKS)}, got {which!r}")
    run = load_run(run_dir)
    manifest, summaries = run.manifest, run.summaries
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
    if p99_budget_us is None:
        return _from_summary(manifest, summary, source, capacity_of([summary], None), run.trust)
    key = ConfigKey.of(summary)
    capacity = capacity_of([s for s in summaries if ConfigKey.of(s) == key], p99_budget_us)
    if capacity.point is None:
        raise ConfigError(capacity.why_none())
    at = next(
        s for s in summaries if ConfigKey.of(s) == key and s.load_key == capacity.point.load_key
    )
    source += f", sized at the p99 budget of {p99_budget_us / 1000:g} ms"
    return _from_summary(manifest, at, source, capacity, run.trust)


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


def _from_summary(
    manifest: Manifest,
    summary: VariantSummary,
    source: str,
    capacity: Capacity,
    trust: RunTrust | None = None,
) -> DeployPick:
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
        machine=machine_words(manifest),
        machine_cores=manifest.machine.cores,
        server_version=manifest.server.version,
        repository=_repository_source(manifest),
        capacity=capacity,
        trust=trust,
    )


def machine_words(manifest: Manifest) -> str:
    """The machine a run was measured on: CPU x cores, and GPUs where it had any."""
    machine = manifest.machine
    gpus = f" + {', '.join(machine.gpus)}" if machine.gpus else ""
    return f"{machine.cpu_model} x{machine.cores}{gpus}"


def _repository_source(manifest: Manifest) -> RepositorySource | None:
    """Where the run's model came from, if a user's repository; a damaged record is one line."""
    stored = manifest.model.repository
    if stored is None:
        return None
    try:
        return RepositorySource.from_dict(stored)
    except RecordError as exc:
        raise ConfigError(
            f"the run's manifest describes the model's repository wrongly ({exc}); the manifest "
            "is damaged: restore it"
        ) from exc
