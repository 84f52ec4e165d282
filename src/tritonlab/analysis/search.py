"""The tune search policy: from the cells measured so far, the next cell to measure, and why.

Pure and deterministic: the same observations give the same next step, so a resumed tune
replays its path from the stored cells and goes on where it stopped. Three phases, in order:

1. **Ramp** one configuration's concurrency, doubling from its start, while the throughput
   of the newest point is more than ``NOISE_PCT`` above the point below it and its p99 is
   within the budget (when one is set); a start over the budget halves instead. Its *best
   point* is then the highest throughput within the budget (for ``goal latency``: the lowest
   p99 among the points carrying the target load).
2. **Move** from the incumbent (the configuration with the best best-point so far) to the
   first untried neighbour that its measured figures argue for (``propose_moves``): dynamic
   batching when requests wait longer in the queue than they compute; the next instance count
   while requests still queue or the last instance added paid off; a larger ``max_batch_size``
   when batches fill it; more onnxruntime threads when executions are long and cores idle;
   the other protocol last. A move's ramp starts at the incumbent's best concurrency.
3. **Race**: the incumbent, the runner-up and every configuration within ``RACE_BAND_PCT`` of
   the incumbent's single ramp figure are measured again at their best points in interleaved
   rounds (repeats 2, 3, ...). After ``MIN_RACE_ROUNDS`` rounds a contender whose paired
   interval against the leader lies wholly below it is dropped; the race ends when every
   verdict is decided (clear, or within +/-``NOISE_PCT``) or after ``max_race_rounds``. A
   point is within the p99 budget when the median of its repeats is; one whose single ramp
   figure was up to ``NEAR_BUDGET_PCT`` over it is raced too, and once raced a point over
   the budget is out: the configuration's next best point takes its place.

The single ramp figures are one measurement each: they steer the search; only the race's
paired rounds decide the pick (``analysis/verdicts.py``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tritonlab.analysis.summary import Summary
from tritonlab.analysis.verdicts import HIGHER, LOWER, MIN_EFFECT_PCT, NO_CLEAR, Verdict, compare
from tritonlab.repository.variants import ServingVariant

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
# Above this time per execution the model's own compute dwarfs the serving path (~0.1 ms per
# request here): threads x instances is the question, not batching (`run --configs auto` picks
# by it; tune proposes more threads past it).
COMPUTE_BOUND_US = 1000.0


@dataclass(frozen=True, order=True)
class Knobs:
    """A point of the configuration space tune searches."""

    instances: int = 1
    batching: bool = False
    max_batch: int = 64
    threads: int | None = 1
    protocol: str = "grpc"

    @property
    def variant_name(self) -> str:
        batching = "dyn" if self.batching else "nobatch"
        threads = f"t{self.threads}" if self.threads else "tdef"
        return f"x{self.instances}_{batching}_m{self.max_batch}_{threads}"

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
        return f"{count}, {batching}, {threads}, {self.protocol}"

    def variant(self) -> ServingVariant:
        return ServingVariant(
            self.variant_name,
            f"{self.instances} x, {'batching' if self.batching else 'no batching'}, "
            f"max {self.max_batch}, "
            f"{self.threads or 'default'} thr",
            dynamic_batching=self.batching,
            max_batch_size=self.max_batch,
            instance_count=self.instances,
            intra_op_threads=self.threads,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "batching": self.batching,
            "max_batch": self.max_batch,
            "threads": self.threads,
            "protocol": self.protocol,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Knobs:
        return cls(**data)


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
    max_race_rounds: int = 3
    start: Knobs = field(default_factory=Knobs)
    switch_protocol: bool = True  # False: only the start's protocol (the clients' own)
    max_instances: int = INSTANCE_LADDER[-1]
    # perf_analyzer's measurement window: a load whose requests would take longer than one
    # window to come back cannot be measured with it (None: no limit).
    window_ms: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in GOALS:
            raise ValueError(f"goal must be one of {', '.join(GOALS)}, got {self.kind!r}")

    def within(self, p99_us: float | None) -> bool:
        if self.p99_budget_us is None:
            return True
        return p99_us is not None and p99_us <= self.p99_budget_us

    @property
    def first_concurrency(self) -> int:
        return 1 if self.kind == "latency" else 8


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

    @property
    def throughput(self) -> Summary:
        return Summary.of(
            [o.throughput_infer_per_s for o in self.observations],
            [o.repeat + 1 for o in self.observations],
        )

    @property
    def p99(self) -> Summary:
        return Summary.of(
            [o.latency_p99_us for o in self.observations],
            [o.repeat + 1 for o in self.observations],
        )

    @property
    def race(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if o.repeat >= 1)

    def race_summary(self, goal: Goal) -> Summary:
        values = [_objective_value(o, goal) for o in self.race]
        return Summary.of(values, [o.repeat for o in self.race])

    def score(self, goal: Goal) -> float:
        """The ramp's single figure: it chooses the point and steers the search (the race's
        rounds decide the pick), so a configuration's point does not wander during the race."""
        return _objective_value(self.observations[0], goal)


