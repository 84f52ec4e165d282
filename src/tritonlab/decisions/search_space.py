"""The space tune searches and what it knows of it: the knobs of a configuration, one measured
point (``Observation``), the goal and its limits, a step of the search, and each configuration's
best point so far (``Candidate``); the policy is ``search.py``, the race ``race.py``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tritonlab.perf.trace import KEPT_TO_PCT
from tritonlab.records import Record, later
from tritonlab.repository.knobs import KNOB_BY_FIELD
from tritonlab.repository.variants import ServingVariant
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import MIN_EFFECT_PCT

GOALS = ("throughput", "latency")
PROTOCOLS = ("grpc", "http")
NOISE_PCT = MIN_EFFECT_PCT  # a rise smaller than this is not acted on
RACE_BAND_PCT = 2 * NOISE_PCT  # single figures closer than this to the leader are raced
MIN_RACE_ROUNDS = 2
# A point whose single p99 is at most this far over the budget is raced before it is ruled out.
NEAR_BUDGET_PCT = 20.0
MAX_CONCURRENCY = 1024
INSTANCE_LADDER = (1, 2, 4, 8, 16)  # doubled; a rung that loses is refined by its midpoint
MAX_BATCH_LIMIT = 256
THREADS_LIMIT = 16
# Above this time per execution the model's compute dwarfs the serving path (~0.1 ms per
# request): threads x instances is the question, not batching (`run --configs auto`, tune).
COMPUTE_BOUND_US = 1000.0


@dataclass(frozen=True, order=True)
class Knobs(Record):
    """A point of the configuration space tune searches."""

    instances: int = 1
    batching: bool = False
    max_batch: int = 64
    threads: int | None = 1
    protocol: str = "grpc"
    # Knobs held where the user sets them (``tune --hold``; the knob table's ``tune_held``),
    # never moved: (ServingVariant field, value) pairs.
    held: tuple[tuple[str, bool | int | str], ...] = later(())

    @property
    def held_fields(self) -> dict[str, Any]:
        """The held knobs by ServingVariant field."""
        return dict(self.held)

    def held_text(self, part: str = "describe") -> str:
        """The held knobs as the knob table words them (``describe`` or ``slug``), each after
        a separator: ``, response cache`` (``_cache`` for the slug)."""
        default = ServingVariant("", "")
        held = replace(default, **self.held_fields)
        words = [getattr(KNOB_BY_FIELD[f], part)(held, default) for f, _ in self.held]
        return "".join(("_" if part == "slug" else ", ") + w for w in words if w)

    @property
    def variant_name(self) -> str:
        batching = "dyn" if self.batching else "nobatch"
        threads = f"t{self.threads}" if self.threads else "tdef"
        return f"x{self.instances}_{batching}_m{self.max_batch}_{threads}{self.held_text('slug')}"

    @property
    def description(self) -> str:
        batching = (
            f"dynamic batching (delay 0, max batch {self.max_batch})"
            if self.batching
            else f"no batching (max batch {self.max_batch})"
        )
        threads = (
            f"{self.threads} thread{'s' if self.threads != 1 else ''}"
            if self.threads
            else "default threads"
        )
        count = f"{self.instances} instance{'s' if self.instances != 1 else ''}"
        return f"{count}, {batching}, {threads}, {self.protocol}{self.held_text()}"

    def variant(self) -> ServingVariant:
        variant = ServingVariant(
            self.variant_name,
            f"{self.instances} x, {'batching' if self.batching else 'no batching'}, "
            f"max {self.max_batch}, "
            f"{self.threads or 'default'} thr{self.held_text()}",
            dynamic_batching=self.batching,
            max_batch_size=self.max_batch,
            instance_count=self.instances,
            intra_op_threads=self.threads,
        )
        return replace(variant, **self.held_fields)


@dataclass(frozen=True)
class Observation:
    """One measured cell, as the policy sees it (server figures per request, in µs)."""

    knobs: Knobs
    concurrency: int
    repeat: int  # 0 = the ramp's measurement, 1.. = race rounds
    throughput_infer_per_s: float
    latency_p99_us: float | None
    queue_us: float | None = None
    compute_us: float | None = None  # compute input + infer + output, per request
    execution_us: float | None = None  # compute per execution (a batch)
    mean_batch: float | None = None
    server_cores: float | None = None
    load_generator_cores: float | None = None
    # Under a replayed trace: the share of requests perf_analyzer said it sent late (0: none).
    late_pct: float = 0.0

    @property
    def failed(self) -> bool:
        """A cell given up on after repeated faults (its throughput is NaN)."""
        return not math.isfinite(self.throughput_infer_per_s)


@dataclass(frozen=True)
class Goal:
    """What tune optimises, under which limits."""

    kind: str = "throughput"
    p99_budget_us: float | None = None
    min_throughput_infer_per_s: float | None = None  # goal latency: the load to carry
    cores: int = 2
    # the server's own cores when perf_analyzer runs on other CPUs (``cpu_split``; None: shared)
    server_cores: int | None = None
    # the pipeline step whose knobs are searched; its own figures steer the moves (None: the
    # measured model itself)
    step: str | None = None
    # the block engine keeps each configuration's server process for the rest of the search:
    # the race's intervals then carry each process's own spread (``stats/process_term.py``)
    co_loaded: bool = False
    max_race_rounds: int = 3
    start: Knobs = field(default_factory=Knobs)
    switch_protocol: bool = True  # False: only the start's protocol (the clients' own)
    max_instances: int = INSTANCE_LADDER[-1]
    # perf_analyzer's measurement window: a load whose requests would take longer than one
    # window to come back cannot be measured with it (None: no limit).
    window_ms: int | None = None
    # A fixed offered load (a replayed trace), in words ("under trace bursts"): no concurrency
    # ramp, one point per configuration (its concurrency 0), compared at that load.
    fixed_load: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in GOALS:
            raise ValueError(f"goal must be one of {', '.join(GOALS)}, got {self.kind!r}")

    def within(self, p99_us: float | None) -> bool:
        budget = self.p99_budget_us
        return budget is None or (p99_us is not None and p99_us <= budget)

    @property
    def first_concurrency(self) -> int:
        return 0 if self.fixed_load is not None else 1 if self.kind == "latency" else 8

    def at(self, concurrency: int) -> str:
        """Where a point was measured, in words: ``at concurrency 8``, or the fixed load's."""
        return self.fixed_load if self.fixed_load is not None else f"at concurrency {concurrency}"

    def figures_at(self, concurrency: int) -> str:
        """``at`` and, in a pipeline, whose figures steer the move: ``at concurrency 8, in
        step `cnn`,``."""
        return self.at(concurrency) + ("" if self.step is None else f", in step `{self.step}`,")


