"""Recommendations from a sweep: Pareto frontier, throughput-first and latency-first picks, the
knee of every concurrency curve, and the highest open-loop rate within a latency budget.

Pure functions over ``VariantSummary`` (one per variant and load point). Figures are medians over
repeats with the range of the repeats beside them; every comparison is a verdict of
``analysis.verdicts`` (``compare``, or ``aggregate.compare_figure`` where the offered loads must
match); no statistic is computed here.

Rules, stated so a reader can re-check them against the tables:

- Operating point: one (variant, load point) with a median throughput and a median p99 over its
  repeats; (variant, load point) cells without either (unstable in every repeat) are no point.
- Excluded points: an open-loop point where perf_analyzer said, in any repeat, that it could not
  keep up the requested rate is excluded everywhere (frontier, picks, runner-ups, the rate
  table): that rate was not really offered, so its figures belong to no known load. The
  recommendations say how many were excluded and why.
- Within the budget: a point meets the p99 budget only when EVERY repeat's p99 is within it
  (the highest repeat, not the median, is <= the budget).
- Frontier (Pareto), over the points not excluded: a point is on it when no other point has
  median throughput >= and median p99 <= with at least one strictly better.
- Throughput-first pick: among the points within the budget, the highest median throughput;
  then the tie-break below on throughput.
- Latency-first pick: among the points whose median throughput >= the target load, the lowest
  median p99; then the tie-break below on p99.
- Tie-break: the points whose pick figure shows "no clear difference" against the best median
  one, with a median change within ``TIE_MARGIN_PCT``, are tied with it within the noise; among
  them prefer fewer instances (``instance_count``), then the shorter tail (lower median p99),
  then higher median throughput, then plan order, and the justification says so. Two closed-loop
  points are compared with ``compare`` even at different concurrencies (they are different
  operating points of a curve); any other pair with ``compare_figure``, where different offered
  rates are "not comparable" and such a point is not tied (it cannot displace the best one).
- Runner-up: the best qualifying point (by median) of another configuration (variant, protocol
  or client batch size; another concurrency of the same configuration is not an alternative).
  The justification gives the verdict between the pick and the runner-up, and says when the
  lead is not clear given the noise.
- Verdicts against the baseline: the baseline's cells at the pick's load point, through
  ``compare_figure`` ("not comparable" when the offered loads differ or perf_analyzer did not
  keep up).
- Summary line: "maximum throughput and low latency are different optima" only when the two
  picks are different variants AND the latency pick's p99 is clearly lower than the throughput
  pick's, or the throughput pick's throughput clearly higher than the latency pick's; otherwise
  it says which is true (one configuration serves both goals, the picks are within each other's
  noise, or their loads cannot be compared).
- Knee of a closed-loop curve (one variant, protocol and client batch size, concurrency sorted):
  the smallest concurrency that no higher measured level clearly beats, where "clearly" means
  the verdict is "higher" and the gain is at least ``KNEE_GAIN_PER_DOUBLING_PCT`` per doubling
  of concurrency. If every level is beaten by a later one, the knee is the largest measured.
- Highest rate within budget (MLPerf "Server"): the highest open-loop request rate (req/s,
  Poisson arrivals) whose p99 is within the budget in every repeat, per variant, protocol and
  client batch size, among the rates perf_analyzer kept up and the server kept up with (median
  served >= ``RATE_KEPT_UP_SHARE`` of the offered load).
- Saturation over concurrency (``saturation_over_concurrency``): going up the curve, queue time
  grows clearly while throughput shows no gain (not "higher", median change under 5%): the
  added requests only wait.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tritonlab.analysis.aggregate import VariantSummary, compare_figure, same_offered_load
from tritonlab.analysis.config_key import ConfigKey
from tritonlab.analysis.verdicts import (
    HIGHER,
    LOWER,
    MIN_EFFECT_PCT,
    NO_CLEAR,
    NOT_COMPARABLE,
    Verdict,
    compare,
)
from tritonlab.experiments.plan import sequence_length_of

if TYPE_CHECKING:
    from tritonlab.experiments.manifest import Manifest

BASELINE = "baseline"  # ExperimentPlan.validate makes the first variant the baseline
KNEE_GAIN_PER_DOUBLING_PCT = 10.0  # less than this per doubling of concurrency is "flat"
# ServingVariant field -> how the project line names it when the sweep varied it.
KNOB_LABELS = {
    "dynamic_batching": "dynamic_batching",
    "max_queue_delay_us": "max_queue_delay",
    "preferred_batch_sizes": "preferred_batch_size",
    "max_batch_size": "max_batch_size",
    "instance_count": "instance_group count",
    "instance_kind": "instance_group kind",
    "intra_op_threads": "intra-op threads",
    "backend": "backend",
    "precision": "precision",
}
RATE_KEPT_UP_SHARE = 0.9  # an open-loop rate counts only if >= 90% of it was served
SATURATION_QUEUE_GROWTH_PCT = 50.0  # queue time up by at least this much ...
FELL_BEHIND_REASON = (
    "perf_analyzer could not keep up the requested rate in at least one repeat, so that rate "
    "was not really offered"
)
TIE_BREAK_ORDER = (
    "fewer instances, then the shorter tail (lower median p99), then higher median throughput, "
    "then plan order"
)
# The rules as one line each, for recommendations.json and the log (module docstring in full).
TIE_MARGIN_PCT = 10.0  # a tied point is also within 10% of the best by median

RULES = {
    "budget": "a point meets the p99 budget only when every repeat's p99 is within it",
    "excluded": "open-loop points where perf_analyzer could not keep up the requested rate are "
    "excluded from the frontier, the picks, the runner-ups and the rate table",
    "frontier": "among the points not excluded, no other point has median throughput >= and "
    "median p99 <= with one strictly better",
    "throughput_first": "highest median throughput among the points within the budget, then "
    "the tie-break on throughput",
    "latency_first": "lowest median p99 among the points whose median throughput carries the "
    "target load, then the tie-break on p99",
    "tie_break": "points whose pick figure shows no clear difference against the best median "
    f"one, with a median change within {TIE_MARGIN_PCT:g}%, are tied; prefer {TIE_BREAK_ORDER}",
    "runner_up": "best qualifying point (by median) of another variant, protocol or client "
    "batch size; its verdict against the pick is stated",
    "knee": "smallest concurrency that no higher level clearly beats (verdict 'higher' and at "
    f"least {KNEE_GAIN_PER_DOUBLING_PCT:g}% per doubling); the largest level if every level is "
    "beaten",
    "max_rate": "highest open-loop rate whose p99 is within the budget in every repeat, among "
    "the rates perf_analyzer kept up and the server served at least "
    f"{RATE_KEPT_UP_SHARE:.0%} of",
    "different_optima": "only when the picks are different variants and the latency pick's p99 "
    "is clearly lower or the throughput pick's throughput clearly higher",
}


@dataclass(frozen=True)
class OperatingPoint:
    """One VariantSummary seen as a point on the throughput/p99 plane."""

    variant: str
    description: str
    load_key: str
    protocol: str
    batch_size: int
    concurrency: int | None
    request_rate_per_s: float | None
    throughput_infer_per_s: float  # median over repeats
    latency_p99_us: float  # median over repeats
    # perf_analyzer warned it could not keep up the open-loop rate in some repeat
    load_generator_fell_behind: bool = False
    latency_p99_max_us: float | None = None  # the highest repeat's p99 (None: the median)
    instance_count: int = 1
    repeats: int = 1

    @property
    def worst_p99_us(self) -> float:
        """The highest p99 of the repeats: what must be within a budget."""
        return self.latency_p99_us if self.latency_p99_max_us is None else self.latency_p99_max_us

    @property
    def closed_loop(self) -> bool:
        return self.request_rate_per_s is None

    @property
    def curve_key(self) -> ConfigKey:
        """The configuration, without the load level."""
        return ConfigKey(self.variant, self.protocol, self.batch_size)

    @property
    def load_label(self) -> str:
        if self.request_rate_per_s is not None:
            return f"{self.protocol}, batch {self.batch_size}, {self.request_rate_per_s:g} req/s"
        return f"{self.protocol}, batch {self.batch_size}, concurrency {self.concurrency}"

    def within(self, budget_us: float) -> bool:
        """Every repeat's p99 is within the budget."""
        return self.worst_p99_us <= budget_us

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "description": self.description,
            "load_key": self.load_key,
            "protocol": self.protocol,
            "batch_size": self.batch_size,
            "concurrency": self.concurrency,
            "request_rate_per_s": self.request_rate_per_s,
            "throughput_infer_per_s": self.throughput_infer_per_s,
            "latency_p99_us": self.latency_p99_us,
            "latency_p99_max_us": self.worst_p99_us,
            "instance_count": self.instance_count,
            "repeats": self.repeats,
            "load_generator_fell_behind": self.load_generator_fell_behind,
        }