def _objective_value(obs: Observation, goal: Goal) -> float:
    if goal.kind == "throughput":
        return obs.throughput_infer_per_s
    return obs.latency_p99_us if obs.latency_p99_us is not None else float("inf")


def _better(a: float, b: float, goal: Goal) -> bool:
    """Is objective value ``a`` better than ``b``."""
    return a > b if goal.kind == "throughput" else a < b


def configurations(observations: Sequence[Observation]) -> list[Knobs]:
    """The configurations in the order the search first measured them."""
    return list(dict.fromkeys(o.knobs for o in observations))


def _at(observations: Sequence[Observation], knobs: Knobs) -> dict[int, list[Observation]]:
    points: dict[int, list[Observation]] = {}
    for o in observations:
        if o.knobs == knobs:
            points.setdefault(o.concurrency, []).append(o)
    return points


def _qualifies(points: Sequence[Observation], goal: Goal) -> bool:
    """Every repeat served (none failed), the p99 within the budget and, for goal latency,
    carrying the load.

    The p99 is the median of the point's repeats: one short cell's p99 is itself noisy, so a
    single repeat over the budget does not rule a point out, nor one under it in. Until the
    race has measured the point ``MIN_RACE_ROUNDS`` more times, a point up to
    ``NEAR_BUDGET_PCT`` over the budget stays in: the race's repeats decide it.
    """
    if any(o.failed for o in points):
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


def best_point(observations: Sequence[Observation], knobs: Knobs, goal: Goal) -> Candidate | None:
    """The configuration's best qualifying point by its ramp figure, or None when none does."""
    best: Candidate | None = None
    for concurrency, points in sorted(_at(observations, knobs).items()):
        if not any(o.repeat == 0 for o in points) or not _qualifies(points, goal):
            continue
        candidate = Candidate(knobs, concurrency, tuple(sorted(points, key=lambda o: o.repeat)))
        if best is None or _better(candidate.score(goal), best.score(goal), goal):
            best = candidate
    return best


def _ramp_next(observations: Sequence[Observation], knobs: Knobs, goal: Goal) -> int | None:
    """The next concurrency of the configuration's ramp, or None when the ramp is done."""
    first = {c: ps[0] for c, ps in _at(observations, knobs).items() if ps and ps[0].repeat == 0}
    if not first:
        return None
    ok = sorted(c for c, o in first.items() if goal.within(o.latency_p99_us))
    if not ok:  # every point over the budget: come down
        low = min(first)
        return low // 2 if low > 1 and low // 2 not in first else None
    top = max(first)
    if top not in ok or first[top].failed or 2 * top > MAX_CONCURRENCY:
        return None
    if (
        len(first) == 1
        and goal.kind == "throughput"
        and knobs.instances == 1
        and _beaten_at(observations, knobs, top)
    ):
        # Another configuration already serves clearly more at this load. (More instances
        # split the same requests between them, so they get one doubling before this test:
        # the load that fills one instance leaves several half idle.)
        return None
    below = [c for c in ok if c < top and not first[c].failed]
    if below:
        rise = first[top].throughput_infer_per_s / first[below[-1]].throughput_infer_per_s
        if rise <= 1 + NOISE_PCT / 100:
            return None
    if _outgrows_window(first[top], goal):
        return None
    return 2 * top


def _round_trip_at_double_s(o: Observation) -> float:
    """Little's law at twice the load, if throughput stays where it is: ``2c / X``."""
    return 2 * o.concurrency / o.throughput_infer_per_s if o.throughput_infer_per_s > 0 else 0.0


