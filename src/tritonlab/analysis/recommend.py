"""Recommendations from a sweep: Pareto frontier, throughput-first and latency-first picks, the
knee of every concurrency curve, and the highest open-loop rate within a latency budget.

Pure functions over ``VariantSummary`` (one per variant and load point). Every figure is the
median over repeats; every comparison uses the noise-aware verdicts of ``analysis.verdicts``.

Rules, stated so a reader can re-check them against the tables:

- Operating point: one (variant, load point) with a median throughput and a median p99.
- Frontier (Pareto): a point is on it when no other point has throughput >= and p99 <= with at
  least one strictly better.
- Throughput-first pick: the highest throughput whose p99 <= the latency budget.
- Latency-first pick: the lowest p99 among the points whose throughput >= the target load.
- Runner-up: the best qualifying point of another configuration (variant, protocol or client
  batch size; another concurrency of the same configuration is not an alternative). When the
  verdict between the pick and the runner-up is "no clear difference", the justification says so.
- Knee of a closed-loop curve (one variant, protocol and client batch size, concurrency sorted):
  the smallest concurrency that no higher measured level clearly beats, where "clearly" means
  the verdict is "higher" and the gain is at least ``KNEE_GAIN_PER_DOUBLING_PCT`` per doubling
  of concurrency. If every level is beaten by a later one, the knee is the largest measured.
- Highest rate within budget (MLPerf "Server"): the highest open-loop request rate (req/s,
  Poisson arrivals) whose p99 <= the budget, per variant, protocol and client batch size, among
  the rates the server kept up with (served >= ``RATE_KEPT_UP_SHARE`` of the offered load).
- Saturation over concurrency (``saturation_over_concurrency``): going up the curve, queue time
  grows clearly while throughput shows no gain (not "higher", median change under 5%): the
  added requests only wait.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tritonlab.analysis.aggregate import VariantSummary, same_offered_load
from tritonlab.analysis.verdicts import (
    HIGHER,
    LOWER,
    MIN_EFFECT_PCT,
    NO_CLEAR,
    Verdict,
    compare,
)

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
}
RATE_KEPT_UP_SHARE = 0.9  # an open-loop rate counts only if >= 90% of it was served
SATURATION_QUEUE_GROWTH_PCT = 50.0  # queue time up by at least this much ...


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

    @property
    def curve_key(self) -> str:
        """``<variant>/<protocol>/b<batch>``: the configuration, without the load level."""
        return f"{self.variant}/{self.protocol}/b{self.batch_size}"

    @property
    def load_label(self) -> str:
        if self.request_rate_per_s is not None:
            return f"{self.protocol}, batch {self.batch_size}, {self.request_rate_per_s:g} req/s"
        return f"{self.protocol}, batch {self.batch_size}, concurrency {self.concurrency}"

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
            "load_generator_fell_behind": self.load_generator_fell_behind,
        }


@dataclass(frozen=True)
class Pick:
    kind: str  # "throughput-first" | "latency-first"
    point: OperatingPoint
    justification: str  # one paragraph: action / result / judgement
    verdicts: dict[str, Verdict]  # against the baseline at the same load key

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "point": self.point.to_dict(),
            "justification": self.justification,
            "verdicts": {k: v.to_dict() for k, v in self.verdicts.items()},
        }


@dataclass(frozen=True)
class Saturation:
    """A step up a concurrency curve where the extra requests only queued."""

    curve: str
    concurrency_before: int
    concurrency_after: int
    queue_us_before: float
    queue_us_after: float
    throughput_verdict: Verdict
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "curve": self.curve,
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
    points: list[OperatingPoint]
    frontier: list[OperatingPoint]  # sorted by throughput
    throughput_pick: Pick | None
    latency_pick: Pick | None
    knees: dict[str, int]
    max_rate_within_budget: dict[str, float]
    summary_line: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "latency_budget_p99_us": self.latency_budget_p99_us,
            "target_load_infer_per_s": self.target_load_infer_per_s,
            "points": [p.to_dict() for p in self.points],
            "frontier": [p.to_dict() for p in self.frontier],
            "throughput_pick": self.throughput_pick.to_dict() if self.throughput_pick else None,
            "latency_pick": self.latency_pick.to_dict() if self.latency_pick else None,
            "knees": dict(self.knees),
            "max_rate_within_budget": dict(self.max_rate_within_budget),
            "summary_line": self.summary_line,
            "method": {
                "knee": "smallest concurrency that no higher level clearly beats (verdict "
                f"'higher' and at least {KNEE_GAIN_PER_DOUBLING_PCT:g}% per doubling); the "
                "largest level if every level is beaten",
                "frontier": "no other point has throughput >= and p99 <= with one strictly better",
                "figures": "medians over repeats; verdicts as in the experiment log",
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
        load_generator_fell_behind=any(
            "not able to keep up" in w for c in s.cells for w in c.perf.warnings
        ),
    )


def pareto_frontier(points: list[OperatingPoint]) -> list[OperatingPoint]:
    """Points no other point dominates (>= throughput and <= p99, one strictly), by throughput."""

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


def closed_loop_curves(summaries: list[VariantSummary]) -> dict[str, list[VariantSummary]]:
    """``<variant>/<protocol>/b<batch>`` -> its closed-loop summaries, by concurrency."""
    curves: dict[str, list[VariantSummary]] = defaultdict(list)
    for s in summaries:
        st = s.settings
        if st.request_rate_per_s is None and st.concurrency and s.throughput.median is not None:
            curves[f"{s.variant.name}/{st.protocol}/b{st.batch_size}"].append(s)
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
        st = lower.settings
        curve_key = f"{lower.variant.name}/{st.protocol}/b{st.batch_size}"
        text = (
            f"Saturated from concurrency {c0}: going to {c1}, queue time rose from {q0:,.0f} "
            f"to {q1:,.0f} µs per request with no throughput gain ({tput.phrase()}): the extra "
            "requests in flight only wait, so more concurrency adds latency, not throughput."
        )
        return Saturation(curve_key, c0, c1, q0, q1, tput, text)
    return None


def _max_rates(points: list[OperatingPoint], budget_us: float) -> dict[str, float]:
    best: dict[str, float] = {}
    for p in points:
        if p.request_rate_per_s is None or p.latency_p99_us > budget_us:
            continue
        if p.throughput_infer_per_s < RATE_KEPT_UP_SHARE * p.request_rate_per_s * p.batch_size:
            continue  # the server fell behind the offered rate: its p99 is not of that load
        if p.load_generator_fell_behind:
            continue  # perf_analyzer delayed requests: the offered rate was not really offered
        best[p.curve_key] = max(best.get(p.curve_key, 0.0), p.request_rate_per_s)
    return dict(sorted(best.items()))


def _fmt_point(p: OperatingPoint) -> str:
    return (
        f"'{p.description}' at {p.load_label}: {p.throughput_infer_per_s:,.0f} infer/s, "
        f"p99 {p.latency_p99_us:,.0f} µs"
    )


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _action(p: OperatingPoint) -> str:
    return f"'{p.description}' ({p.variant}), clients at {p.load_label}"


def _result(p: OperatingPoint) -> str:
    return f"{p.throughput_infer_per_s:,.0f} infer/s at p99 {p.latency_p99_us:,.0f} µs"


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
    if goal == "throughput":
        if tput == HIGHER:
            cost = "a longer tail" if p99 == HIGHER else "no clear cost in tail latency"
            cost = "a shorter tail as well" if p99 == LOWER else cost
            return f"the change pays: more throughput than the baseline, with {cost}."
        if baseline_over_budget:
            return (
                "its throughput is not clearly above the baseline's at this load; its edge is "
                "that it stays within the budget where the baseline does not."
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


class _Picker:
    """Shared state for building the two picks: summaries by point, baselines by load key."""

    def __init__(self, pairs: list[tuple[OperatingPoint, VariantSummary]], baseline: str) -> None:
        self.summary = {(p.variant, p.load_key): s for p, s in pairs}
        self.baseline = baseline

    def of(self, p: OperatingPoint) -> VariantSummary:
        return self.summary[(p.variant, p.load_key)]

    def baseline_over_budget(self, p: OperatingPoint, budget_us: float) -> bool | None:
        ref = self.summary.get((self.baseline, p.load_key))
        p99 = ref.latency_p99.median if ref else None
        return None if p99 is None else p99 > budget_us

    def baseline_verdicts(self, p: OperatingPoint) -> dict[str, Verdict]:
        ref = self.summary.get((self.baseline, p.load_key))
        if ref is None:
            return {}
        s = self.of(p)
        throughput = compare("throughput", ref.throughput, s.throughput)
        if not same_offered_load(ref, s):
            # Open-loop cells at a fraction of each configuration's own peak: throughput follows
            # the offered rate, so only the tails can be compared.
            throughput = Verdict(
                "throughput",
                NO_CLEAR,
                None,
                throughput.reference_median,
                throughput.variant_median,
                "not comparable: different offered rates",
            )
        return {
            "throughput": throughput,
            "latency_p99": compare("p99", ref.latency_p99, s.latency_p99),
        }

    def runner_up_sentence(
        self, pick: OperatingPoint, runner: OperatingPoint | None, figure: str
    ) -> str:
        if runner is None:
            return "No other configuration qualified, so there is no runner-up to weigh it against."
        attr = "throughput" if figure == "throughput" else "latency_p99"
        verdict = compare(figure, getattr(self.of(runner), attr), getattr(self.of(pick), attr))
        if verdict.word == NO_CLEAR:
            return (
                f"Its lead over the runner-up, {_fmt_point(runner)}, is not clear given the "
                f"noise ({figure} {verdict.phrase()}; rule: {verdict.method}): either is a sound "
                "choice; re-measure with more repeats to separate them."
            )
        return (
            f"It beats the runner-up, {_fmt_point(runner)}, on {figure}: {verdict.phrase()} "
            f"(rule: {verdict.method})."
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
                f"{p.request_rate_per_s or 0:,.0f} req/s, so throughput is not compared): p99 "
                f"{ref.latency_p99.median or 0:,.0f} µs, {verdicts['latency_p99'].phrase()}."
            )
        return (
            f"Against the baseline at the same load ({ref.throughput.median or 0:,.0f} infer/s, "
            f"p99 {ref.latency_p99.median or 0:,.0f} µs): throughput "
            f"{verdicts['throughput'].phrase()}, p99 {verdicts['latency_p99'].phrase()}."
        )


def _best_other(
    candidates: list[OperatingPoint],
    pick: OperatingPoint,
    better: Callable[[OperatingPoint], tuple[float, float, str]],
) -> OperatingPoint | None:
    others = [c for c in candidates if _config_of(c) != _config_of(pick)]
    return min(others, key=better) if others else None


def recommend(
    summaries: list[VariantSummary],
    latency_budget_p99_us: float,
    target_load_infer_per_s: float | None = None,
) -> Recommendations:
    """Frontier, picks, knees and rates within budget from a sweep's summaries."""
    pairs = [(p, s) for s in summaries if (p := operating_point(s)) is not None]
    points = [p for p, _ in pairs]
    picker = _Picker(pairs, BASELINE)
    budget = latency_budget_p99_us

    throughput_pick = None
    within = [p for p in points if p.latency_p99_us <= budget]
    if within:

        def by_throughput(q: OperatingPoint) -> tuple[float, float, str]:
            return (-q.throughput_infer_per_s, q.latency_p99_us, q.variant)

        best = min(within, key=by_throughput)
        runner = _best_other(within, best, by_throughput)
        verdicts = picker.baseline_verdicts(best)
        text = (
            f"Action: serve {_action(best)}. Result: {_result(best)}, the highest throughput "
            f"of the {_n(len(points), 'measured operating point')} whose p99 stays within the "
            f"{budget:,.0f} µs budget ({len(within)} qualified). "
            + picker.baseline_sentence(best, verdicts)
            + " Judgement: "
            + _judgement(best, verdicts, "throughput", picker.baseline_over_budget(best, budget))
            + " "
            + picker.runner_up_sentence(best, runner, "throughput")
        )
        throughput_pick = Pick("throughput-first", best, text, verdicts)

    latency_pick = None
    if target_load_infer_per_s is not None:
        carrying = [p for p in points if p.throughput_infer_per_s >= target_load_infer_per_s]
        if carrying:

            def by_p99(q: OperatingPoint) -> tuple[float, float, str]:
                return (q.latency_p99_us, -q.throughput_infer_per_s, q.variant)

            best = min(carrying, key=by_p99)
            runner = _best_other(carrying, best, by_p99)
            verdicts = picker.baseline_verdicts(best)
            budget_note = (
                "within" if best.latency_p99_us <= budget else "above"
            ) + f" the {budget:,.0f} µs budget"
            text = (
                f"Action: serve {_action(best)}. Result: {_result(best)}, the lowest p99 "
                f"({budget_note}) of the {_n(len(carrying), 'operating point')} that carry the "
                f"target load of {target_load_infer_per_s:,.0f} infer/s. "
                + picker.baseline_sentence(best, verdicts)
                + " Judgement: "
                + _judgement(best, verdicts, "latency")
                + " "
                + picker.runner_up_sentence(best, runner, "p99")
            )
            latency_pick = Pick("latency-first", best, text, verdicts)

    curves = closed_loop_curves(summaries)
    knees = {key: k for key, curve in sorted(curves.items()) if (k := knee_concurrency(curve))}
    max_rates = _max_rates(points, budget)
    return Recommendations(
        latency_budget_p99_us=budget,
        target_load_infer_per_s=target_load_infer_per_s,
        points=points,
        frontier=pareto_frontier(points),
        throughput_pick=throughput_pick,
        latency_pick=latency_pick,
        knees=knees,
        max_rate_within_budget=max_rates,
        summary_line=summary_line(
            summaries, picker, throughput_pick, latency_pick, budget, target_load_infer_per_s
        ),
    )