@dataclass(frozen=True)
class TieBreak:
    """Points tied with the best-by-median one on the pick figure, and what decided among them."""

    figure: str  # "throughput" | "p99"
    best_by_median: OperatingPoint
    tied: list[OperatingPoint]  # the tied points other than the best by median, plan order
    chosen: OperatingPoint
    decided_by: str  # "fewer instances" | "the shorter tail" | ... ("" when nothing was tied)
    not_comparable: int = 0  # qualifying points whose load cannot be compared with the best's

    @property
    def applied(self) -> bool:
        return bool(self.tied)

    @property
    def overridden(self) -> bool:
        """The tie-break chose another point than the best by median."""
        return self.chosen != self.best_by_median

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "applied": self.applied,
            "rule": RULES["tie_break"],
            "best_by_median": _ref(self.best_by_median),
            "tied_with": [_ref(p) for p in self.tied],
            "chosen": _ref(self.chosen),
            "decided_by": self.decided_by or None,
            "changed_the_pick": self.overridden,
            "not_comparable_points": self.not_comparable,
        }


def _ref(p: OperatingPoint) -> dict[str, Any]:
    return {"variant": p.variant, "load_key": p.load_key}


@dataclass(frozen=True)
class Pick:
    kind: str  # "throughput-first" | "latency-first"
    point: OperatingPoint
    justification: str  # one paragraph: action / result / judgement
    verdicts: dict[str, Verdict]  # against the baseline at the same load key
    runner_up: OperatingPoint | None = None
    runner_up_verdict: Verdict | None = None  # the pick against the runner-up, on the figure
    tie_break: TieBreak | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "point": self.point.to_dict(),
            "justification": self.justification,
            "verdicts": {k: v.to_dict() for k, v in self.verdicts.items()},
            "runner_up": self.runner_up.to_dict() if self.runner_up else None,
            "runner_up_verdict": self.runner_up_verdict.to_dict()
            if self.runner_up_verdict
            else None,
            "tie_break": self.tie_break.to_dict() if self.tie_break else None,
        }