def _outgrows_window(o: Observation, goal: Goal) -> bool:
    """Would doubling the load make a request take longer than one measurement window?"""
    if goal.window_ms is None or o.failed or o.throughput_infer_per_s <= 0:
        return False
    return _round_trip_at_double_s(o) * 1000 > goal.window_ms


def _beaten_at(observations: Sequence[Observation], knobs: Knobs, concurrency: int) -> bool:
    """Did another configuration's ramp serve more than ``NOISE_PCT`` above this one's at
    the same concurrency (a move that loses at the load it starts from is not ramped on)."""
    mine = [o for o in observations if o.knobs == knobs and o.repeat == 0]
    theirs = [
        o.throughput_infer_per_s
        for o in observations
        if o.knobs != knobs and o.repeat == 0 and o.concurrency == concurrency and not o.failed
    ]
    if not mine or not theirs:
        return False
    return max(theirs) > mine[0].throughput_infer_per_s * (1 + NOISE_PCT / 100)


def _early_batching(observations: Sequence[Observation], knobs: Knobs) -> Step | None:
    """Requests that queue longer than they compute, with batching off, argue for batching at
    once: the rest of this configuration's ramp would only measure the same queue growing."""
    if knobs.batching or knobs.max_batch <= 0:
        return None
    target = replace(knobs, batching=True)
    if target in configurations(observations):
        return None
    newest = [o for o in observations if o.knobs == knobs and o.repeat == 0]
    if not newest:
        return None
    o = newest[-1]
    if o.failed or o.queue_us is None or o.compute_us is None or o.queue_us <= o.compute_us:
        return None
    return Step(
        "move",
        f"at concurrency {o.concurrency} requests waited {o.queue_us:,.0f} µs in the queue "
        f"against {o.compute_us:,.0f} µs of compute each: one execution at a time leaves them "
        "waiting; dynamic batching (delay 0) lets one execution take every request waiting "
        "(the rest of this ramp is skipped: it would measure the same queue growing)",
        target,
        o.concurrency,
    )


def _ramp_reason(observations: Sequence[Observation], knobs: Knobs, concurrency: int) -> str:
    first = {c: ps[0] for c, ps in _at(observations, knobs).items()}
    lower = [c for c in first if c < concurrency]
    if first and concurrency < min(first):
        low = min(first)
        return f"p99 {_ms(first[low].latency_p99_us)} at concurrency {low} is over the budget"
    if lower:
        prev = max(lower)
        before = [c for c in first if c < prev]
        if before:
            b = max(before)
            gain = 100 * (first[prev].throughput_infer_per_s / first[b].throughput_infer_per_s - 1)
            return (
                f"throughput rose {gain:+.0f}% from concurrency {b} to {prev} "
                f"({first[b].throughput_infer_per_s:,.0f} -> "
                f"{first[prev].throughput_infer_per_s:,.0f} infer/s): more than the noise "
                f"margin ({NOISE_PCT:.0f}%)"
            )
        rate = first[prev].throughput_infer_per_s
        if knobs.instances > 1 and _beaten_at(observations, knobs, prev):
            return (
                f"concurrency {prev} gave {rate:,.0f} infer/s, less than another configuration "
                f"at that load, but {knobs.instances} instances split the requests between "
                "them: doubling the load shows what they serve with as many waiting each"
            )
        return (
            f"concurrency {prev} gave {rate:,.0f} infer/s; doubling it shows whether "
            "throughput still rises"
        )
    return "the ramp's first point"


def _ms(us: float | None) -> str:
    return "n/a" if us is None else f"{us / 1000:.2f} ms"


def incumbent(observations: Sequence[Observation], goal: Goal) -> Candidate | None:
    """The best best-point over all configurations by the ramp figures (ties: the one
    measured first): where the moves start from."""
    best: Candidate | None = None
    for knobs in configurations(observations):
        candidate = best_point(observations, knobs, goal)
        if candidate is None:
            continue
        if best is None or _better(candidate.score(goal), best.score(goal), goal):
            best = candidate
    return best


@dataclass(frozen=True)
class Move:
    knobs: Knobs
    reason: str


def _next_on_ladder(instances: int) -> int | None:
    higher = [n for n in INSTANCE_LADDER if n > instances]
    return higher[0] if higher else None


