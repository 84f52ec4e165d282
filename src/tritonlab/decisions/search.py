"""The tune search policy: from the cells measured so far, the next cell to measure, and why.

Pure and deterministic: the same observations give the same next step, so a resumed tune
replays its path from the stored cells and goes on where it stopped. Three phases, in order
(``docs/tune.md`` tells them in full):

1. **Ramp** one configuration's concurrency, doubling from its start while throughput rises by
   more than ``NOISE_PCT`` and the p99 is within the budget (a start over it halves instead).
2. **Move** from the incumbent (the configuration with the best best-point so far) to the
   first untried neighbour its measured figures argue for (``propose_moves``), starting the
   move's ramp at the incumbent's best concurrency.
3. **Race** the close contenders in interleaved rounds until every verdict is decided or the
   rounds run out (``race.py``).

The single ramp figures are one measurement each: they steer the search; only the race's
paired rounds decide the pick (``stats/verdicts.py``). The space the phases work on (knobs,
observations, goal, candidates) is ``search_space.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tritonlab.decisions.race import choose, race_state, race_step, race_verdict
from tritonlab.decisions.search_space import (
    COMPUTE_BOUND_US,
    GOALS,
    INSTANCE_LADDER,
    MAX_BATCH_LIMIT,
    MAX_CONCURRENCY,
    NOISE_PCT,
    PROTOCOLS,
    THREADS_LIMIT,
    Candidate,
    Goal,
    Knobs,
    Observation,
    Step,
    best_point,
    configurations,
    incumbent,
    near,
    points_at,
)
from tritonlab.perf.trace import KEPT_TO_PCT

# What other modules import from here (the space and the race live beside it).
__all__ = [
    "COMPUTE_BOUND_US",
    "GOALS",
    "MAX_CONCURRENCY",
    "NOISE_PCT",
    "Goal",
    "Knobs",
    "Observation",
    "Step",
    "best_point",
    "choose",
    "incumbent",
    "next_step",
    "propose_moves",
    "race_state",
    "race_verdict",
]


def _ramp_next(observations: Sequence[Observation], knobs: Knobs, goal: Goal) -> int | None:
    """The next concurrency of the configuration's ramp, or None when the ramp is done."""
    first = {
        c: ps[0] for c, ps in points_at(observations, knobs).items() if ps and ps[0].repeat == 0
    }
    if not first or goal.fixed_load is not None:  # a fixed load has one point, no ramp
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
    if below := [c for c in ok if c < top and not first[c].failed]:
        rise = first[top].throughput_infer_per_s / first[below[-1]].throughput_infer_per_s
        if rise <= 1 + NOISE_PCT / 100:
            return None
    # Would twice the load make a request take longer than one measurement window? (Little's
    # law, if throughput stays where it is: 2c / X.)
    rate = first[top].throughput_infer_per_s
    if goal.window_ms is not None and rate > 0 and 2 * top / rate * 1000 > goal.window_ms:
        return None
    return 2 * top


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


def _early_batching(observations: Sequence[Observation], knobs: Knobs, goal: Goal) -> Step | None:
    """Requests that queue longer than they compute, with batching off, argue for batching at
    once: the rest of this configuration's ramp would only measure the same queue growing."""
    newest = [o for o in observations if o.knobs == knobs and o.repeat == 0]
    if not newest or newest[-1].failed:
        return None
    o = newest[-1]
    move = _batching_move(knobs, o, goal.figures_at(o.concurrency))
    if move is None or move.knobs in configurations(observations):
        return None
    skipped = " (the rest of this ramp is skipped: it would measure the same queue growing)"
    return Step(
        "move", move.reason + ("" if goal.fixed_load else skipped), move.knobs, o.concurrency
    )


def _ramp_reason(observations: Sequence[Observation], knobs: Knobs, concurrency: int) -> str:
    first = {c: ps[0] for c, ps in points_at(observations, knobs).items()}
    lower = [c for c in first if c < concurrency]
    if first and concurrency < min(first):
        low = min(first)
        p99 = first[low].latency_p99_us
        p99_text = "n/a" if p99 is None else f"{p99 / 1000:.2f} ms"
        return f"p99 {p99_text} at concurrency {low} is over the budget"
    if lower:
        prev = max(lower)
        if before := [c for c in first if c < prev]:
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


@dataclass(frozen=True)
class Move:
    knobs: Knobs
    reason: str


def _batching_move(k: Knobs, o: Observation, at: str) -> Move | None:
    """The move to dynamic batching when requests queue longer than they compute, else None."""
    queue, compute = o.queue_us, o.compute_us
    queued = queue is not None and compute is not None and queue > compute
    if not k.batching and k.max_batch > 0 and queued:
        return Move(
            replace(k, batching=True),
            f"{at} requests waited {queue:,.0f} µs in the queue against {compute:,.0f} µs "
            "of compute each: one execution at a time leaves them waiting; dynamic "
            "batching (delay 0) lets one execution take every request waiting",
        )
    return None


