"""tune's race: the close contenders measured again one cell at a time (the one with the fewest
race cells next, the contenders re-drawn after each cell), paired by repeat number, until every
verdict against the leader is decided or the rounds run out; and the pick it gives
(``choose``), with the tie-break on the other figure. The rest of the policy is ``search.py``."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from tritonlab.decisions.search_space import (
    MIN_RACE_ROUNDS,
    RACE_BAND_PCT,
    Candidate,
    Goal,
    Observation,
    Step,
    best_point,
    configurations,
    incumbent,
    near,
    objective_value,
    qualifying_points,
)
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import HIGHER, LOWER, NO_CLEAR, Verdict, compare


def _contenders(observations: Sequence[Observation], goal: Goal) -> list[Candidate]:
    """The leader first, then the runner-up and every point whose single ramp figure is within
    ``RACE_BAND_PCT`` of the leader's (ordered by that figure).

    Under a p99 budget every qualifying point of a configuration may race, not only its best:
    the best sits at the budget's edge, and one noisy figure each cannot order it and the next
    concurrency down.
    """
    best = [
        c
        for c in (best_point(observations, k, goal) for k in configurations(observations))
        if c is not None
    ]
    if not best:
        return []
    reverse = goal.kind == "throughput"
    best.sort(key=lambda c: c.score(goal), reverse=reverse)
    lead = best[0].score(goal)
    others = best[2:]
    if goal.p99_budget_us is not None:
        placed = {(b.knobs, b.concurrency) for b in best}
        others += [
            c
            for k in configurations(observations)
            for c in qualifying_points(observations, k, goal)
            if (c.knobs, c.concurrency) not in placed
        ]
        others.sort(key=lambda c: c.score(goal), reverse=reverse)
    return best[:2] + [c for c in others if near(c.score(goal), lead, RACE_BAND_PCT, goal)]


def race_verdict(leader: Candidate, other: Candidate, goal: Goal) -> Verdict:
    figure = "throughput" if goal.kind == "throughput" else "p99 latency"
    return compare(figure, leader.race_summary(goal), other.race_summary(goal))


def choose(
    observations: Sequence[Observation], goal: Goal
) -> tuple[Candidate | None, Candidate | None, str | None]:
    """(the pick, the runner-up, why a tie was broken): the race's leader by the median of its
    repeats once every contender has ``MIN_RACE_ROUNDS``, else the incumbent by the ramp figures.
    Where the race cannot separate the two on the goal's figure and the runner-up is clearly
    better on the other one, paired by round, the runner-up is the pick: the same for less. Only
    at the same concurrency: in a closed loop half the concurrency has about half the latency,
    so the other figure at another load measures the load, not the configuration."""
    racing, _dropped = race_state(observations, goal)
    if not racing or min(len(c.race) for c in racing) < MIN_RACE_ROUNDS:
        return incumbent(observations, goal), None, None
    leader = racing[0]
    if len(racing) < 2:
        return leader, None, None
    second = racing[1]
    main = race_verdict(leader, second, goal)
    if main.word != NO_CLEAR or leader.concurrency != second.concurrency:
        return leader, second, None
    figure, attr, better = (
        ("p99 latency", "latency_p99_us", LOWER)
        if goal.kind == "throughput"
        else ("throughput", "throughput_infer_per_s", HIGHER)
    )

    def raced(c: Candidate) -> Summary:
        return Summary.of([getattr(o, attr) for o in c.race], [o.repeat for o in c.race])

    side = compare(figure, raced(leader), raced(second))
    if side.word != better:
        return leader, second, None
    why = (
        f"the race could not separate {leader.knobs.description} {goal.at(leader.concurrency)} "
        f"and {second.knobs.description} {goal.at(second.concurrency)} "
        f"on {main.figure} ({main.phrase()}), and the second's {figure} "
        f"is {side.phrase()}: it is the pick"
    )
    return second, leader, why


def race_state(
    observations: Sequence[Observation], goal: Goal
) -> tuple[list[Candidate], list[tuple[Candidate, Verdict]]]:
    """(still racing, dropped with the verdict that dropped them); the leader first."""
    racing = _contenders(observations, goal)
    if not racing:
        return [], []
    dropped: list[tuple[Candidate, Verdict]] = []
    if min(len(c.race) for c in racing) >= MIN_RACE_ROUNDS:
        # ranked by the median of every repeat at the point (the figures the pick shows)
        racing.sort(
            key=lambda c: statistics.median(objective_value(o, goal) for o in c.observations),
            reverse=goal.kind == "throughput",
        )
        keep = racing[:2]  # the leader, and the runner-up as its evidence
        for other in racing[2:]:
            verdict = race_verdict(racing[0], other, goal)
            if verdict.word == (LOWER if goal.kind == "throughput" else HIGHER):  # clearly worse
                dropped.append((other, verdict))
            else:
                keep.append(other)
        racing = keep
    return racing, dropped


def race_step(observations: Sequence[Observation], goal: Goal) -> Step:
    racing, _dropped = race_state(observations, goal)
    rounds = min(len(c.race) for c in racing)
    if rounds >= MIN_RACE_ROUNDS:
        leader = racing[0]
        verdicts = [race_verdict(leader, other, goal) for other in racing[1:]]
        if all(v.decided for v in verdicts):
            return Step(
                "stop", "the race is decided: " + _race_text(leader, racing, verdicts, goal)
            )
        if rounds >= goal.max_race_rounds:
            return Step(
                "stop",
                f"{rounds} race rounds measured (the limit), not every verdict decided: "
                + _race_text(leader, racing, verdicts, goal),
            )
    round_no = rounds + 1
    names = ", ".join(
        f"{c.knobs.variant_name} {c.knobs.protocol}"
        + ("" if goal.fixed_load else f" c{c.concurrency}")
        for c in racing
    )
    c = next(c for c in racing if len(c.race) < round_no)  # the fewest rounds: one lacks it
    # the contenders are re-drawn at every step (the runner-up and those within the band of
    # the leader, the clearly worse dropped), so a round is the measured one's own
    return Step(
        "race",
        f"race: its round {len(c.race) + 1}; {len(racing)} contenders now ({names}): the "
        f"runner-up and every one within {RACE_BAND_PCT:.0f}% of the leader's single figure",
        c.knobs,
        c.concurrency,
        round_no,
    )


def _race_text(
    leader: Candidate, racing: Sequence[Candidate], verdicts: Sequence[Verdict], goal: Goal
) -> str:
    if len(racing) < 2:
        return f"{leader.knobs.description} is the only configuration that qualifies"
    parts = [
        f"{o.knobs.description} {goal.at(o.concurrency)}: {v.phrase()}"
        for o, v in zip(racing[1:], verdicts, strict=True)
    ]
    return (
        f"{leader.knobs.description} {goal.at(leader.concurrency)} leads by the median of its "
        "repeats; each other contender against it: " + "; ".join(parts)
    )