@dataclass(frozen=True)
class Step:
    """The next thing to do: measure a cell (and why), or stop (and why)."""

    phase: str  # ramp | move | race | stop
    reason: str
    knobs: Knobs | None = None
    concurrency: int = 0
    repeat: int = 0

    @property
    def stop(self) -> bool:
        return self.phase == "stop"


@dataclass(frozen=True)
class Candidate:
    """A configuration's best point so far, with every repeat measured there."""

    knobs: Knobs
    concurrency: int
    observations: tuple[Observation, ...]

    def _over_repeats(self, attr: str) -> Summary:
        return Summary.of(
            [getattr(o, attr) for o in self.observations], [o.repeat + 1 for o in self.observations]
        )

    @property
    def throughput(self) -> Summary:
        return self._over_repeats("throughput_infer_per_s")

    @property
    def p99(self) -> Summary:
        return self._over_repeats("latency_p99_us")

    @property
    def race(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if o.repeat >= 1)

    def race_summary(self, goal: Goal) -> Summary:
        """The race's figure by round, with the process term where the configurations stayed
        loaded (``Goal.co_loaded``), as a co-loaded run's verdicts carry it."""
        values = [objective_value(o, goal) for o in self.race]
        rounds = [o.repeat for o in self.race]
        if not goal.co_loaded:
            return Summary.of(values, rounds)
        from tritonlab.stats.error_rates import process_sd_log

        figure = "throughput" if goal.kind == "throughput" else "latency_p99"
        return Summary.of(values, rounds, process_sd_log(figure), self.knobs.variant_name)

    def score(self, goal: Goal) -> float:
        """The ramp's single figure: it chooses the point and steers the search (the race's
        rounds decide the pick), so a configuration's point does not wander during the race."""
        return objective_value(self.observations[0], goal)


