"""The "Recommendations" section of the experiment log (sweeps only), in markdown.

It restates ``results/recommendations.json`` for a reader: the project line, the two picks with
their justification and verdicts, the Pareto frontier, the knee of every concurrency curve, the
highest open-loop rate within the budget, and any saturation found going up a curve. The rules
behind each item are quoted from ``report.recommend_summary_text`` (``RULES``) so the section can be
checked by hand: every repeat's p99 within the budget, the points excluded because perf_analyzer
could not keep up the requested rate, and the tie-break among points within each other's noise.
"""

from __future__ import annotations

import itertools

from tritonlab.decisions.frontier import after_knee, closed_loop_curves, saturation_findings
from tritonlab.decisions.recommend_records import (
    BASELINE,
    KNEE_GAIN_PER_DOUBLING_PCT,
    SATURATION_QUEUE_GROWTH_PCT,
    OperatingPoint,
    Pick,
    Recommendations,
)
from tritonlab.report.recommend_summary_text import RULES, saturation_text, summary_line
from tritonlab.report.recommend_text import decided_by, exclusion_note, justification
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.load_drift import MIN_CONFIGS, MIN_SHIFT_PCT, disturbed_blocks
from tritonlab.stats.summary import SHOWN_GAP, span_digits


def _load(p: OperatingPoint) -> str:
    if p.request_rate_per_s is not None:
        rate = f"{p.request_rate_per_s:g} req/s ({p.arrivals.word})"
        return f"{p.protocol}, b{p.batch_size}, {rate}"
    return f"{p.protocol}, b{p.batch_size}, concurrency {p.concurrency}"


def _pick(title: str, pick: Pick | None, missing: str, recs: Recommendations) -> list[str]:
    if pick is None:
        return [f"**{title}.** {missing}", ""]
    verdicts = "; ".join(f"{k}: {v.phrase()}" for k, v in pick.verdicts.items())
    p, tie = pick.point, pick.tie_break
    lines = [
        f"**{title}: {p.description}** ({_load(p)}; median p99 {p.latency_p99_us:,.0f} µs, "
        f"worst repeat {p.worst_p99_us:,.0f} µs, {p.instance_count} instance"
        f"{'' if p.instance_count == 1 else 's'}).",
        "",
        justification(pick, recs),
        "",
        (
            "No verdict against the baseline: the pick is the baseline configuration itself."
            if p.variant == BASELINE
            else f"Verdicts against the baseline at the same load: {verdicts or 'n/a'}."
        ),  # a configuration against itself reads "+0%, CI +0% to +0%" (issue 36 audit)
        "",
    ]
    if tie is not None and tie.applied:
        lines[-1:-1] = [
            f"Tie-break applied on {tie.figure}: tied within the noise: "
            + ", ".join(f"{p.variant} at {p.load_key}" for p in [tie.chosen, *tie.tied])
            + f"; best by median {tie.best_by_median.variant} at "
            f"{tie.best_by_median.load_key}; chose {tie.chosen.variant} at "
            f"{tie.chosen.load_key}, decided by {decided_by(tie)}.",
            "",
        ]
    return lines


def _points_count(recs: Recommendations, summaries: list[VariantSummary]) -> str:
    """'42 measured operating points', or with several sequence lengths how many were measured
    and how many (the reference length's) are ranked (issue 36 audit: "from 3 measured
    operating points" where 9 were measured at three lengths)."""
    lengths = recs.lengths
    if lengths is None or not lengths.others:
        return f"{len(recs.points)} measured operating points"
    return (
        f"{len(summaries)} measured operating points, the {len(recs.points)} at the reference "
        f"sequence length {lengths.reference} ranked (lengths "
        f"{', '.join(str(n) for n in lengths.others)} left out of the ranking)"
    )


def _medians_over(recs: Recommendations) -> str:
    """What the points' medians are over: every repeat, or the blocks every point has."""
    ranked = {p.ranked_blocks for p in recs.points if p.ranked_blocks is not None}
    if not ranked:
        return "medians over repeats"
    return f"medians over the {min(ranked)} blocks every point has; see the frontier's note"


