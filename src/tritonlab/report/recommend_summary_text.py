"""The words of a sweep's recommendations as a whole: the rules in prose, the summary line
(the project's one paragraph: action, result, judgement), saturation findings, and
``recommendations.json``, which carries the records with these words beside them.
"""

from __future__ import annotations

from typing import Any

from tritonlab.decisions.recommend_records import (
    BASELINE,
    KNEE_GAIN_PER_DOUBLING_PCT,
    RATE_KEPT_UP_SHARE,
    TIE_MARGIN_PCT,
    OperatingPoint,
    Pick,
    Recommendations,
    Saturation,
    SweepShape,
    TieBreak,
)
from tritonlab.report.recommend_text import (
    FELL_BEHIND_REASON,
    TIE_BREAK_ORDER,
    bound_cores,
    control_note,
    decided_by,
    doubt_sentence,
    exclusion_note,
    justification,
    n_of,
    points_note,
)
from tritonlab.repository.knobs import KNOB_LABELS
from tritonlab.stats.verdicts import (
    HIGHER,
    LOWER,
    MIN_EFFECT_PCT,
    NO_CLEAR,
    NO_VERDICT,
    endpoint_text,
)

# The rules as one line each, for recommendations.json and the log (``decisions.recommend``'s
# module docstring in full).
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
    f"one, with the verdict's paired estimate of the change within {TIE_MARGIN_PCT:g}%, are "
    f"tied; prefer {TIE_BREAK_ORDER}",
    "runner_up": "best qualifying point (by median) of another variant, protocol or client "
    "batch size; its verdict against the pick is stated",
    "knee": "smallest concurrency that no higher level clearly beats (verdict 'higher' and at "
    f"least {KNEE_GAIN_PER_DOUBLING_PCT:g}% per doubling); the largest level if every level is "
    "beaten",
    "max_rate": "highest Poisson open-loop rate whose p99 is within the budget in every "
    "repeat, among the rates perf_analyzer kept up and the server served at least "
    f"{RATE_KEPT_UP_SHARE:.0%} of (constant-rate loads are not counted: evenly spaced requests "
    "queue less than random arrivals)",
    "different_optima": "only when the picks are different variants and the latency pick's p99 "
    "is clearly lower or the throughput pick's throughput clearly higher",
}


def saturation_text(s: Saturation) -> str:
    """The saturation step in one sentence: queue time before and after (µs), no gain."""
    v = s.throughput_verdict
    head = (
        f"Saturated from concurrency {s.concurrency_before}: going to {s.concurrency_after}, "
        f"queue time rose from {s.queue_us_before:,.0f} to {s.queue_us_after:,.0f} µs per request"
    )
    ci = v.ci95_change_pct
    if ci is not None and ci[1] >= MIN_EFFECT_PCT:
        # the interval allows a real gain: "no gain" would outrun it (issue 36 audit: said of
        # +4%, CI -0.2% to +13%)
        return (
            f"{head} with no clear throughput gain ({v.phrase()}; the interval allows up to "
            f"{endpoint_text(ci[1])}): the extra requests in flight clearly wait longer; what "
            "throughput they add, if any, these rounds do not show."
        )
    return (
        f"{head} with no throughput gain ({v.phrase()}): the extra requests in flight only "
        "wait, so more concurrency adds latency, not throughput."
    )


def _load_not_configuration(recs: Recommendations) -> str | None:
    """Where the picks ran at different loads and each configuration was also measured at the
    other's load: None when each configuration is clearly better at its own pick's load on
    that pick's goal (different optima); else which configuration the same-load verdicts let
    serve both goals, each at its own load (issue 36 audit: "different optima" for picks at
    concurrency 16 and 1, where at concurrency 1 the two were not separated on p99)."""
    tp, lp = recs.throughput_pick, recs.latency_pick
    same_p99, same_tput = recs.optima_p99_same_load, recs.optima_throughput_same_load
    if tp is None or lp is None or tp.point.load_key == lp.point.load_key:
        return None
    if same_p99 is None or same_tput is None:
        return None
    p99_apart, tput_apart = same_p99.word == LOWER, same_tput.word == HIGHER
    if p99_apart and tput_apart:
        return None
    at_lp = (
        f"at the latency-first pick's load ({lp.point.load_key}) its p99 against the "
        f"throughput-first configuration's there: {same_p99.phrase()}"
    )
    at_tp = (
        f"at the throughput-first pick's load ({tp.point.load_key}) its throughput against "
        f"the latency-first configuration's there: {same_tput.phrase()}"
    )
    there = next(
        (
            p
            for p in recs.points
            if p.variant == tp.point.variant and p.load_key == lp.point.load_key
        ),
        None,
    )
    carried = (
        f" (its median throughput there {there.throughput_infer_per_s:,.0f} infer/s, against "
        f"the target of {recs.target_load_infer_per_s:,.0f})"
        if there is not None and recs.target_load_infer_per_s is not None
        else ""
    )
    if tput_apart:
        who = (
            f"'{tp.point.description}' is clearly ahead on throughput at its load ({at_tp}), "
            f"and at the latency-first pick's load it is not separated on p99 ({at_lp}"
            f"{carried})"
        )
    elif p99_apart:
        who = (
            f"'{lp.point.description}' is clearly ahead on p99 at its load ({at_lp}), and at "
            f"the throughput-first pick's load it is not separated on throughput ({at_tp})"
        )
    else:
        who = f"neither configuration is clearly better at either load ({at_lp}; {at_tp})"
    return (
        f"the two picks differ in their load as much as in their configuration: {who}; so "
        "these repeats do not show that the two goals need different configurations, only "
        "different loads (concurrency or rate)"
    )