def objective_value(obs: Observation, goal: Goal) -> float:
    if goal.kind == "throughput":
        return obs.throughput_infer_per_s
    return obs.latency_p99_us if obs.latency_p99_us is not None else float("inf")


def near(value: float, lead: float, band_pct: float, goal: Goal) -> bool:
    """Is objective value ``value`` within ``band_pct`` of ``lead`` (or better than it)."""
    band = band_pct / 100
    return value >= lead * (1 - band) if goal.kind == "throughput" else value <= lead * (1 + band)


def _best(candidates: Iterable[Candidate], goal: Goal) -> Candidate | None:
    """The candidate with the best ramp figure (ties: the first)."""
    top = max if goal.kind == "throughput" else min
    return top(candidates, key=lambda c: c.score(goal), default=None)


def configurations(observations: Sequence[Observation]) -> list[Knobs]:
    """The configurations in the order the search first measured them."""
    return list(dict.fromkeys(o.knobs for o in observations))


def points_at(observations: Sequence[Observation], knobs: Knobs) -> dict[int, list[Observation]]:
    points: dict[int, list[Observation]] = {}
    for o in observations:
        if o.knobs == knobs:
            points.setdefault(o.concurrency, []).append(o)
    return points


def qualifies(points: Sequence[Observation], goal: Goal) -> bool:
    """Every repeat served (none failed, none sent more than ``KEPT_TO_PCT`` late under a
    trace), the p99 within the budget and, for goal latency, carrying the load.

    The p99 is the median of the repeats (one short cell's p99 is itself noisy); until the race
    has measured the point ``MIN_RACE_ROUNDS`` more times, up to ``NEAR_BUDGET_PCT`` over the
    budget stays in: the race's repeats decide it.
    """
    if any(o.failed for o in points):
        return False
    if goal.fixed_load is not None and any(o.late_pct > KEPT_TO_PCT for o in points):
        return False
    if goal.p99_budget_us is not None:
        p99s = [o.latency_p99_us for o in points]
        if any(p is None for p in p99s):
            return False
        limit = goal.p99_budget_us
        if len(points) <= MIN_RACE_ROUNDS:
            limit *= 1 + NEAR_BUDGET_PCT / 100
        if statistics.median(p for p in p99s if p is not None) > limit:
            return False
    if goal.kind == "latency" and goal.min_throughput_infer_per_s is not None:
        rate = statistics.median(o.throughput_infer_per_s for o in points)
        return rate >= goal.min_throughput_infer_per_s
    return True


def qualifying_points(
    observations: Sequence[Observation], knobs: Knobs, goal: Goal
) -> list[Candidate]:
    """The configuration's points with a ramp figure that qualify, by concurrency."""
    return [
        Candidate(knobs, concurrency, tuple(sorted(points, key=lambda o: o.repeat)))
        for concurrency, points in sorted(points_at(observations, knobs).items())
        if any(o.repeat == 0 for o in points) and qualifies(points, goal)
    ]


def best_point(observations: Sequence[Observation], knobs: Knobs, goal: Goal) -> Candidate | None:
    """The configuration's best qualifying point by its ramp figure, or None when none does."""
    return _best(qualifying_points(observations, knobs, goal), goal)


def incumbent(observations: Sequence[Observation], goal: Goal) -> Candidate | None:
    """The best best-point over all configurations by the ramp figures (ties: the one
    measured first): where the moves start from."""
    points = (best_point(observations, k, goal) for k in configurations(observations))
    return _best((c for c in points if c is not None), goal)
