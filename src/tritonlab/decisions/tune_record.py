"""``results/tune.json`` as records: the settings a tune ran with, each step of its path, the
pick and the runner-up with their figures, and the race's verdict between them.

``pipeline/tune.py`` writes it after every step; readers load it with ``load_record``. Fields a
file from an older tritonlab lacks are ``later`` fields, so every stored file dumps back the same.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from tritonlab.decisions.search_space import Candidate, Goal, Knobs, Observation, Step
from tritonlab.experiments.plan import MeasurementSettings
from tritonlab.perf.trace import TraceStats
from tritonlab.records import Record, later
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import VerdictRecord


@dataclass(frozen=True)
class TuneSettingsRecord(Record):
    """What ``tritonlab tune`` was asked for (``pipeline.tune.TuneSettings``), as stored."""

    goal: str
    p99_budget_us: float | None
    min_throughput_infer_per_s: float | None
    cores: int
    max_race_rounds: int
    start: Knobs
    switch_protocol: bool
    max_instances: int
    time_budget_s: float
    batch_size: int
    measurement: MeasurementSettings
    # a tune under a replayed trace: the load in words, and the trace's figures
    fixed_load: str | None = later()
    trace: TraceStats | None = later()

    def as_goal(self, window_ms: int | None = None) -> Goal:
        """The goal the search ran under (``window_ms``, the measurement window the policy
        judged loads by, is not stored: the block engine's is in ``engine.json``)."""
        shared = {f.name: getattr(self, f.name) for f in fields(Goal) if hasattr(self, f.name)}
        return Goal(kind=self.goal, **shared | {"window_ms": window_ms})


@dataclass(frozen=True)
class TuneStep(Record):
    """One step of the search path: the cell measured (or reused), what came back, and why."""

    phase: str  # ramp | move | race
    reason: str
    configuration: Knobs
    description: str
    concurrency: int
    repeat: int  # from 1
    cell: str
    reused: bool  # read from an earlier run's stored cell
    throughput_infer_per_s: float | None  # None: the cell failed
    failed: bool
    latency_p99_us: float | None
    queue_us: float | None
    compute_us: float | None
    mean_batch: float | None
    elapsed_s: float
    # why perf_analyzer could not measure the cell (the search went on without it)
    failure: str | None = later()

    @classmethod
    def of(
        cls,
        step: Step,
        cell: str,
        obs: Observation,
        elapsed_s: float,
        reused: bool,
        failure: str | None = None,
    ) -> TuneStep:
        """The record of ``step``, measured as ``obs`` in ``cell`` after ``elapsed_s`` seconds."""
        assert step.knobs is not None, "a stop is not a step of the path"
        return cls(
            phase=step.phase,
            reason=step.reason,
            configuration=step.knobs,
            description=step.knobs.description,
            concurrency=step.concurrency,
            repeat=step.repeat + 1,
            cell=cell,
            reused=reused,
            throughput_infer_per_s=None if obs.failed else obs.throughput_infer_per_s,
            failed=obs.failed,
            latency_p99_us=obs.latency_p99_us,
            queue_us=obs.queue_us,
            compute_us=obs.compute_us,
            mean_batch=obs.mean_batch,
            elapsed_s=round(elapsed_s, 1),
            failure=failure,
        )


@dataclass(frozen=True)
class TuneFigure(Record):
    """A figure over a point's repeats: their median and range (None without a value)."""

    median: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, summary: Summary) -> TuneFigure:
        """The median, lowest and highest repeat of ``summary``."""
        return cls(summary.median, summary.low, summary.high)


@dataclass(frozen=True)
class TunePick(Record):
    """The pick or the runner-up: a configuration at one concurrency, over its repeats."""

    configuration: Knobs
    description: str
    variant: str  # the serving variant's name (``Knobs.variant_name``)
    concurrency: int
    repeats: int
    throughput_infer_per_s: TuneFigure
    latency_p99_us: TuneFigure
    meets_p99_budget_every_repeat: bool
    # repeats whose p99 was over the budget (None: a tune.json from before the median rule)
    p99_over_budget_repeats: int | None = later()
    # where it was measured when not at a concurrency (a replayed trace), in words
    load: str | None = later()

    def where(self) -> str:
        """``at concurrency 8``, or the fixed load's words (``under trace bursts``)."""
        return self.load or f"at concurrency {self.concurrency}"

    @classmethod
    def of(cls, candidate: Candidate, goal: Goal) -> TunePick:
        """The record of ``candidate`` judged against ``goal``'s p99 budget."""
        thr, p99 = candidate.throughput, candidate.p99
        return cls(
            configuration=candidate.knobs,
            description=candidate.knobs.description,
            variant=candidate.knobs.variant_name,
            concurrency=candidate.concurrency,
            repeats=thr.n,
            throughput_infer_per_s=TuneFigure.of(thr),
            latency_p99_us=TuneFigure.of(p99),
            meets_p99_budget_every_repeat=goal.within(p99.high),
            p99_over_budget_repeats=sum(
                not goal.within(o.latency_p99_us) for o in candidate.observations
            ),
            load=goal.fixed_load,
        )


@dataclass(frozen=True)
class TuneRecord(Record):
    """``results/tune.json``: the search's settings, path, pick, runner-up and verdict."""

    settings: TuneSettingsRecord
    steps: tuple[TuneStep, ...]
    stop_reason: str | None  # None while the search runs
    cells_measured: int
    cells_reused: int
    wall_s: float
    pick: TunePick | None
    runner_up: TunePick | None
    # the runner-up against the pick, paired over the race's rounds (when both exist)
    verdict: VerdictRecord | None = later()
    tie_break: str | None = later()  # why, when one was