def _two_goals(recs: Recommendations) -> str:
    """The summary line's judgement: whether the two picks are really different optima."""
    tp, lp, target = recs.throughput_pick, recs.latency_pick, recs.target_load_infer_per_s
    if tp is None or lp is None:
        if tp is None:
            return (
                "no operating point kept every repeat's p99 within the budget, so there is no "
                "throughput-first pick"
            )
        if target is None:
            return "no target load was given, so there is no latency-first pick"
        return "no operating point carried the target load, so there is no latency-first pick"
    if tp.point == lp.point:
        return "here one operating point serves both goals"
    p99, tput = recs.optima_p99, recs.optima_throughput
    if p99 is None or tput is None:  # the same variant at two loads
        return (
            "here one server configuration serves both goals; what differs is the load it is "
            "run at, so the operating point (concurrency or rate) must be chosen for the scenario"
        )
    evidence = (
        f"the latency-first pick's p99 {p99.phrase()} against the throughput-first pick's; the "
        f"throughput-first pick's throughput {tput.phrase()} against the latency-first pick's"
        + points_note(tp.point, lp.point)
    )
    if p99.word == LOWER or tput.word == HIGHER:
        if (load := _load_not_configuration(recs)) is not None:
            return f"{load} ({evidence})"
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
    if NO_VERDICT in (p99.word, tput.word):
        return (
            f"the two picks have no verdict against each other ({evidence}), so this sweep does "
            "not show whether the two goals have different optima"
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


def _action(shape: SweepShape, excluded: int) -> str:
    varied = [KNOB_LABELS[name] for name in shape.varied]
    levels, repeats = shape.concurrencies, shape.repeats
    return (
        f"Deployed the ONNX model {shape.model} on NVIDIA Triton Inference Server and swept "
        f"{shape.variants} serving configuration{'s' if shape.variants != 1 else ''}"
        + (f" ({', '.join(varied)})" if varied else "")
        + " with perf_analyzer over "
        + (f"concurrency {levels[0]}–{levels[-1]}" if levels else "open-loop load")
        + f", {'/'.join(p.upper() if p == 'http' else 'gRPC' for p in shape.protocols)}"
        + (f" and {' and '.join(shape.arrivals)} open-loop load" if shape.arrivals else "")
        + f", {repeats} interleaved repeat{'s' if repeats != 1 else ''} per cell"
        + (
            f" (up to {shape.most_repeats} where adaptive repeats measured more)"
            if shape.most_repeats > repeats
            else ""
        )
        + ", recording throughput and p95/p99"
        + (
            f"; excluded {n_of(excluded, 'operating point')} where perf_analyzer could not keep "
            "up the requested rate"
            if excluded
            else ""
        )
    )


def summary_line(recs: Recommendations) -> str:
    """The seed's one-paragraph project description (action, result, judgement), measured."""
    if recs.shape is None:
        return "No operating points were measured."
    action = _action(recs.shape, len(recs.excluded))
    budget_us, target = recs.latency_budget_p99_us, recs.target_load_infer_per_s
    choices = []
    if recs.throughput_pick is not None:
        p = recs.throughput_pick.point
        verdict = recs.throughput_pick.verdicts.get("throughput")
        vs = f", {verdict.phrase()} vs. the baseline" if verdict and p.variant != BASELINE else ""
        if vs and p.ranked_blocks is not None and verdict and verdict.pairs != p.ranked_blocks:
            # the verdict pairs more blocks than the median beside it (issue 36 audit: 15,968
            # infer/s over 10 blocks beside +768% over 46, the median outside its interval)
            vs += f" over the {verdict.pairs} blocks both have"
        choices.append(
            f"'{p.description}' for throughput-first use ({p.throughput_infer_per_s:,.0f} "
            f"infer/s{vs}, p99 {p.latency_p99_us:,.0f} µs with every repeat within a "
            f"{budget_us:,.0f} µs budget{_level_with(recs.throughput_pick)})"
        )
    if recs.latency_pick is not None and target is not None:
        p = recs.latency_pick.point
        arrivals = _under_arrivals(recs, p)
        choices.append(
            f"'{p.description}' for latency-first use (p99 {p.latency_p99_us:,.0f} µs while "
            f"carrying {p.throughput_infer_per_s:,.0f} infer/s, target {target:,.0f}"
            + (
                f"; that figure is {p.medians_words}, and {_short_words(recs.latency_pick)} "
                f"under the target (the lowest {low:,.0f})"
                if (low := p.throughput_low_infer_per_s) is not None and low < target
                else ""
            )
            + arrivals
            + f"{_level_with(recs.latency_pick)})"
        )
    if not choices:
        return action + "; no configuration met the latency budget or the target load."
    loads = {p.point.load_key for p in (recs.throughput_pick, recs.latency_pick) if p is not None}
    controls = "".join(control_note(recs, key) for key in sorted(loads))
    ranked = {
        p.point.ranked_blocks
        for p in (recs.throughput_pick, recs.latency_pick)
        if p is not None and p.point.ranked_blocks is not None
    }
    blocks = (
        f" The picks' figures are medians over the {min(ranked)} blocks every point has (extra "
        "rounds measured some points more; the ranking reads the blocks they all have), while "
        "their verdicts pair every block both sides have, so a verdict can rest on other "
        "blocks than the median beside it."
        if ranked
        else ""
    )
    bound = [
        (p.kind, said)
        for p in (recs.throughput_pick, recs.latency_pick)
        if p is not None and (said := bound_cores(recs, p.point)) is not None
    ]
    ceiling = (
        " Caveat: "
        + "; ".join(f"at the {kind} pick {b.text} ({b.label})" for kind, b in bound)
        + f": {bound[0][1].meaning}."
        if bound
        else ""
    )
    # a pick the response cache served carries that its figures need inputs repeating as
    # often, in the summary as in its section (issue 36 audit: +768% quoted without it)
    cached = "".join(
        f" Caveat: the response cache answered {p.point.cache_hit_share:.0%} of the {p.kind} "
        "pick's requests; its figures hold for traffic whose inputs repeat as often."
        for p in (recs.throughput_pick, recs.latency_pick)
        if p is not None and p.point.cache_hit_share is not None
    )
    lengths = (
        f" The picks are at sequence length {recs.lengths.reference} only (lengths "
        f"{', '.join(str(n) for n in sorted(recs.lengths.others))} were measured, not ranked)."
        if recs.lengths is not None
        else ""
    )  # a pick is one length's answer (issue 36 audit: quoted beside other lengths' tables)
    return (
        f"{action}; chose {' and '.join(choices)}: {_two_goals(recs)}.{lengths}{blocks}"
        f"{controls}{cached}{ceiling}{doubt_sentence(recs)}"
    )


def _short_words(pick: Pick) -> str:
    """How many of a latency pick's repeats fell under the target load, e.g. "4 of those 10
    blocks (5 of its 27 repeats) were" or "1 of its 3 repeats was"."""
    p, every = pick.point, pick.under_target_repeats
    if pick.under_target_ranked is not None and p.ranked_blocks is not None:
        return (
            f"{pick.under_target_ranked} of those {p.ranked_blocks} blocks ({every} of its "
            f"{p.repeats} repeats) were"
        )
    return f"{every} of its {p.repeats} repeats {'was' if every == 1 else 'were'}"


def _under_arrivals(recs: Recommendations, pick: OperatingPoint) -> str:
    """'' unless the latency pick is a closed-loop point and the same configuration was also
    offered open-loop arrivals: then its p99 there (issue 36 audit: 740 µs at concurrency 1,
    one request at a time, where Poisson arrivals at 1,860 req/s gave 5,571 µs)."""
    if pick.request_rate_per_s is not None:
        return ""
    rates = [
        q
        for q in recs.points
        if q.variant == pick.variant
        and q.protocol == pick.protocol
        and q.batch_size == pick.batch_size
        and q.request_rate_per_s is not None
    ]
    if not rates:
        return ""
    # a rate perf_analyzer could not keep up was not really offered: never quoted as the
    # configuration's open-loop p99 (issue 36 audit: a worst repeat from such a point)
    kept = [q for q in rates if not q.load_generator_fell_behind]
    highest = max(rates, key=lambda q: q.request_rate_per_s or 0.0)
    dropped = (
        ""
        if not highest.load_generator_fell_behind
        else f"; a higher rate, {highest.request_rate_per_s or 0.0:,.0f} req/s, is left out: "
        "perf_analyzer could not keep it up"
    )
    if not kept:
        return (
            f"; that is closed loop at concurrency {pick.concurrency}: the same configuration's "
            f"open-loop rates (up to {highest.request_rate_per_s or 0.0:,.0f} req/s) were not "
            "kept up by perf_analyzer, so its p99 under open-loop arrivals is not known here"
        )
    top = max(kept, key=lambda q: q.request_rate_per_s or 0.0)
    over = (
        f", over the {recs.latency_budget_p99_us:,.0f} µs budget"
        if top.worst_p99_us > recs.latency_budget_p99_us
        else ""
    )
    return (
        f"; that is closed loop at concurrency {pick.concurrency}: the same configuration "
        f"under {top.arrivals.word} arrivals at {top.request_rate_per_s:,.0f} req/s had a "
        f"median p99 of {top.latency_p99_us:,.0f} µs (worst repeat {top.worst_p99_us:,.0f} "
        f"µs{over}"
        + (
            f"; perf_analyzer warned in {top.warned_repeats} of its {top.repeats} repeats"
            if top.warned_repeats
            else ""
        )
        + f"){dropped}"
    )


def _ref(p: OperatingPoint) -> dict[str, Any]:
    return {"variant": p.variant, "load_key": p.load_key}


def _level_with(pick: Pick) -> str:
    """'; not separated from the runner-up 'X' (no clear difference (...))' where the pick's
    verdict against its runner-up is not clear; '' where it leads clearly or has none."""
    runner, verdict = pick.runner_up, pick.runner_up_verdict
    if runner is None or verdict is None or verdict.clear:
        return ""
    return f"; not separated from the runner-up '{runner.description}': {verdict.phrase()}"


def tie_break_dict(tb: TieBreak) -> dict[str, Any]:
    """The tie-break as ``recommendations.json`` stores it, with its rule and decision."""
    return {
        "figure": tb.figure,
        "applied": tb.applied,
        "rule": RULES["tie_break"],
        "best_by_median": _ref(tb.best_by_median),
        "tied_with": [_ref(p) for p in tb.tied],
        "chosen": _ref(tb.chosen),
        "decided_by": decided_by(tb) or None,
        "changed_the_pick": tb.overridden,
        "not_comparable_points": tb.not_comparable,
        **({"tie_verdict": tb.tie_verdict.to_dict()} if tb.tie_verdict else {}),
        **({"decisive_verdict": tb.decisive_verdict.to_dict()} if tb.decisive_verdict else {}),
    }


def pick_dict(pick: Pick, recs: Recommendations) -> dict[str, Any]:
    """The pick as ``recommendations.json`` stores it, with its justification."""
    return {
        "kind": pick.kind,
        "point": pick.point.to_dict(),
        "justification": justification(pick, recs),
        "verdicts": {k: v.to_dict() for k, v in pick.verdicts.items()},
        "runner_up": pick.runner_up.to_dict() if pick.runner_up else None,
        "runner_up_verdict": pick.runner_up_verdict.to_dict() if pick.runner_up_verdict else None,
        "tie_break": tie_break_dict(pick.tie_break) if pick.tie_break else None,
        **(
            {
                "repeats_under_target": pick.under_target_repeats,
                "ranked_blocks_under_target": pick.under_target_ranked,
            }
            if pick.kind == "latency-first"
            else {}
        ),
    }


def recommendations_dict(recs: Recommendations) -> dict[str, Any]:
    """``recommendations.json``: the records, the justifications, the summary line, the rules."""
    return {
        "latency_budget_p99_us": recs.latency_budget_p99_us,
        "target_load_infer_per_s": recs.target_load_infer_per_s,
        "points": [p.to_dict() for p in recs.points],
        "excluded_points": [{**_ref(p), "reason": FELL_BEHIND_REASON} for p in recs.excluded],
        "unmeasured_points": list(recs.unmeasured),
        "exclusion_note": exclusion_note(recs),
        "frontier": [p.to_dict() for p in recs.frontier],
        "throughput_pick": pick_dict(recs.throughput_pick, recs) if recs.throughput_pick else None,
        "latency_pick": pick_dict(recs.latency_pick, recs) if recs.latency_pick else None,
        "knees": {str(k): v for k, v in recs.knees.items()},
        "max_rate_within_budget": {str(k): v for k, v in recs.max_rate_within_budget.items()},
        "summary_line": summary_line(recs),
        **({"run_trust": recs.trust.to_dict()} if recs.trust is not None else {}),
        "method": {
            **RULES,
            "figures": "medians over repeats (over the blocks every point has where extra "
            "rounds measured some points more: ranked_blocks) with the max p99 over every "
            "repeat per point; verdicts as in the experiment log",
        },
    }