@dataclass(frozen=True)
class Saturation:
    """A step up a concurrency curve where the extra requests only queued."""

    curve: ConfigKey
    concurrency_before: int
    concurrency_after: int
    queue_us_before: float
    queue_us_after: float
    throughput_verdict: Verdict
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "curve": str(self.curve),
            "concurrency_before": self.concurrency_before,
            "concurrency_after": self.concurrency_after,
            "queue_us_before": self.queue_us_before,
            "queue_us_after": self.queue_us_after,
            "throughput_verdict": self.throughput_verdict.to_dict(),
            "text": self.text,
        }


@dataclass(frozen=True)
class Recommendations:
    latency_budget_p99_us: float
    target_load_infer_per_s: float | None
    points: list[OperatingPoint]  # every measured point, the excluded ones included
    frontier: list[OperatingPoint]  # sorted by throughput, excluded points left out
    throughput_pick: Pick | None
    latency_pick: Pick | None
    knees: dict[ConfigKey, int]
    max_rate_within_budget: dict[ConfigKey, float]
    summary_line: str
    excluded: list[OperatingPoint] = dataclasses.field(default_factory=list)
    unmeasured: list[str] = dataclasses.field(default_factory=list)  # "variant at load_key"

    @property
    def eligible(self) -> list[OperatingPoint]:
        """The points the frontier, the picks and the rate table are drawn from."""
        return [p for p in self.points if p not in self.excluded]

    @property
    def exclusion_note(self) -> str:
        """One sentence on the points left out and why ('' when none were)."""
        return _exclusion_note(self.excluded, self.unmeasured)

    def to_dict(self) -> dict[str, Any]:
        return {
            "latency_budget_p99_us": self.latency_budget_p99_us,
            "target_load_infer_per_s": self.target_load_infer_per_s,
            "points": [p.to_dict() for p in self.points],
            "excluded_points": [{**_ref(p), "reason": FELL_BEHIND_REASON} for p in self.excluded],
            "unmeasured_points": list(self.unmeasured),
            "exclusion_note": self.exclusion_note,
            "frontier": [p.to_dict() for p in self.frontier],
            "throughput_pick": self.throughput_pick.to_dict() if self.throughput_pick else None,
            "latency_pick": self.latency_pick.to_dict() if self.latency_pick else None,
            "knees": {str(k): v for k, v in self.knees.items()},
            "max_rate_within_budget": {str(k): v for k, v in self.max_rate_within_budget.items()},
            "summary_line": self.summary_line,
            "method": {
                **RULES,
                "figures": "medians over repeats with the repeats' max p99 per point; verdicts "
                "as in the experiment log",
            },
        }


def operating_point(s: VariantSummary) -> OperatingPoint | None:
    """The summary as a point, or None when it has no throughput or no p99 (unstable cells)."""
    tput, p99 = s.throughput.median, s.latency_p99.median
    if tput is None or p99 is None:
        return None
    return OperatingPoint(
        variant=s.variant.name,
        description=s.variant.description,
        load_key=s.load_key,
        protocol=s.settings.protocol,
        batch_size=s.settings.batch_size,
        concurrency=s.settings.concurrency if s.settings.request_rate_per_s is None else None,
        request_rate_per_s=s.settings.request_rate_per_s,
        throughput_infer_per_s=tput,
        latency_p99_us=p99,
        load_generator_fell_behind=s.load_generator_fell_behind,
        latency_p99_max_us=s.latency_p99.high,
        instance_count=s.variant.instance_count,
        repeats=s.latency_p99.n,
    )


def pareto_frontier(points: list[OperatingPoint]) -> list[OperatingPoint]:
    """Points no other point dominates (>= throughput and <= p99, one strictly), by throughput.

    Points where perf_analyzer fell behind are left out: their load is not the one named.
    """
    points = [p for p in points if not p.load_generator_fell_behind]

    def dominated(p: OperatingPoint) -> bool:
        return any(
            q.throughput_infer_per_s >= p.throughput_infer_per_s
            and q.latency_p99_us <= p.latency_p99_us
            and (
                q.throughput_infer_per_s > p.throughput_infer_per_s
                or q.latency_p99_us < p.latency_p99_us
            )
            for q in points
        )

    front = [p for p in points if not dominated(p)]
    return sorted(front, key=lambda p: (p.throughput_infer_per_s, -p.latency_p99_us, p.variant))


def _gain_per_doubling_pct(t0: float, t1: float, c0: int, c1: int) -> float:
    doublings = math.log2(c1 / c0)
    return 100.0 * ((t1 / t0) ** (1.0 / doublings) - 1.0) if t0 > 0 and doublings > 0 else 0.0