def propose_moves(observations: Sequence[Observation], leader: Candidate, goal: Goal) -> list[Move]:
    """Neighbours of the leader its figures argue for, most promising first (tried or not)."""
    k = leader.knobs
    o = leader.observations[0]
    at = f"at concurrency {leader.concurrency}"
    moves: list[Move] = []
    queue, compute = o.queue_us, o.compute_us
    queued = queue is not None and compute is not None and queue > compute
    if not k.batching and k.max_batch > 0 and queued:
        moves.append(
            Move(
                replace(k, batching=True),
                f"{at} requests waited {queue:,.0f} µs in the queue against {compute:,.0f} µs "
                "of compute each: one execution at a time leaves them waiting; dynamic "
                "batching (delay 0) lets one execution take every request waiting",
            )
        )
    more = _next_on_ladder(k.instances)
    if more is not None and more <= goal.max_instances:
        fewer = [
            c
            for c in configurations(observations)
            if replace(c, instances=k.instances) == k and c.instances < k.instances
        ]
        paid_off = None
        if fewer:
            prev = best_point(observations, max(fewer, key=lambda c: c.instances), goal)
            if prev is not None:
                paid_off = 100 * (leader.score(goal) / prev.score(goal) - 1)
        some_queue = queue is not None and compute is not None and queue >= 0.25 * compute
        if some_queue:
            why = (
                f"{at} requests still wait {queue:,.0f} µs in the queue "
                f"({compute:,.0f} µs compute each): another instance can take them"
            )
        elif paid_off is not None and abs(paid_off) > NOISE_PCT:
            why = f"the last instance count added changed the best figure by {paid_off:+.0f}%"
        else:
            why = ""
        if why:
            moves.append(Move(replace(k, instances=more), why))
        tried = configurations(observations)
        middle = (k.instances + more) // 2
        rung = best_point(observations, replace(k, instances=more), goal)
        if replace(k, instances=more) in tried and k.instances < middle < more:
            rung_text = "no qualifying point" if rung is None else f"{rung.score(goal):,.0f}"
            moves.append(
                Move(
                    replace(k, instances=middle),
                    f"{more} instances did not beat {k.instances} ({rung_text} against "
                    f"{leader.score(goal):,.0f}); the count between them is tried once",
                )
            )
    if (
        k.batching
        and o.mean_batch is not None
        and o.mean_batch >= 0.75 * k.max_batch
        and 2 * k.max_batch <= MAX_BATCH_LIMIT
    ):
        moves.append(
            Move(
                replace(k, max_batch=2 * k.max_batch),
                f"{at} executions averaged {o.mean_batch:.1f} requests, near max_batch_size "
                f"{k.max_batch}: a larger limit lets batches grow",
            )
        )
    spread = k.instances * k.threads if k.threads else 0
    if k.threads and k.threads > 1 and spread <= goal.max_instances:
        moves.append(
            Move(
                replace(k, instances=spread, threads=1),
                f"the same {spread} threads as {spread} instances x 1 thread instead of "
                f"{k.instances} x {k.threads}: whole executions in parallel, with nothing to "
                "synchronise inside one",
            )
        )
    busy = (o.server_cores or 0.0) + (o.load_generator_cores or 0.0)
    if (
        k.threads
        and 2 * k.threads <= THREADS_LIMIT
        and o.execution_us is not None
        and o.execution_us >= COMPUTE_BOUND_US
        and busy < goal.cores - 0.5
    ):
        moves.append(
            Move(
                replace(k, threads=2 * k.threads),
                f"{at} one execution took {o.execution_us:,.0f} µs while server and load "
                f"generator used {busy:.1f} of {goal.cores} cores: more onnxruntime threads can "
                "use the idle ones",
            )
        )
    other = next(p for p in PROTOCOLS if p != k.protocol)
    if goal.switch_protocol and all(c.protocol == k.protocol for c in configurations(observations)):
        moves.append(
            Move(
                replace(k, protocol=other),
                f"the protocol changes the client's and server's cost per request; one ramp "
                f"of {other} from concurrency {leader.concurrency} compares it",
            )
        )
    return moves


