"""Recommendations from a sweep: Pareto frontier, throughput-first and latency-first picks, the
knee of every concurrency curve, and the highest open-loop rate within a latency budget.

The policy: which points qualify and which one is picked, over ``VariantSummary`` (one per
variant and load point); the records are in ``recommend_records``, the maths (frontier, knee,
rates, saturation, each with its rule) in ``frontier``, the words in ``report.recommend_text``;
``docs/sweeps.md`` states the rules for users. Figures are medians over repeats (over the
blocks every point has, where extra rounds measured some points more: ``common_blocks``); every
comparison is a verdict (``compare``, or ``compare_figure`` where the offered loads must
match); no statistic is computed here.

- Excluded points: an open-loop point where perf_analyzer could not keep up the requested rate
  in any repeat is left out everywhere (frontier, picks, runner-ups, the rate table): that rate
  was not really offered. A point within the budget has EVERY repeat's p99 within it.
- Throughput-first pick: the highest median throughput within the budget; latency-first pick:
  the lowest median p99 among the points carrying the target load; then the tie-break.
- Tie-break: points whose pick figure shows "no clear difference" against the best median one,
  within ``TIE_MARGIN_PCT`` of it, are tied with it; among them prefer fewer instances, then a
  point the other figure (p99 for a throughput pick, throughput for a latency pick) separates
  clearly at the same load or as another load of the same configuration (its paired verdict;
  two configurations' figures at different loads measure the load, not the configuration),
  else the best median stays (``_Picker.select``).
- Runner-up: the best qualifying point of another configuration (variant, protocol or client
  batch size; another concurrency of the same one is no alternative). Verdicts against the
  baseline are taken at the pick's load point ("not comparable" when the loads differ).
- Summary line: "different optima" only when the two picks are different variants AND one is
  clearly better on its own figure (``optima_p99``, ``optima_throughput``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from tritonlab.decisions.frontier import (
    at_reference_length,
    knees,
    length_filter,
    max_rates_within_budget,
    pareto_frontier,
)
from tritonlab.decisions.recommend_records import (
    BASELINE,
    TIE_MARGIN_PCT,
    OperatingPoint,
    Pick,
    Recommendations,
    SweepShape,
    TieBreak,
    operating_point,
    point_rounds,
)
from tritonlab.repository.knobs import KNOB_LABELS
from tritonlab.stats.aggregate import VariantSummary, compare_figure
from tritonlab.stats.verdicts import HIGHER, LOWER, NO_CLEAR, NOT_COMPARABLE, Verdict, compare
from tritonlab.stats.workload import same_offered_load

if TYPE_CHECKING:
    from tritonlab.experiments.manifest import Manifest

RankKey = Callable[[OperatingPoint], tuple[float, ...]]


def _config_of(p: OperatingPoint) -> tuple[str, str, int]:
    return (p.variant, p.protocol, p.batch_size)


class _Picker:
    """Shared state for building the two picks: summaries by point, baselines by load key."""

    def __init__(self, pairs: list[tuple[OperatingPoint, VariantSummary]], baseline: str) -> None:
        self.summary = {(p.variant, p.load_key): s for p, s in pairs}
        self.points = {(p.variant, p.load_key): p for p, _ in pairs}
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

    def versus(self, figure: str, reference: OperatingPoint, subject: OperatingPoint) -> Verdict:
        """``subject`` against ``reference`` on ``figure`` ("throughput" or "p99"): two closed-loop
        points as they are, any other pair through ``compare_figure`` (loads must match)."""
        attr = "throughput" if figure == "throughput" else "latency_p99"
        ref, sub = self.of(reference), self.of(subject)
        if reference.request_rate_per_s is None and subject.request_rate_per_s is None:
            return compare(figure, getattr(ref, attr), getattr(sub, attr))
        return compare_figure(figure, attr, ref, sub)

    def select(self, candidates: list[OperatingPoint], figure: str, rank: RankKey) -> TieBreak:
        """The best by median, the points tied with it within the noise, and the tie-break."""
        best = min(candidates, key=rank)
        verdicts = [(c, self.versus(figure, best, c)) for c in candidates if c != best]
        # one repeat has no interval (no tie can be shown), and a point far behind by median is
        # not a practical alternative however wide the noise: medians rank
        tied = [
            c
            for c, v in verdicts
            if v.word == NO_CLEAR and v.has_interval and abs(v.change_pct or 0.0) <= TIE_MARGIN_PCT
        ]
        not_comparable = sum(v.word == NOT_COMPARABLE for _, v in verdicts)
        if not tied:
            return TieBreak(figure, best, [], best, None, not_comparable)
        group = sorted([best, *tied], key=rank)
        fewest = min(p.instance_count for p in group)
        few = [p for p in group if p.instance_count == fewest]
        chosen, separated = few[0], False
        other = "p99" if figure == "throughput" else "throughput"
        better = LOWER if other == "p99" else HIGHER
        for c in few[1:]:
            # a figure at another load measures the load, not the configuration: only the same
            # load, or another load of the same configuration (which load to run it at)
            comparable = c.load_key == chosen.load_key or _config_of(c) == _config_of(chosen)
            if comparable and self.versus(other, chosen, c).word == better:
                chosen, separated = c, True
                break
        rest = [p for p in group if p != chosen]
        next_in_tie = min(rest, key=rank)  # the best median the rule passed over
        decisive = None
        if chosen.instance_count < next_in_tie.instance_count:
            decided = "instances"
        elif separated and next_in_tie == few[0]:
            decided, decisive = other, self.versus(other, next_in_tie, chosen)
        else:
            decided = "median"
        others = sorted(rest, key=self.rank)
        return TieBreak(
            figure,
            best,
            others,
            chosen,
            next_in_tie,
            not_comparable,
            decided,
            self.versus(figure, next_in_tie, chosen),
            decisive,
        )

    def pick(
        self, kind: str, candidates: list[OperatingPoint], figure: str, budget_us: float
    ) -> Pick:
        """The pick among ``candidates`` on ``figure``, with its runner-up and baseline verdicts."""
        rank = self.by_throughput if figure == "throughput" else self.by_p99
        tb = self.select(candidates, figure, rank)
        best = tb.chosen
        others = [c for c in candidates if _config_of(c) != _config_of(best)]
        runner = min(others, key=rank) if others else None
        ref = self.summary.get((self.baseline, best.load_key))
        worst = ref.latency_p99.high if ref else None
        s = self.of(best)
        return Pick(
            kind,
            best,
            {}
            if ref is None
            else {
                "throughput": compare_figure("throughput", "throughput", ref, s),
                "latency_p99": compare_figure("p99", "latency_p99", ref, s),
            },
            runner,
            self.versus(figure, runner, best) if runner else None,
            tb,
            qualifying=len(candidates),
            baseline=ref,
            baseline_same_load=ref is None or same_offered_load(ref, self.of(best)),
            baseline_over_budget=None if worst is None else worst > budget_us,
            baseline_point=self.points.get((self.baseline, best.load_key)),
        )


def _at_load(picker: _Picker, figure: str, other: str, pick: OperatingPoint) -> Verdict | None:
    """``pick`` against configuration ``other`` measured at ``pick``'s own load, on ``figure``;
    None where ``other`` was not measured (or ranked) there."""
    ref = picker.points.get((other, pick.load_key))
    return None if ref is None else picker.versus(figure, ref, pick)


def _with_short_repeats(
    pick: Pick, summary: VariantSummary, target: float, ranked: frozenset[int | str] | None
) -> Pick:
    """``pick`` with its repeats under the target load counted, over its ranked blocks and
    over every repeat."""
    rounds = summary.throughput.by_round()
    return dataclasses.replace(
        pick,
        under_target_ranked=(
            sum(v < target for r, v in rounds.items() if r in ranked)
            if ranked is not None and pick.point.ranked_blocks is not None
            else None
        ),
        under_target_repeats=sum(v < target for v in rounds.values()),
    )


def common_blocks(summaries: list[VariantSummary]) -> frozenset[int | str] | None:
    """The blocks every point has, where the points rest on different blocks (extra rounds
    measured only the cells a watched verdict needed); None where they all rest on the same.
    The frontier and picks rank medians over these: a median over 28 blocks beside one over
    10 let the extra rounds (6-14% faster in one run) decide a ranking (issue 36 audit)."""
    blocks = [point_rounds(s) for s in summaries]
    if not blocks or all(b == blocks[0] for b in blocks):
        return None
    common = frozenset.intersection(*blocks)
    return common or None


def sweep_shape(summaries: list[VariantSummary], baseline: str = BASELINE) -> SweepShape | None:
    """What the sweep measured (model, configurations, knobs varied, loads, repeats)."""
    if not summaries:
        return None
    configs = {s.variant.name: s.variant for s in summaries}.values()
    return SweepShape(
        model=next(
            (s.model_name for s in summaries if s.variant.name == baseline), summaries[0].model_name
        ),
        variants=len({s.variant.name for s in summaries}),
        varied=tuple(
            name for name in KNOB_LABELS if len({repr(getattr(v, name)) for v in configs}) > 1
        ),
        protocols=tuple(sorted({s.settings.protocol for s in summaries})),
        concurrencies=tuple(
            sorted(
                s.settings.concurrency
                for s in summaries
                if s.settings.request_rate_per_s is None and s.settings.concurrency
            )
        ),
        arrivals=tuple(
            dict.fromkeys(
                s.settings.arrivals.word
                for s in summaries
                if s.settings.request_rate_per_s is not None
            )
        ),
        repeats=min(len(s.cells) for s in summaries),
        most_repeats=max(len(s.cells) for s in summaries),
    )


def recommend(
    summaries: list[VariantSummary],
    latency_budget_p99_us: float,
    target_load_infer_per_s: float | None = None,
) -> Recommendations:
    """Frontier, picks, knees and rates within budget (req/s) from a sweep's summaries; with
    several sequence lengths only the reference length's points are ranked."""
    lengths = length_filter(summaries)
    summaries = at_reference_length(summaries)
    measured = [s for s in summaries if operating_point(s) is not None]
    unmeasured = [f"{s.variant.name} at {s.load_key}" for s in summaries if s not in measured]
    ranked = common_blocks(measured)
    pairs = [(p, s) for s in measured if (p := operating_point(s, ranked)) is not None]
    points = [p for p, _ in pairs]
    excluded = [p for p in points if p.load_generator_fell_behind]
    eligible = [p for p in points if not p.load_generator_fell_behind]
    picker = _Picker(pairs, BASELINE)
    budget = latency_budget_p99_us

    throughput_pick = None
    if within := [p for p in eligible if p.within(budget)]:
        near = sum(1 for p in eligible if p.latency_p99_us <= budget and not p.within(budget))
        pick = picker.pick("throughput-first", within, "throughput", budget)
        throughput_pick = dataclasses.replace(pick, near_budget=near)

    latency_pick = None
    if target_load_infer_per_s is not None:
        carrying = [p for p in eligible if p.throughput_infer_per_s >= target_load_infer_per_s]
        if carrying:
            latency_pick = picker.pick("latency-first", carrying, "p99", budget)
            latency_pick = _with_short_repeats(
                latency_pick, picker.of(latency_pick.point), target_load_infer_per_s, ranked
            )

    optima_p99 = optima_tput = same_p99 = same_tput = None
    if throughput_pick and latency_pick:
        a, b = throughput_pick.point, latency_pick.point
        if a.variant != b.variant:
            optima_p99 = picker.versus("p99", a, b)  # the latency pick against the other
            same_p99 = _at_load(picker, "p99", a.variant, b)
            same_tput = _at_load(picker, "throughput", b.variant, a)
            optima_tput = picker.versus("throughput", b, a)  # the throughput pick against it
    return Recommendations(
        latency_budget_p99_us=budget,
        target_load_infer_per_s=target_load_infer_per_s,
        points=points,
        frontier=pareto_frontier(eligible),
        throughput_pick=throughput_pick,
        latency_pick=latency_pick,
        knees=knees(summaries),
        max_rate_within_budget=max_rates_within_budget(eligible, budget),
        shape=sweep_shape(summaries),
        excluded=excluded,
        unmeasured=unmeasured,
        lengths=lengths,
        optima_p99=optima_p99,
        optima_throughput=optima_tput,
        optima_p99_same_load=same_p99,
        optima_throughput_same_load=same_tput,
    )


def recommendations_from_manifest(
    manifest: Manifest, summaries: list[VariantSummary]
) -> Recommendations | None:
    """The run's recommendations when its manifest names a latency budget (sweeps do)."""
    sweep = manifest.sweep
    if sweep is None or not sweep.latency_budget_p99_us:
        return None
    return recommend(summaries, sweep.latency_budget_p99_us, sweep.target_load_infer_per_s)