def closed_loop_curves(summaries: list[VariantSummary]) -> dict[ConfigKey, list[VariantSummary]]:
    """Each configuration -> its closed-loop summaries, by concurrency."""
    curves: dict[ConfigKey, list[VariantSummary]] = defaultdict(list)
    for s in summaries:
        st = s.settings
        if st.request_rate_per_s is None and st.concurrency and s.throughput.median is not None:
            curves[ConfigKey.of(s)].append(s)
    return {k: sorted(v, key=lambda s: s.settings.concurrency or 0) for k, v in curves.items()}


def knee_concurrency(curve: list[VariantSummary]) -> int | None:
    """The knee of one closed-loop curve (rule in the module docstring); None below 2 levels.

    A level is the knee when no higher level is clearly above it (verdict "higher" and at least
    ``KNEE_GAIN_PER_DOUBLING_PCT`` per doubling), so one noisy flat step does not hide a later
    gain.
    """
    if len(curve) < 2:
        return None
    for i, lower in enumerate(curve):
        c0, t0 = lower.settings.concurrency or 1, lower.throughput.median or 0.0
        gains_later = any(
            compare("throughput", lower.throughput, upper.throughput).word == HIGHER
            and _gain_per_doubling_pct(
                t0, upper.throughput.median or 0.0, c0, upper.settings.concurrency or 1
            )
            >= KNEE_GAIN_PER_DOUBLING_PCT
            for upper in curve[i + 1 :]
        )
        if not gains_later:
            return c0
    return curve[-1].settings.concurrency


def saturation_over_concurrency(curve: list[VariantSummary]) -> Saturation | None:
    """The first step up the curve where queue time grows clearly while throughput stays flat.

    "Grows clearly": the queue-time verdict is "higher" and the median rose by at least
    ``SATURATION_QUEUE_GROWTH_PCT``; "flat": the throughput verdict is not "higher".
    """
    for lower, upper in itertools.pairwise(curve):
        q0, q1 = lower.queue_us.median, upper.queue_us.median
        if q0 is None or q1 is None:
            continue
        queue = compare("queue", lower.queue_us, upper.queue_us)
        tput = compare("throughput", lower.throughput, upper.throughput)
        grew = queue.word == HIGHER and q1 >= q0 * (1 + SATURATION_QUEUE_GROWTH_PCT / 100)
        flat = tput.word != HIGHER and (tput.change_pct or 0.0) < MIN_EFFECT_PCT
        if not grew or not flat:
            continue
        c0, c1 = lower.settings.concurrency or 0, upper.settings.concurrency or 0
        curve_key = ConfigKey.of(lower)
        text = (
            f"Saturated from concurrency {c0}: going to {c1}, queue time rose from {q0:,.0f} "
            f"to {q1:,.0f} µs per request with no throughput gain ({tput.phrase()}): the extra "
            "requests in flight only wait, so more concurrency adds latency, not throughput."
        )
        return Saturation(curve_key, c0, c1, q0, q1, tput, text)
    return None


def _max_rates(points: list[OperatingPoint], budget_us: float) -> dict[ConfigKey, float]:
    best: dict[ConfigKey, float] = {}
    for p in points:
        if p.request_rate_per_s is None or not p.within(budget_us):
            continue  # closed loop, or some repeat's p99 over the budget
        if p.load_generator_fell_behind:
            continue  # perf_analyzer delayed requests: the offered rate was not really offered
        if p.throughput_infer_per_s < RATE_KEPT_UP_SHARE * p.request_rate_per_s * p.batch_size:
            continue  # the server fell behind the offered rate: its p99 is not of that load
        best[p.curve_key] = max(best.get(p.curve_key, 0.0), p.request_rate_per_s)
    return dict(sorted(best.items(), key=lambda kv: str(kv[0])))


def _fmt_point(p: OperatingPoint) -> str:
    return (
        f"'{p.description}' at {p.load_label}: {p.throughput_infer_per_s:,.0f} infer/s, "
        f"p99 {p.latency_p99_us:,.0f} µs"
    )


def _short(p: OperatingPoint) -> str:
    return f"{p.variant} at {p.load_key}"


def _names(points: list[OperatingPoint] | list[str], most: int = 4) -> str:
    names = [p if isinstance(p, str) else _short(p) for p in points]
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _exclusion_note(excluded: list[OperatingPoint], unmeasured: list[str]) -> str:
    sentences = []
    if excluded:
        sentences.append(
            f"{_n(len(excluded), 'operating point')} ({_names(excluded)}) "
            f"{'was' if len(excluded) == 1 else 'were'} excluded from the frontier, the picks, "
            f"the runner-ups and the rate table: {FELL_BEHIND_REASON}."
        )
    if unmeasured:
        sentences.append(
            f"{_n(len(unmeasured), 'cell group')} ({_names(unmeasured)}) had no stable "
            f"throughput or p99 in any repeat and {'is' if len(unmeasured) == 1 else 'are'} "
            "no operating point."
        )
    return " ".join(sentences)


def _action(p: OperatingPoint) -> str:
    return f"'{p.description}' ({p.variant}), clients at {p.load_label}"


def _result(p: OperatingPoint) -> str:
    text = f"{p.throughput_infer_per_s:,.0f} infer/s at p99 {p.latency_p99_us:,.0f} µs"
    if p.repeats > 1:
        text += f" (medians; worst repeat's p99 {p.worst_p99_us:,.0f} µs)"
    return text