def _frontier_lines(recs: Recommendations) -> list[str]:
    """Return the Pareto frontier's subsection: its rule and one table row per point."""
    lines = [
        "### Pareto frontier (throughput against p99)",
        "",
        f"Rule: {RULES['frontier']}.",
        "",
        "| config | load | infer/s | p99 µs | worst repeat's p99 µs |",
        "|---|---|---|---|---|",
    ]
    # medians that decide membership are never printed as one number (issue 36 audit: two
    # frontier points at "5,854" µs, one on it by 0.5 µs)
    points = recs.frontier
    tput = span_digits(None, 0, *(p.throughput_infer_per_s for p in points))
    p99 = span_digits(None, 0, *(p.latency_p99_us for p in points))
    lines += [
        f"| {p.description} | {_load(p)} | {p.throughput_infer_per_s:,.{tput}f} | "
        f"{p.latency_p99_us:,.{p99}f} | {p.worst_p99_us:,.0f} |"
        for p in points
    ]
    counts = sorted({p.repeats for p in recs.eligible})
    ranked = {p.ranked_blocks for p in recs.eligible if p.ranked_blocks is not None}
    if len(counts) > 1 and ranked:
        lines += [
            "",
            f"The points rest on {counts[0]} to {counts[-1]} repeats (the extra rounds measured "
            "only the configurations a watched verdict needed), so the frontier, the picks and "
            f"their runner-ups rank medians over the {min(ranked)} blocks every point has (this "
            "table's figures; the worst repeat's p99 is over every repeat); the verdicts pair "
            "every block two points share, and the run's table gives each row's medians over "
            "all its repeats.",
        ]
    elif len(counts) > 1:
        lines += [
            "",
            f"The points rest on {counts[0]} to {counts[-1]} repeats, so the frontier, the "
            "picks and their runner-ups are chosen by medians over different blocks and may "
            "depend on the extra ones; the verdicts pair blocks and do not.",
        ]
    close = _close_pairs(points)
    if close:
        lines += [
            "",
            "Points on the frontier by a median margin under a tenth of a percent: "
            + "; ".join(close)
            + " (far narrower than any interval this run measured: a margin, not a difference).",
        ]
    return [*lines, ""]


def _close_pairs(points: list[OperatingPoint]) -> list[str]:
    """Frontier neighbours whose p99 medians differ by under ``SHOWN_GAP``: one is on the
    frontier only by a margin no verdict resolves."""
    out = []
    for a, b in itertools.pairwise(points):
        gap = abs(a.latency_p99_us - b.latency_p99_us)
        if gap < SHOWN_GAP * max(a.latency_p99_us, b.latency_p99_us):
            out.append(
                f"{a.description} at {a.load_key} and {b.description} at {b.load_key} (p99 "
                f"{a.latency_p99_us:,.1f} and {b.latency_p99_us:,.1f} µs)"
            )
    return out


def _knees_lines(recs: Recommendations, summaries: list[VariantSummary]) -> list[str]:
    """Return the knee of each concurrency curve as a table, with what the next level above it
    gave, or nothing when none was found."""
    if not recs.knees:
        return []
    curves = closed_loop_curves(summaries)
    disturbed = disturbed_blocks(summaries, "throughput")
    lines = [
        "### Knee of each concurrency curve",
        "",
        "The smallest concurrency that no higher measured level clearly beats (verdict "
        f'"higher" and at least {KNEE_GAIN_PER_DOUBLING_PCT:g}% per doubling of concurrency); '
        "the largest level measured when every level is beaten by a later one."
        + (
            " Each step compares one configuration at two loads, served by one server process, "
            "so its interval holds no process term."
            if any(s.throughput.process_sd_log > 0 for s in summaries)
            else ""
        )
        + (
            " A block is one where every configuration at a load read off its own median when "
            f"at least {MIN_CONFIGS} configurations (the A/A control not counted) were "
            "measured there in it, all on one side of their own medians, by a median shift of "
            f"{MIN_SHIFT_PCT:g}% or more; smaller shared shifts are not set apart."
            if disturbed
            else ""
        ),
        "",
        "| variant / protocol / client batch | knee (concurrency) "
        "| the next level above it (at the top of the curve: the step into it) |",
        "|---|---|---|",
    ]
    lines += [
        f"| {curve} | {knee} | {after_knee(curves.get(curve, []), knee, disturbed) or '—'} |"
        for curve, knee in recs.knees.items()
    ]
    return [*lines, ""]