def _instance_moves(
    observations: Sequence[Observation], leader: Candidate, goal: Goal, at: str
) -> list[Move]:
    """The moves along the instance ladder: the next count up when requests still queue or
    the last count added paid off, and the count between when the next one did not win."""
    k, o = leader.knobs, leader.observations[0]
    moves: list[Move] = []
    queue, compute = o.queue_us, o.compute_us
    more = next((n for n in INSTANCE_LADDER if n > k.instances), None)
    tried = configurations(observations)
    if more is not None and more <= goal.max_instances:
        fewer = [
            c for c in tried if replace(c, instances=k.instances) == k and c.instances < k.instances
        ]
        paid_off = None
        if fewer:
            prev = best_point(observations, max(fewer, key=lambda c: c.instances), goal)
            if prev is not None:
                paid_off = 100 * (leader.score(goal) / prev.score(goal) - 1)
        if queue is not None and compute is not None and queue >= 0.25 * compute:
            each = (
                "compute per request, under batching its batch's whole execution"
                if k.batching
                else "compute each"
            )  # Triton counts every request of a batch the whole execution (issue 36 audit)
            why = (
                f"{at} requests still wait {queue:,.0f} µs in the queue "
                f"({compute:,.0f} µs {each}): another instance can take them"
            )
        elif paid_off is not None and abs(paid_off) > NOISE_PCT:
            why = f"the last instance count added changed the best figure by {paid_off:+.0f}%"
        else:
            why = ""
        if why:
            moves.append(Move(replace(k, instances=more), why))
        middle = (k.instances + more) // 2
        rung = best_point(observations, replace(k, instances=more), goal)
        if replace(k, instances=more) in tried and k.instances < middle < more:
            best = leader.score(goal)
            # digits that tell the two apart: 20.69 against 20.09 read "21 against 20", as if
            # the count that did not beat the other led it (issue 36 audit)
            scores = [best] if rung is None else [best, rung.score(goal)]
            digits = 1 if max(abs(x) for x in scores) < 100 else 0
            rung_text = "no qualifying point" if rung is None else f"{rung.score(goal):,.{digits}f}"
            moves.append(
                Move(
                    replace(k, instances=middle),
                    f"{more} instances did not beat {k.instances} by more than the "
                    f"{NOISE_PCT:g}% noise margin ({rung_text} against {best:,.{digits}f}); "
                    "the count between them is tried once",
                )
            )
    return moves


def _max_batch_move(k: Knobs, o: Observation, at: str) -> Move | None:
    """The move to twice the max_batch_size when batches nearly fill it, else None."""
    if (
        k.batching
        and o.mean_batch is not None
        and o.mean_batch >= 0.75 * k.max_batch
        and 2 * k.max_batch <= MAX_BATCH_LIMIT
    ):
        return Move(
            replace(k, max_batch=2 * k.max_batch),
            f"{at} executions averaged {o.mean_batch:.1f} requests, near max_batch_size "
            f"{k.max_batch}: a larger limit lets batches grow",
        )
    return None


def _spread_move(k: Knobs, goal: Goal) -> Move | None:
    """The move from several threads per instance to as many single-thread instances."""
    spread = k.instances * k.threads if k.threads else 0
    if k.threads and k.threads > 1 and spread <= goal.max_instances:
        return Move(
            replace(k, instances=spread, threads=1),
            f"the same {spread} threads as {spread} instances x 1 thread instead of "
            f"{k.instances} x {k.threads}: whole executions in parallel, with nothing to "
            "synchronise inside one",
        )
    return None


def _threads_move(k: Knobs, o: Observation, goal: Goal, at: str) -> Move | None:
    """The move to twice the onnxruntime threads when executions are long and cores idle (the
    server's own under the CPU split, else the machine's, which the load generator shares)."""
    if goal.server_cores is not None:
        busy, cores = o.server_cores or 0.0, goal.server_cores
        who, of = "the server", f"of its {cores} core{'s' if cores > 1 else ''}"
    else:
        busy, cores = (o.server_cores or 0.0) + (o.load_generator_cores or 0.0), goal.cores
        who, of = "server and load generator", f"of {cores} cores"
    if (
        k.threads
        and 2 * k.threads <= THREADS_LIMIT
        and o.execution_us is not None
        and o.execution_us >= COMPUTE_BOUND_US
        and busy < cores - 0.5
    ):
        return Move(
            replace(k, threads=2 * k.threads),
            f"{at} one execution took {o.execution_us:,.0f} µs while {who} used {busy:.1f} "
            f"{of}: more onnxruntime threads can use the idle ones",
        )
    return None