def _contenders(observations: Sequence[Observation], goal: Goal) -> list[Candidate]:
    """The leader first, then the runner-up and every configuration whose single ramp figure
    is within ``RACE_BAND_PCT`` of the leader's (ordered by that figure)."""
    ranked = [
        c
        for c in (best_point(observations, k, goal) for k in configurations(observations))
        if c is not None
    ]
    if not ranked:
        return []
    ranked.sort(key=lambda c: c.score(goal), reverse=goal.kind == "throughput")
    lead = ranked[0].score(goal)
    band = RACE_BAND_PCT / 100
    chosen = ranked[:2]
    for c in ranked[2:]:
        value = c.score(goal)
        near = (
            value >= lead * (1 - band) if goal.kind == "throughput" else value <= lead * (1 + band)
        )
        if near:
            chosen.append(c)
    return chosen


def race_verdict(leader: Candidate, other: Candidate, goal: Goal) -> Verdict:
    figure = "throughput" if goal.kind == "throughput" else "p99 latency"
    return compare(figure, leader.race_summary(goal), other.race_summary(goal))


def _worse(verdict: Verdict, goal: Goal) -> bool:
    """The other side is clearly worse than the leader."""
    return verdict.word == (LOWER if goal.kind == "throughput" else HIGHER)


def pick(
    observations: Sequence[Observation], goal: Goal
) -> tuple[Candidate | None, Candidate | None]:
    """(the pick, the runner-up); ``choose`` says why when a tie was broken."""
    best, runner_up, _why = choose(observations, goal)
    return best, runner_up


def choose(
    observations: Sequence[Observation], goal: Goal
) -> tuple[Candidate | None, Candidate | None, str | None]:
    """(the pick, the runner-up, why a tie was broken): the race's leader by the median of its
    repeats once every contender has ``MIN_RACE_ROUNDS``, else the incumbent by the ramp figures.

    When the race cannot separate the two on the goal's figure (no clear difference) and the
    runner-up is clearly better on the other one (throughput goal: a lower p99; latency goal:
    more infer/s), paired by round, the runner-up is the pick: the same service for less.
    """
    racing, _dropped = race_state(observations, goal)
    if not racing or min(len(c.race) for c in racing) < MIN_RACE_ROUNDS:
        return incumbent(observations, goal), None, None
    leader = racing[0]
    if len(racing) < 2:
        return leader, None, None
    second = racing[1]
    main = race_verdict(leader, second, goal)
    if main.word not in (NO_CLEAR,):
        return leader, second, None
    rounds_of = [o.repeat for o in leader.race]
    if goal.kind == "throughput":
        figure = "p99 latency"
        lead = Summary.of([o.latency_p99_us for o in leader.race], rounds_of)
        other = Summary.of([o.latency_p99_us for o in second.race], [o.repeat for o in second.race])
        better = LOWER
    else:
        figure = "throughput"
        lead = Summary.of([o.throughput_infer_per_s for o in leader.race], rounds_of)
        other = Summary.of(
            [o.throughput_infer_per_s for o in second.race], [o.repeat for o in second.race]
        )
        better = HIGHER
    side = compare(figure, lead, other)
    if side.word != better:
        return leader, second, None
    why = (
        f"the race could not separate {leader.knobs.description} at concurrency "
        f"{leader.concurrency} and {second.knobs.description} at concurrency "
        f"{second.concurrency} on {main.figure} ({main.phrase()}), and the second's {figure} "
        f"is {side.phrase()}: it is the pick"
    )
    return second, leader, why


def race_state(
    observations: Sequence[Observation], goal: Goal
) -> tuple[list[Candidate], list[tuple[Candidate, Verdict]]]:
    """(still racing, dropped with the verdict that dropped them); the leader first."""
    field_ = _contenders(observations, goal)
    if not field_:
        return [], []
    racing = list(field_)
    dropped: list[tuple[Candidate, Verdict]] = []
    rounds = min(len(c.race) for c in racing)
    if rounds >= MIN_RACE_ROUNDS:
        # ranked by the median of every repeat at the point (the figures the pick shows)
        racing.sort(
            key=lambda c: statistics.median(_objective_value(o, goal) for o in c.observations),
            reverse=goal.kind == "throughput",
        )
        keep = racing[:2]  # the leader, and the runner-up as its evidence
        for other in racing[2:]:
            verdict = race_verdict(racing[0], other, goal)
            if _worse(verdict, goal):
                dropped.append((other, verdict))
            else:
                keep.append(other)
        racing = keep
    return racing, dropped