def _judgement(
    p: OperatingPoint,
    verdicts: dict[str, Verdict],
    goal: str,
    baseline_over_budget: bool | None = None,
) -> str:
    """What the pick means against the baseline, in the verdicts' words."""
    if p.variant == BASELINE:
        return "no server-side change beats the baseline for this goal; keep it."
    if not verdicts:
        return f"the best measured point for {goal}, without a baseline to weigh it against."
    tput, p99 = verdicts["throughput"].word, verdicts["latency_p99"].word
    if (tput if goal == "throughput" else p99) == NOT_COMPARABLE:
        why = verdicts["throughput" if goal == "throughput" else "latency_p99"].method
        return (
            f"the baseline's {'throughput' if goal == 'throughput' else 'p99'} at this load "
            f"point is not comparable with the pick's ({why}), so the pick rests on the ranking "
            "above, not on a verdict against the baseline."
        )
    if goal == "throughput":
        if tput == HIGHER:
            cost = "a longer tail" if p99 == HIGHER else "no clear cost in tail latency"
            cost = "a shorter tail as well" if p99 == LOWER else cost
            return f"the change pays: more throughput than the baseline, with {cost}."
        if baseline_over_budget:
            return (
                "its throughput is not clearly above the baseline's at this load; its edge is "
                "that every repeat stays within the budget where the baseline's do not."
            )
        return (
            "its throughput is not clearly above the baseline's at this load: the difference "
            "is within the noise, so the baseline is as good a choice here."
        )
    if p99 == LOWER:
        return "the change pays: a clearly shorter tail than the baseline at the same load."
    return (
        "its tail is not clearly shorter than the baseline's at this load; it wins by "
        "carrying the target load at all, or by a margin within the noise."
    )


def _config_of(p: OperatingPoint) -> tuple[str, str, int]:
    return (p.variant, p.protocol, p.batch_size)


RankKey = Callable[[OperatingPoint], tuple[float, ...]]


class _Picker:
    """Shared state for building the two picks: summaries by point, baselines by load key."""

    def __init__(self, pairs: list[tuple[OperatingPoint, VariantSummary]], baseline: str) -> None:
        self.summary = {(p.variant, p.load_key): s for p, s in pairs}
        self.order = {(p.variant, p.load_key): i for i, (p, _) in enumerate(pairs)}
        self.baseline = baseline

    def of(self, p: OperatingPoint) -> VariantSummary:
        return self.summary[(p.variant, p.load_key)]

    def rank(self, p: OperatingPoint) -> int:
        return self.order[(p.variant, p.load_key)]

    def by_throughput(self, p: OperatingPoint) -> tuple[float, ...]:
        return (-p.throughput_infer_per_s, p.latency_p99_us, self.rank(p))

    def by_p99(self, p: OperatingPoint) -> tuple[float, ...]:
        return (p.latency_p99_us, -p.throughput_infer_per_s, self.rank(p))

    def tie_key(self, p: OperatingPoint) -> tuple[float, ...]:
        return (p.instance_count, p.latency_p99_us, -p.throughput_infer_per_s, self.rank(p))

    def versus(self, figure: str, reference: OperatingPoint, subject: OperatingPoint) -> Verdict:
        """``subject`` against ``reference`` on ``figure`` ("throughput" or "p99").

        Two closed-loop points are compared as they are (different concurrencies are different
        operating points); any other pair through ``compare_figure``, which says "not
        comparable" for different offered rates or a rate perf_analyzer did not keep up.
        """
        attr = "throughput" if figure == "throughput" else "latency_p99"
        ref, sub = self.of(reference), self.of(subject)
        if reference.closed_loop and subject.closed_loop:
            return compare(figure, getattr(ref, attr), getattr(sub, attr))
        return compare_figure(figure, attr, ref, sub)

    def select(self, candidates: list[OperatingPoint], figure: str, rank: RankKey) -> TieBreak:
        """The best by median, the points tied with it within the noise, and the tie-break."""
        best = min(candidates, key=rank)
        tied: list[OperatingPoint] = []
        not_comparable = 0
        for c in candidates:
            if c == best:
                continue
            verdict = self.versus(figure, best, c)
            if (
                verdict.word == NO_CLEAR
                and verdict.has_interval
                and abs(verdict.change_pct or 0.0) <= TIE_MARGIN_PCT
            ):
                # one repeat has no interval (no tie can be shown), and a point far behind by
                # median is not a practical alternative however wide the noise: medians rank
                tied.append(c)
            elif verdict.word == NOT_COMPARABLE:
                not_comparable += 1
        group = sorted([best, *tied], key=self.tie_key)
        chosen = group[0]
        decided_by = _decided_by(group[0], group[1]) if len(group) > 1 else ""
        others = sorted((p for p in group if p != chosen), key=self.rank)
        return TieBreak(figure, best, others, chosen, decided_by, not_comparable)

    def baseline_over_budget(self, p: OperatingPoint, budget_us: float) -> bool | None:
        ref = self.summary.get((self.baseline, p.load_key))
        worst = ref.latency_p99.high if ref else None
        return None if worst is None else worst > budget_us

    def baseline_verdicts(self, p: OperatingPoint) -> dict[str, Verdict]:
        ref = self.summary.get((self.baseline, p.load_key))
        if ref is None:
            return {}
        s = self.of(p)
        return {
            "throughput": compare_figure("throughput", "throughput", ref, s),
            "latency_p99": compare_figure("p99", "latency_p99", ref, s),
        }

    def runner_up_sentence(
        self, pick: OperatingPoint, runner: OperatingPoint | None, verdict: Verdict | None
    ) -> str:
        if runner is None or verdict is None:
            return "No other configuration qualified, so there is no runner-up to weigh it against."
        figure = verdict.figure
        rule = f"rule: {verdict.method}"
        if verdict.word == NOT_COMPARABLE:
            return (
                f"Against the runner-up, {_fmt_point(runner)}, {figure} is {verdict.phrase()}: "
                "the two were measured under different offered loads, so the lead rests on the "
                "medians alone."
            )
        wins = HIGHER if figure == "throughput" else LOWER
        if verdict.word == wins:
            return (
                f"It beats the runner-up, {_fmt_point(runner)}, on {figure}: {verdict.phrase()} "
                f"({rule})."
            )
        if verdict.word == NO_CLEAR:
            ahead = (
                pick.throughput_infer_per_s >= runner.throughput_infer_per_s
                if figure == "throughput"
                else pick.latency_p99_us <= runner.latency_p99_us
            )
            if not verdict.has_interval:
                return (
                    f"Its lead over the runner-up, {_fmt_point(runner)}, is not clear: "
                    f"{figure} {verdict.phrase()} ({rule}); re-measure with more repeats to "
                    "separate them."
                )
            if ahead:
                return (
                    f"Its lead over the runner-up, {_fmt_point(runner)}, is not clear given the "
                    f"noise ({figure} {verdict.phrase()}; {rule}): either is a sound choice; "
                    "re-measure with more repeats to separate them."
                )
            return (
                f"The runner-up, {_fmt_point(runner)}, has the better median, but its lead is "
                f"not clear given the noise ({figure} {verdict.phrase()}; {rule}): either is a "
                "sound choice, and the tie-break decided."
            )
        return (
            f"The runner-up, {_fmt_point(runner)}, is clearly better on {figure} "
            f"({verdict.phrase()}; {rule}); this pick was tied within the noise with the best "
            "median point, not with the runner-up."
        )

    def baseline_sentence(self, p: OperatingPoint, verdicts: dict[str, Verdict]) -> str:
        if p.variant == self.baseline:
            return "It is the baseline configuration itself."
        if not verdicts:
            return "The baseline was not measured at this load, so there is no verdict against it."
        ref = self.summary[(self.baseline, p.load_key)]
        if not same_offered_load(ref, self.of(p)):
            return (
                f"Against the baseline at the same fraction of its own peak (offered "
                f"{ref.settings.request_rate_per_s or 0:,.0f} against "
                f"{p.request_rate_per_s or 0:,.0f} req/s): throughput and p99 "
                f"{verdicts['latency_p99'].phrase()}; the baseline's p99 there was "
                f"{ref.latency_p99.text(unit='µs')}."
            )
        return (
            f"Against the baseline at the same load ({ref.throughput.median or 0:,.0f} infer/s, "
            f"p99 {ref.latency_p99.median or 0:,.0f} µs): throughput "
            f"{verdicts['throughput'].phrase()}, p99 {verdicts['latency_p99'].phrase()}."
        )