def _protocol_move(
    observations: Sequence[Observation], leader: Candidate, goal: Goal
) -> Move | None:
    """The move to the other protocol while only the leader's has been tried, else None."""
    k = leader.knobs
    other = next(p for p in PROTOCOLS if p != k.protocol)
    if goal.switch_protocol and all(c.protocol == k.protocol for c in configurations(observations)):
        return Move(
            replace(k, protocol=other),
            "the protocol changes the client's and server's cost per request; "
            + (
                f"{other} {goal.fixed_load} compares it"
                if goal.fixed_load
                else f"one ramp of {other} from concurrency {leader.concurrency} compares it"
            ),
        )
    return None


def propose_moves(observations: Sequence[Observation], leader: Candidate, goal: Goal) -> list[Move]:
    """Neighbours of the leader its figures argue for, most promising first (tried or not)."""
    k, o = leader.knobs, leader.observations[0]
    at = goal.figures_at(leader.concurrency)
    moves = [
        _batching_move(k, o, at),
        *_instance_moves(observations, leader, goal, at),
        _max_batch_move(k, o, at),
        _spread_move(k, goal),
        _threads_move(k, o, goal, at),
        _protocol_move(observations, leader, goal),
    ]
    return [move for move in moves if move is not None]


def next_step(observations: Sequence[Observation], goal: Goal) -> Step:
    """The next measurement of the search, or the reason to stop."""
    configs = configurations(observations)
    if not configs:
        return Step(
            "ramp",
            f"start: {goal.start.description}, "
            + (goal.fixed_load or f"concurrency {goal.first_concurrency}"),
            goal.start,
            goal.first_concurrency,
        )
    last = configs[-1]
    if goal.kind == "throughput" and len(configs) == 1:
        early = _early_batching(observations, last, goal)
        if early is not None:
            return early
    if (upcoming := _ramp_next(observations, last, goal)) is not None:
        return Step("ramp", _ramp_reason(observations, last, upcoming), last, upcoming)
    leader = incumbent(observations, goal)
    if leader is None and all(o.failed for o in observations):
        return Step("stop", "every cell failed (results/faults.json says why)")
    if leader is None and goal.fixed_load is not None:
        return _from_the_unqualified(observations, goal)
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
                        f"{base.knobs.description} {goal.at(base.concurrency)} is within "
                        f"{NOISE_PCT:.0f}% of the leader's single figure ({base.score(goal):,.0f} "
                        f"against {leader.score(goal):,.0f}), so its moves are tried too: " + reason
                    )
                return Step("move", reason, move.knobs, base.concurrency)
    return race_step(observations, goal)


def _from_the_unqualified(observations: Sequence[Observation], goal: Goal) -> Step:
    """Under a fixed load (a trace) nothing qualifies yet: the load cannot come down, so the
    search moves on from the configurations tried, newest first, where their figures argue."""
    configs = configurations(observations)
    for knobs in reversed(configs):
        points = tuple(o for o in observations if o.knobs == knobs and not o.failed)
        if not points:
            continue
        base = Candidate(knobs, points[0].concurrency, points)
        late = max(o.late_pct for o in points)
        missed = (
            f"{knobs.description} was not measured under the whole load {goal.fixed_load} "
            f"(perf_analyzer sent {late:.0f}% of the requests late)"
            if late > KEPT_TO_PCT
            else f"{knobs.description} did not carry the load {goal.fixed_load}"
            + (" within the p99 budget" if goal.p99_budget_us is not None else "")
        )
        for move in propose_moves(observations, base, goal):
            if move.knobs not in configs:
                return Step("move", missed + ": " + move.reason, move.knobs, base.concurrency)
    return Step(
        "stop",
        f"no configuration tried carried the load {goal.fixed_load}"
        + (" within the p99 budget" if goal.p99_budget_us is not None else "")
        + ", and their figures argue for no other",
    )


def _near_leaders(
    observations: Sequence[Observation], leader: Candidate, goal: Goal
) -> list[Candidate]:
    """The leader, then every configuration whose single ramp figure is within ``NOISE_PCT``
    of it: one measurement each cannot order them, so the search goes on from each."""
    lead = leader.score(goal)
    near_ones = [
        c
        for knobs in configurations(observations)
        if (c := best_point(observations, knobs, goal)) is not None
        and c.knobs != leader.knobs
        and near(c.score(goal), lead, NOISE_PCT, goal)
    ]
    near_ones.sort(key=lambda c: c.score(goal), reverse=goal.kind == "throughput")
    return [leader, *near_ones]