def next_step(observations: Sequence[Observation], goal: Goal) -> Step:
    """The next measurement of the search, or the reason to stop."""
    configs = configurations(observations)
    if not configs:
        return Step(
            "ramp",
            f"start: {goal.start.description}, concurrency {goal.first_concurrency}",
            goal.start,
            goal.first_concurrency,
        )
    last = configs[-1]
    if goal.kind == "throughput" and len(configs) == 1:
        early = _early_batching(observations, last)
        if early is not None:
            return early
    upcoming = _ramp_next(observations, last, goal)
    if upcoming is not None:
        return Step("ramp", _ramp_reason(observations, last, upcoming), last, upcoming)
    leader = incumbent(observations, goal)
    if leader is None and all(o.failed for o in observations):
        return Step("stop", "every cell failed (results/faults.json says why)")
    if leader is None:
        return Step(
            "stop",
            "no configuration met the p99 budget even at concurrency 1"
            if goal.p99_budget_us is not None
            else "no configuration carried the target load",
        )
    if not any(o.repeat >= 1 for o in observations):  # moves end where the race begins
        for base in _near_leaders(observations, leader, goal):
            for move in propose_moves(observations, base, goal):
                if move.knobs in configs:
                    continue
                reason = move.reason
                if base is not leader:
                    reason = (
                        f"{base.knobs.description} at concurrency {base.concurrency} is within "
                        f"{NOISE_PCT:.0f}% of the leader's single figure ({base.score(goal):,.0f} "
                        f"against {leader.score(goal):,.0f}), so its moves are tried too: " + reason
                    )
                return Step("move", reason, move.knobs, base.concurrency)
    return _race_step(observations, goal)


def _near_leaders(
    observations: Sequence[Observation], leader: Candidate, goal: Goal
) -> list[Candidate]:
    """The leader, then every configuration whose single ramp figure is within ``NOISE_PCT``
    of it: one measurement each cannot order them, so the search goes on from each."""
    band = NOISE_PCT / 100
    lead = leader.score(goal)
    near = []
    for knobs in configurations(observations):
        c = best_point(observations, knobs, goal)
        if c is None or c.knobs == leader.knobs:
            continue
        value = c.score(goal)
        if goal.kind == "throughput":
            close = value >= lead * (1 - band)
        else:
            close = value <= lead * (1 + band)
        if close:
            near.append(c)
    near.sort(key=lambda c: c.score(goal), reverse=goal.kind == "throughput")
    return [leader, *near]


def _race_step(observations: Sequence[Observation], goal: Goal) -> Step:
    racing, _dropped = race_state(observations, goal)
    rounds = min(len(c.race) for c in racing)
    if rounds >= MIN_RACE_ROUNDS:
        leader = racing[0]
        verdicts = [race_verdict(leader, other, goal) for other in racing[1:]]
        if all(v.decided for v in verdicts):
            return Step("stop", "the race is decided: " + _race_text(leader, racing, verdicts))
        if rounds >= goal.max_race_rounds:
            return Step(
                "stop",
                f"{rounds} race rounds measured (the limit), not every verdict decided: "
                + _race_text(leader, racing, verdicts),
            )
    round_no = rounds + 1
    names = ", ".join(f"{c.knobs.variant_name} {c.knobs.protocol} c{c.concurrency}" for c in racing)
    for c in racing:
        if len(c.race) < round_no:
            return Step(
                "race",
                f"race round {round_no} of {len(racing)} contenders ({names}): the runner-up "
                f"and every one within {RACE_BAND_PCT:.0f}% of the leader's single figure",
                c.knobs,
                c.concurrency,
                round_no,
            )
    raise AssertionError("unreachable: a contender lacks the round")  # pragma: no cover


def _race_text(leader: Candidate, racing: Sequence[Candidate], verdicts: Sequence[Verdict]) -> str:
    if len(racing) < 2:
        return f"{leader.knobs.description} is the only configuration that qualifies"
    parts = [
        f"{o.knobs.description} at concurrency {o.concurrency}: {v.phrase()}"
        for o, v in zip(racing[1:], verdicts, strict=True)
    ]
    return f"against {leader.knobs.description} at concurrency {leader.concurrency}, " + "; ".join(
        parts
    )