def _decided_by(chosen: OperatingPoint, next_best: OperatingPoint) -> str:
    """Which tie-break key put ``chosen`` ahead of ``next_best``."""
    if chosen.instance_count != next_best.instance_count:
        return f"fewer instances ({chosen.instance_count} against {next_best.instance_count})"
    if chosen.latency_p99_us != next_best.latency_p99_us:
        return (
            f"the shorter tail (median p99 {chosen.latency_p99_us:,.0f} against "
            f"{next_best.latency_p99_us:,.0f} µs)"
        )
    if chosen.throughput_infer_per_s != next_best.throughput_infer_per_s:
        return (
            f"the higher throughput ({chosen.throughput_infer_per_s:,.0f} against "
            f"{next_best.throughput_infer_per_s:,.0f} infer/s)"
        )
    return "the first place in plan order (nothing else told them apart)"


def _tie_sentence(tb: TieBreak) -> str:
    if not tb.applied:
        return ""
    best = (
        "no clear difference against this one, the best median"
        if not tb.overridden
        else f"no clear difference against the best median, {_short(tb.best_by_median)}"
    )
    return (
        f" Tied within the noise with {_n(len(tb.tied), 'other point')} on {tb.figure} "
        f"({_names(tb.tied)}; {best}); chose the one with {tb.decided_by}, as the tie-break "
        f"prefers {TIE_BREAK_ORDER}."
    )


def _best_other(
    candidates: list[OperatingPoint], pick: OperatingPoint, rank: RankKey
) -> OperatingPoint | None:
    others = [c for c in candidates if _config_of(c) != _config_of(pick)]
    return min(others, key=rank) if others else None


def at_reference_length(
    summaries: list[VariantSummary],
) -> tuple[list[VariantSummary], str]:
    """The summaries at the reference sequence length (the one most loads use), and a note."""
    lengths = collections.Counter(sequence_length_of(s.load_key) for s in summaries)
    if len(lengths) < 2:
        return summaries, ""
    reference = lengths.most_common(1)[0][0]
    others = sorted(str(n) for n in lengths if n != reference and n is not None)
    note = (
        f" Only load points at the reference sequence length {reference} are ranked; "
        f"lengths {', '.join(others)} do different work per inference and are compared in "
        "their own result tables."
    )
    return [s for s in summaries if sequence_length_of(s.load_key) == reference], note


