"""``tritonlab capacity`` as a library call: a finished run folder, a target load and a p99
budget in; per configuration the per-replica capacity (``decisions.capacity``) and the replicas
the target needs out, as one typed record. No server is started.

Which configurations: ``--config NAME`` (every client it was measured with); else the run's
pick where it has one (tune's pick, a sweep's throughput-first pick) at the client it was picked
at; else every configuration of the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonlab.decisions.capacity import (
    INTERVAL_WORDS,
    P99_RULE,
    SAME_HARDWARE,
    Capacity,
    Replicas,
    capacities,
    check_sizing,
)
from tritonlab.deploy.pick import machine_words
from tritonlab.errors import ConfigError
from tritonlab.experiments.run_folder import require_run_folder
from tritonlab.records import Record
from tritonlab.report.run_data import RunData, load_run
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.config_key import ConfigKey


@dataclass(frozen=True)
class SizedCapacity(Record):
    """One configuration's capacity and, where it has one, the replicas for the target."""

    capacity: Capacity
    replicas: Replicas | None


@dataclass(frozen=True)
class CapacityReport(Record):
    """What ``tritonlab capacity`` found in one run folder (``--json`` writes it)."""

    run: str
    selection: str  # which configurations, in words
    machine: str
    server_version: str
    target_load_infer_per_s: float
    latency_budget_p99_us: float
    rows: tuple[SizedCapacity, ...]
    rule: str = P99_RULE
    interval: str = INTERVAL_WORDS
    hardware_note: str = ""

    @property
    def sized(self) -> list[SizedCapacity]:
        """The rows that hold the budget somewhere (a capacity and its replicas)."""
        return [r for r in self.rows if r.replicas is not None]


def _pick_key(run: RunData) -> tuple[ConfigKey, str] | None:
    """The configuration key of the run's pick and how it is named; None without a pick."""
    summaries = run.summaries
    if run.tune and run.tune.pick:
        pick = run.tune.pick
        mine = [
            s
            for s in summaries
            if s.variant.name == pick.variant and s.settings.protocol == pick.configuration.protocol
        ]
        if mine:
            return ConfigKey.of(mine[0]), f"tune's pick ({pick.description})"
    recs = run.recommendations
    if recs and recs.throughput_pick:
        point = recs.throughput_pick.point
        for s in summaries:
            if s.variant.name == point.variant and s.load_key == point.load_key:
                return ConfigKey.of(s), "the sweep's throughput-first pick"
    return None


def select(run: RunData, config: str | None) -> tuple[list[VariantSummary], str]:
    """The load points to size from, and the selection in words (module docstring)."""
    summaries = run.summaries
    if config is not None:
        mine = [s for s in summaries if s.variant.name == config]
        if not mine:
            names = ", ".join(dict.fromkeys(s.variant.name for s in summaries))
            raise ConfigError(f"--config {config}: no such configuration in this run ({names})")
        return mine, f"--config {config}"
    picked = _pick_key(run)
    if picked is not None:
        key, words = picked
        return [s for s in summaries if ConfigKey.of(s) == key], words
    return summaries, "every configuration (the run has no pick)"


def run_capacity(
    run_dir: Path, target_load_infer_per_s: float, budget_p99_us: float, config: str | None = None
) -> CapacityReport:
    """The capacity report of ``run_dir`` for a target load at a p99 budget (µs)."""
    check_sizing(target_load_infer_per_s, budget_p99_us)
    require_run_folder(run_dir)
    run = load_run(run_dir)
    chosen, selection = select(run, config)
    found = capacities(chosen, budget_p99_us)
    if not any(c.point for c in found):
        if len(found) == 1:
            raise ConfigError(found[0].why_none())
        lowest = min(
            (p for c in found for p in c.points), key=lambda p: p.latency_p99_us, default=None
        )
        where = (
            f": the lowest p99 measured is {lowest.latency_p99_us / 1000:,.2f} ms (median) at "
            f"{lowest.config_key} {lowest.load_key}; raise --p99-budget-ms above it, or measure "
            "lower loads or more repeats"
            if lowest
            else ""
        )
        raise ConfigError(
            f"no configuration of {run_dir.name} holds the p99 budget of "
            f"{budget_p99_us / 1000:g} ms by the upper end of its 95% interval{where}"
        )
    machine = machine_words(run.manifest)
    return CapacityReport(
        run=run_dir.name,
        selection=selection,
        machine=machine,
        server_version=run.manifest.server.version,
        target_load_infer_per_s=target_load_infer_per_s,
        latency_budget_p99_us=budget_p99_us,
        rows=tuple(
            SizedCapacity(c, c.replicas(target_load_infer_per_s) if c.point else None)
            for c in found
        ),
        hardware_note=SAME_HARDWARE.format(machine=machine),
    )