def saturation_findings(summaries: list[VariantSummary]) -> list[Saturation]:
    """``saturation_over_concurrency`` for every closed-loop curve of the sweep."""
    found = []
    for curve in closed_loop_curves(summaries).values():
        sat = saturation_over_concurrency(curve)
        if sat is not None:
            found.append(sat)
    return found


def summary_line(
    summaries: list[VariantSummary],
    picker: _Picker,
    throughput_pick: Pick | None,
    latency_pick: Pick | None,
    budget_us: float,
    target: float | None,
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
    repeats = max(len(s.cells) for s in summaries)
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
        + f", {repeats} interleaved repeat{'s' if repeats != 1 else ''} per cell, recording "
        "throughput and p95/p99"
    )
    choices = []
    if throughput_pick is not None:
        p = throughput_pick.point
        verdict = throughput_pick.verdicts.get("throughput")
        vs = f", {verdict.phrase()} vs. the baseline" if verdict and p.variant != BASELINE else ""
        choices.append(
            f"'{p.description}' for throughput-first use ({p.throughput_infer_per_s:,.0f} "
            f"infer/s{vs}, p99 {p.latency_p99_us:,.0f} µs within a {budget_us:,.0f} µs budget)"
        )
    if latency_pick is not None and target is not None:
        p = latency_pick.point
        choices.append(
            f"'{p.description}' for latency-first use (p99 {p.latency_p99_us:,.0f} µs while "
            f"carrying {p.throughput_infer_per_s:,.0f} infer/s, target {target:,.0f})"
        )
    if not choices:
        return action + "; no configuration met the latency budget or the target load."
    tp, lp = throughput_pick, latency_pick
    if tp is not None and lp is not None and tp.point.variant == lp.point.variant:
        judgement = (
            "here one server configuration serves both goals; what differs is the load it is "
            "run at, so the operating point (concurrency or rate) must be chosen for the scenario"
        )
    else:
        judgement = (
            "maximum throughput and low latency are different optima, so the configuration "
            "must be chosen for the scenario"
        )
    return f"{action}; chose {' and '.join(choices)}: {judgement}."


RECOMMENDATIONS_FILE = "recommendations.json"


def recommendations_from_manifest(
    manifest: Mapping[str, Any], summaries: list[VariantSummary]
) -> Recommendations | None:
    """The run's recommendations when its manifest names a latency budget (sweeps do)."""
    sweep = manifest.get("sweep")
    if not isinstance(sweep, Mapping) or not sweep.get("latency_budget_p99_us"):
        return None
    target = sweep.get("target_load_infer_per_s")
    return recommend(
        summaries,
        float(sweep["latency_budget_p99_us"]),
        None if target is None else float(target),
    )