def recommend(
    summaries: list[VariantSummary],
    latency_budget_p99_us: float,
    target_load_infer_per_s: float | None = None,
) -> Recommendations:
    """Frontier, picks, knees and rates within budget from a sweep's summaries.

    With several sequence lengths, only the reference length's load points are ranked: a
    shorter sequence is less work per inference, not a better configuration.
    """
    summaries, length_note = at_reference_length(summaries)
    pairs = [(p, s) for s in summaries if (p := operating_point(s)) is not None]
    points = [p for p, _ in pairs]
    unmeasured = [
        f"{s.variant.name} at {s.load_key}" for s in summaries if operating_point(s) is None
    ]
    excluded = [p for p in points if p.load_generator_fell_behind]
    eligible = [p for p in points if not p.load_generator_fell_behind]
    picker = _Picker(pairs, BASELINE)
    budget = latency_budget_p99_us
    note = _exclusion_note(excluded, unmeasured)
    note = f" {note}" if note else ""
    note += length_note

    throughput_pick = None
    within = [p for p in eligible if p.within(budget)]
    if within:
        tb = picker.select(within, "throughput", picker.by_throughput)
        best = tb.chosen
        runner = _best_other(within, best, picker.by_throughput)
        runner_verdict = picker.versus("throughput", runner, best) if runner else None
        verdicts = picker.baseline_verdicts(best)
        near = sum(1 for p in eligible if p.latency_p99_us <= budget and not p.within(budget))
        lead = "tied within the noise with the highest" if tb.overridden else "the highest"
        text = (
            f"Action: serve {_action(best)}. Result: {_result(best)}: {lead} median throughput "
            f"of the {_n(len(within), 'operating point')} whose p99 stays within the "
            f"{budget:,.0f} µs budget in every repeat (of {len(eligible)} eligible"
            + (
                f"; {near} more had a median p99 within the budget but a repeat above it"
                if near
                else ""
            )
            + ")."
            + note
            + _tie_sentence(tb)
            + " "
            + picker.baseline_sentence(best, verdicts)
            + " Judgement: "
            + _judgement(best, verdicts, "throughput", picker.baseline_over_budget(best, budget))
            + " "
            + picker.runner_up_sentence(best, runner, runner_verdict)
        )
        throughput_pick = Pick("throughput-first", best, text, verdicts, runner, runner_verdict, tb)

    latency_pick = None
    if target_load_infer_per_s is not None:
        target = target_load_infer_per_s
        carrying = [p for p in eligible if p.throughput_infer_per_s >= target]
        if carrying:
            tb = picker.select(carrying, "p99", picker.by_p99)
            best = tb.chosen
            runner = _best_other(carrying, best, picker.by_p99)
            runner_verdict = picker.versus("p99", runner, best) if runner else None
            verdicts = picker.baseline_verdicts(best)
            budget_note = (
                f"every repeat within the {budget:,.0f} µs budget"
                if best.within(budget)
                else f"a repeat above the {budget:,.0f} µs budget"
            )
            lead = "tied within the noise with the lowest" if tb.overridden else "the lowest"
            text = (
                f"Action: serve {_action(best)}. Result: {_result(best)}: {lead} median p99 "
                f"({budget_note}) of the {_n(len(carrying), 'operating point')} whose median "
                f"throughput carries the target load of {target:,.0f} infer/s."
                + note
                + _tie_sentence(tb)
                + " "
                + picker.baseline_sentence(best, verdicts)
                + " Judgement: "
                + _judgement(best, verdicts, "latency")
                + " "
                + picker.runner_up_sentence(best, runner, runner_verdict)
            )
            latency_pick = Pick("latency-first", best, text, verdicts, runner, runner_verdict, tb)

    curves = closed_loop_curves(summaries)
    knees = {
        key: k
        for key, curve in sorted(curves.items(), key=lambda kv: str(kv[0]))
        if (k := knee_concurrency(curve))
    }
    return Recommendations(
        latency_budget_p99_us=budget,
        target_load_infer_per_s=target_load_infer_per_s,
        points=points,
        frontier=pareto_frontier(eligible),
        throughput_pick=throughput_pick,
        latency_pick=latency_pick,
        knees=knees,
        max_rate_within_budget=_max_rates(eligible, budget),
        summary_line=summary_line(
            summaries,
            picker,
            throughput_pick,
            latency_pick,
            budget,
            target_load_infer_per_s,
            len(excluded),
        ),
        excluded=excluded,
        unmeasured=unmeasured,
    )


def saturation_findings(summaries: list[VariantSummary]) -> list[Saturation]:
    """``saturation_over_concurrency`` for every closed-loop curve of the sweep."""
    found = []
    for curve in closed_loop_curves(summaries).values():
        sat = saturation_over_concurrency(curve)
        if sat is not None:
            found.append(sat)
    return found