def _open_loop_lines(recs: Recommendations) -> list[str]:
    """The highest open-loop rate within the budget per curve, or nothing without open loop."""
    open_loop = sorted(
        {p.curve_key for p in recs.points if p.request_rate_per_s is not None}, key=str
    )
    if not open_loop:
        return []
    lines = [
        "### Highest open-loop rate within the budget (MLPerf Server question)",
        "",
        f"Rule: {RULES['max_rate']}.",
        "",
        "| variant / protocol / client batch | req/s with every repeat's p99 <= budget |",
        "|---|---|",
    ]
    lines += [f"| {key} | {_rate_cell(recs, key)} |" for key in open_loop]
    return [*lines, ""]


def _rate_cell(recs: Recommendations, key: ConfigKey) -> str:
    """The highest rate within the budget, or why there is none: no rate kept every repeat
    within it, or the rates were excluded (perf_analyzer fell behind), which says nothing of
    the budget (issue 36 audit: excluded rows read as failing the budget)."""
    if key in recs.max_rate_within_budget:
        rate = recs.max_rate_within_budget[key]
        point = next(
            (p for p in recs.points if p.curve_key == key and p.request_rate_per_s == rate), None
        )
        if point is not None and point.warned_repeats:
            # the row answers the MLPerf Server question: a warning of the point travels with
            # it, as in the summary line (issue 36 audit)
            return (
                f"{rate:,.0f} (perf_analyzer warned in {point.warned_repeats} of its "
                f"{point.repeats} repeats)"
            )
        return f"{rate:,.0f}"
    rates = [p for p in recs.points if p.curve_key == key and p.request_rate_per_s is not None]
    excluded = [p for p in rates if p in recs.excluded]
    if rates and len(excluded) == len(rates):
        return "none to read: every rate measured was excluded (perf_analyzer fell behind)"
    if excluded:
        return (
            f"none of the {len(rates) - len(excluded)} rates measured kept every repeat within "
            f"it ({len(excluded)} more excluded: perf_analyzer fell behind)"
        )
    return "none of the measured rates"


def _saturation_lines(summaries: list[VariantSummary]) -> list[str]:
    """Return the saturation found going up each concurrency curve, or nothing when none was."""
    if not (saturations := saturation_findings(summaries)):
        return []
    lines = [
        "### Saturation over concurrency",
        "",
        f"Queue time up by at least {SATURATION_QUEUE_GROWTH_PCT:g}% (and clearly higher) "
        "from one concurrency level to the next while throughput shows no gain (not "
        '"higher", median change under 5%):',
        "",
    ]
    lines += [f"- `{s.curve}`: {saturation_text(s)}" for s in saturations]
    return [*lines, ""]


def recommendations_section(recs: Recommendations, summaries: list[VariantSummary]) -> list[str]:
    """Markdown lines for ``docs/experiment_log.md``."""
    budget = f"{recs.latency_budget_p99_us:,.0f} µs"
    target = (
        f"{recs.target_load_infer_per_s:,.0f} infer/s"
        if recs.target_load_infer_per_s is not None
        else "none given"
    )
    return [
        "## Recommendations",
        "",
        f"Latency budget (p99): {budget}; target load: {target}. From "
        f"{_points_count(recs, summaries)} ({_medians_over(recs)}), "
        f"{len(recs.excluded)} of them excluded; machine-readable in "
        "`results/recommendations.json`.",
        "",
        f"> {summary_line(recs)}",
        "",
        "Rules (from `decisions.recommend`):",
        "",
        f"- Budget: {RULES['budget']} (the highest repeat, not the median).",
        f"- Excluded: {RULES['excluded']}. "
        + (exclusion_note(recs) or "No point was excluded in this sweep."),
        f"- Throughput-first: {RULES['throughput_first']}; latency-first: "
        f"{RULES['latency_first']}.",
        f"- Tie-break: {RULES['tie_break']}. Two closed-loop points are compared even at "
        "different concurrencies; points under different offered rates are not comparable and "
        "are not tied.",
        f"- Runner-up: {RULES['runner_up']}.",
        f"- Different optima: {RULES['different_optima']}.",
        "",
        *_pick(
            "Throughput-first",
            recs.throughput_pick,
            f"No operating point kept every repeat's p99 within {budget}; raise the budget or "
            "lower the load.",
            recs,
        ),
        *_pick(
            "Latency-first",
            recs.latency_pick,
            "No target load was given (`recommend.target_load_infer_per_s` or `--target-load`)."
            if recs.target_load_infer_per_s is None
            else f"No operating point carried {target}.",
            recs,
        ),
        *_frontier_lines(recs),
        *_knees_lines(recs, summaries),
        *_open_loop_lines(recs),
        *_saturation_lines(summaries),
    ]