def _two_goals(picker: _Picker, tp: Pick | None, lp: Pick | None, target: float | None) -> str:
    """The summary line's judgement: whether the two picks are really different optima."""
    if tp is None or lp is None:
        if tp is None:
            return (
                "no operating point kept every repeat's p99 within the budget, so there is no "
                "throughput-first pick"
            )
        if target is None:
            return "no target load was given, so there is no latency-first pick"
        return "no operating point carried the target load, so there is no latency-first pick"
    a, b = tp.point, lp.point
    if a == b:
        return "here one operating point serves both goals"
    if a.variant == b.variant:
        return (
            "here one server configuration serves both goals; what differs is the load it is "
            "run at, so the operating point (concurrency or rate) must be chosen for the scenario"
        )
    p99 = picker.versus("p99", a, b)  # the latency pick against the throughput pick
    tput = picker.versus("throughput", b, a)  # the throughput pick against the latency pick
    evidence = (
        f"the latency-first pick's p99 {p99.phrase()} against the throughput-first pick's; the "
        f"throughput-first pick's throughput {tput.phrase()} against the latency-first pick's"
    )
    if p99.word == LOWER or tput.word == HIGHER:
        return (
            f"maximum throughput and low latency are different optima ({evidence}), so the "
            "configuration must be chosen for the scenario"
        )
    if not p99.comparable and not tput.comparable:
        return (
            f"the two picks were measured under offered loads that cannot be compared "
            f"({p99.method}), so this sweep does not show whether the two goals have different "
            "optima"
        )
    if p99.word == NO_CLEAR and tput.word == NO_CLEAR:
        return (
            f"the two picks are within each other's noise ({evidence}), so either configuration "
            "serves both goals as far as these repeats can tell"
        )
    return (
        f"the two picks are not clearly different optima ({evidence}), so either configuration "
        "serves both goals as far as these repeats can tell"
    )


def summary_line(
    summaries: list[VariantSummary],
    picker: _Picker,
    throughput_pick: Pick | None,
    latency_pick: Pick | None,
    budget_us: float,
    target: float | None,
    excluded: int = 0,
) -> str:
    """The seed's one-paragraph project description (action, result, judgement), measured."""
    if not summaries:
        return "No operating points were measured."
    model = next(
        (s.model_name for s in summaries if s.variant.name == picker.baseline),
        summaries[0].model_name,
    )
    variants = {s.variant.name for s in summaries}
    protocols = sorted({s.settings.protocol for s in summaries})
    levels = sorted(
        s.settings.concurrency
        for s in summaries
        if s.settings.request_rate_per_s is None and s.settings.concurrency
    )
    open_loop = any(s.settings.request_rate_per_s is not None for s in summaries)
    repeats = min(len(s.cells) for s in summaries)
    most = max(len(s.cells) for s in summaries)
    configs = {s.variant.name: s.variant for s in summaries}.values()
    varied = [
        label
        for name, label in KNOB_LABELS.items()
        if len({repr(getattr(v, name)) for v in configs}) > 1
    ]
    action = (
        f"Deployed the ONNX model {model} on NVIDIA Triton Inference Server and swept "
        f"{len(variants)} serving configuration{'s' if len(variants) != 1 else ''}"
        + (f" ({', '.join(varied)})" if varied else "")
        + " with perf_analyzer over "
        + (f"concurrency {levels[0]}–{levels[-1]}" if levels else "open-loop load")
        + f", {'/'.join(p.upper() if p == 'http' else 'gRPC' for p in protocols)}"
        + (" and Poisson open-loop load" if open_loop else "")
        + f", {repeats} interleaved repeat{'s' if repeats != 1 else ''} per cell"
        + (f" (up to {most} where adaptive repeats measured more)" if most > repeats else "")
        + ", recording "
        "throughput and p95/p99"
        + (
            f"; excluded {_n(excluded, 'operating point')} where perf_analyzer could not keep "
            "up the requested rate"
            if excluded
            else ""
        )
    )
    choices = []
    if throughput_pick is not None:
        p = throughput_pick.point
        verdict = throughput_pick.verdicts.get("throughput")
        vs = f", {verdict.phrase()} vs. the baseline" if verdict and p.variant != BASELINE else ""
        choices.append(
            f"'{p.description}' for throughput-first use ({p.throughput_infer_per_s:,.0f} "
            f"infer/s{vs}, p99 {p.latency_p99_us:,.0f} µs with every repeat within a "
            f"{budget_us:,.0f} µs budget)"
        )
    if latency_pick is not None and target is not None:
        p = latency_pick.point
        choices.append(
            f"'{p.description}' for latency-first use (p99 {p.latency_p99_us:,.0f} µs while "
            f"carrying {p.throughput_infer_per_s:,.0f} infer/s, target {target:,.0f})"
        )
    if not choices:
        return action + "; no configuration met the latency budget or the target load."
    judgement = _two_goals(picker, throughput_pick, latency_pick, target)
    return f"{action}; chose {' and '.join(choices)}: {judgement}."


RECOMMENDATIONS_FILE = "recommendations.json"


def recommendations_from_manifest(
    manifest: Manifest, summaries: list[VariantSummary]
) -> Recommendations | None:
    """The run's recommendations when its manifest names a latency budget (sweeps do)."""
    sweep = manifest.sweep
    if sweep is None or not sweep.latency_budget_p99_us:
        return None
    return recommend(summaries, sweep.latency_budget_p99_us, sweep.target_load_infer_per_s)
