"""The words of a sweep's recommendations: each pick's justification (action, result,
judgement, the baseline and the runner-up), the tie-break and the note on excluded points.

Built from the records of ``decisions.recommend_records``; the summary line, the rules in prose
and ``recommendations.json`` are in ``report.recommend_summary_text``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonlab.decisions.recommend_records import (
    BASELINE,
    OperatingPoint,
    Pick,
    Recommendations,
    TieBreak,
)
from tritonlab.explanation.instance_clauses import CLIENT_SHARE_THAT_MATTERS, CPU_BOUND_SHARE
from tritonlab.stats.run_trust import RunTrust
from tritonlab.stats.verdicts import HIGHER, LOWER, NO_CLEAR, NO_VERDICT, NOT_COMPARABLE, Verdict

FELL_BEHIND_REASON = (
    "perf_analyzer could not keep up the requested rate in at least one repeat, so that rate "
    "was not really offered"
)
TIE_BREAK_ORDER = (
    "fewer instances, then a point the other figure (p99 for a throughput pick, throughput for "
    "a latency pick) separates clearly at the same load or as another load of the same "
    "configuration (its paired verdict; two configurations' figures at different loads "
    "measure the load), else the best median stays"
)


def n_of(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless one: '3 operating points'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def short(p: OperatingPoint) -> str:
    """'variant at load_key'."""
    return f"{p.variant} at {p.load_key}"


def _names(points: list[OperatingPoint] | list[str], most: int = 4) -> str:
    names = [p if isinstance(p, str) else short(p) for p in points]
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _fmt_point(p: OperatingPoint) -> str:
    return (
        f"'{p.description}' at {p.load_label}: {p.throughput_infer_per_s:,.0f} infer/s, "
        f"p99 {p.latency_p99_us:,.0f} µs"
    )


def points_note(a: OperatingPoint, b: OperatingPoint) -> str:
    """'' when two points share their load; else that a verdict between them compares two
    operating points, each at its own load, not two configurations at one load (issue 36
    audit: a pick at concurrency 16 "beat" its runner-up at 8, which led at 8)."""
    if a.load_key == b.load_key:
        return ""
    if a.variant == b.variant:  # one server configuration: the difference is the client's
        return (
            f" (one server configuration at two client loads, {a.load_label} and "
            f"{b.load_label}: this compares the loads, not two configurations)"
        )
    return (
        f" (the two at different loads, {a.load_label} and {b.load_label}: this compares "
        "operating points, not the two configurations at one load)"
    )


def exclusion_note(recs: Recommendations) -> str:
    """One sentence on the points left out and why ('' when none were)."""
    excluded, unmeasured = recs.excluded, recs.unmeasured
    sentences = []
    if excluded:
        sentences.append(
            f"{n_of(len(excluded), 'operating point')} ({_names(excluded)}) "
            f"{'was' if len(excluded) == 1 else 'were'} excluded from the frontier, the picks, "
            f"the runner-ups and the rate table: {FELL_BEHIND_REASON}."
        )
    if unmeasured:
        sentences.append(
            f"{n_of(len(unmeasured), 'cell group')} ({_names(unmeasured)}) had no stable "
            f"throughput or p99 in any repeat and {'is' if len(unmeasured) == 1 else 'are'} "
            "no operating point."
        )
    return " ".join(sentences)


def _length_note(recs: Recommendations) -> str:
    if recs.lengths is None:
        return ""
    others = sorted(str(n) for n in recs.lengths.others)
    return (
        f" Only load points at the reference sequence length {recs.lengths.reference} are "
        f"ranked; lengths {', '.join(others)} do different work per inference and are compared "
        "in their own result tables."
    )


def decided_by(tb: TieBreak) -> str:
    """Which rule put the chosen point ahead of the next ('' when nothing was tied)."""
    chosen, next_best = tb.chosen, tb.next_in_tie
    if next_best is None:
        return ""
    if tb.decided == "instances":
        return f"fewer instances ({chosen.instance_count} against {next_best.instance_count})"
    if tb.decisive_verdict is not None:
        name = "tail" if tb.decided == "p99" else "throughput"
        where = (
            "at the same load"
            if chosen.load_key == next_best.load_key
            else f"({chosen.load_key}: another load of the same configuration)"
        )
        return (
            f"a clearly {'shorter' if name == 'tail' else 'higher'} {name} {where} "
            f"({'p99' if name == 'tail' else 'throughput'} {tb.decisive_verdict.phrase()})"
        )
    figure = "throughput" if tb.figure == "throughput" else "p99"
    return (
        f"the better median {figure}, though not clearly (nothing else separated them at the "
        "same load)"
    )


def _tie_sentence(tb: TieBreak | None) -> str:
    if tb is None or not tb.applied:
        return ""
    best = (
        "no clear difference against this one, the best median"
        if not tb.overridden
        else f"no clear difference against the best median, {short(tb.best_by_median)}"
    )
    tie = (
        f"; against {short(tb.next_in_tie)}: {tb.tie_verdict.phrase()}"
        if tb.tie_verdict is not None and tb.next_in_tie is not None
        else ""
    )
    return (
        f" Not separated from {n_of(len(tb.tied), 'other point')} on {tb.figure} "
        f"({_names(tb.tied)}; {best}{tie}); the tie-break took the one with "
        f"{decided_by(tb)}: it prefers {TIE_BREAK_ORDER}."
    )


def _throughput_judgement(pick: Pick, tput: str, p99: str) -> str:
    if tput == HIGHER:
        cost = "a longer tail" if p99 == HIGHER else "no clear cost in tail latency"
        cost = "a shorter tail as well" if p99 == LOWER else cost
        return f"the change pays: more throughput than the baseline, with {cost}."
    if pick.baseline_over_budget:
        return (
            "its throughput is not clearly above the baseline's at this load; its edge is "
            "that every repeat stays within the budget where the baseline's do not."
        )
    return (
        "its throughput is not clearly above the baseline's at this load: the difference "
        "is within the noise, so the baseline is as good a choice here."
    )


def _judgement(pick: Pick, goal: str) -> str:
    """What the pick means against the baseline, in the verdicts' words."""
    p, verdicts = pick.point, pick.verdicts
    if p.variant == BASELINE:
        return "no server-side change beats the baseline for this goal; keep it."
    if not verdicts:
        return f"the best measured point for {goal}, without a baseline to weigh it against."
    tput, p99 = verdicts["throughput"].word, verdicts["latency_p99"].word
    figure = verdicts["throughput" if goal == "throughput" else "latency_p99"]
    name = "throughput" if goal == "throughput" else "p99"
    if figure.word == NOT_COMPARABLE:
        return (
            f"the baseline's {name} at this load point is not comparable with the pick's "
            f"({figure.method}), so the pick rests on the ranking above, not on a verdict "
            "against the baseline."
        )
    if figure.word == NO_VERDICT:
        return (
            f"against the baseline, {name} has {figure.phrase()}, so this run does not show "
            "whether the change pays; the pick rests on the ranking above."
        )
    if goal == "throughput":
        return _throughput_judgement(pick, tput, p99)
    if p99 == LOWER:
        return "the change pays: a clearly shorter tail than the baseline at the same load."
    return (
        "its tail is not clearly shorter than the baseline's at this load; it wins by "
        "carrying the target load at all, or by a margin within the noise."
    )


def _baseline_sentence(pick: Pick) -> str:
    p, verdicts, ref = pick.point, pick.verdicts, pick.baseline
    if p.variant == BASELINE:
        return "It is the baseline configuration itself."
    if not verdicts or ref is None:
        return "The baseline was not measured at this load, so there is no verdict against it."
    if not pick.baseline_same_load:
        return (
            f"Against the baseline at the same fraction of its own peak (offered "
            f"{ref.settings.request_rate_per_s or 0:,.0f} against "
            f"{p.request_rate_per_s or 0:,.0f} req/s): throughput and p99 "
            f"{verdicts['latency_p99'].phrase()}; the baseline's p99 there was "
            f"{ref.latency_p99.text(unit='µs')}."
        )
    base = pick.baseline_point
    tput, p99 = (
        (base.throughput_infer_per_s, base.latency_p99_us)
        if base is not None
        else (ref.throughput.median or 0.0, ref.latency_p99.median or 0.0)
    )
    over = (
        f", medians over the same {p.ranked_blocks} blocks"
        if p.ranked_blocks is not None and base is not None
        else ""
    )
    return (
        f"Against the baseline at the same load ({tput:,.0f} infer/s, p99 {p99:,.0f} µs{over}): "
        f"throughput {verdicts['throughput'].phrase()}, p99 {verdicts['latency_p99'].phrase()} "
        "(paired over every block both have)."
    )


def _runner_up_unclear(pick: OperatingPoint, runner: OperatingPoint, verdict: Verdict) -> str:
    figure, rule = verdict.figure, f"rule: {verdict.method}"
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
            f"noise ({figure} {verdict.phrase()}; {rule}){points_note(pick, runner)}: either "
            "is a sound choice; re-measure with more repeats to separate them."
        )
    return (
        f"The runner-up, {_fmt_point(runner)}, has the better median, but its lead is "
        f"not clear given the noise ({figure} {verdict.phrase()}; {rule})"
        f"{points_note(pick, runner)}: either is a sound choice, and the tie-break decided."
    )


def _runner_up_sentence(pick: Pick) -> str:
    runner, verdict = pick.runner_up, pick.runner_up_verdict
    if runner is None or verdict is None:
        return "No other configuration qualified, so there is no runner-up to weigh it against."
    figure = verdict.figure
    if verdict.word == NOT_COMPARABLE:
        return (
            f"Against the runner-up, {_fmt_point(runner)}, {figure} is {verdict.phrase()}: "
            "the two were measured under different offered loads, so the lead rests on the "
            "medians alone."
        )
    if verdict.word == (HIGHER if figure == "throughput" else LOWER):
        return (
            f"It beats the runner-up, {_fmt_point(runner)}, on {figure}: {verdict.phrase()} "
            f"(rule: {verdict.method}){points_note(pick.point, runner)}."
        )
    if verdict.word in (NO_CLEAR, NO_VERDICT):
        return _runner_up_unclear(pick.point, runner, verdict)
    return (
        f"The runner-up, {_fmt_point(runner)}, is clearly better on {figure} "
        f"({verdict.phrase()}; rule: {verdict.method}){points_note(pick.point, runner)}; this "
        "pick was tied within the noise with the best median point, not with the runner-up."
    )


def _result_sentence(pick: Pick, recs: Recommendations) -> str:
    """'Action: ... Result: ...' up to the end of the ranking's sentence."""
    best, budget = pick.point, recs.latency_budget_p99_us
    overridden = pick.tie_break is not None and pick.tie_break.overridden
    if best.ranked_blocks is not None:
        worst = (
            f" (medians over the {best.ranked_blocks} blocks every point has, the blocks the "
            f"ranking reads, where the table's row gives its medians over all {best.repeats} "
            f"repeats; worst repeat's p99 {best.worst_p99_us:,.0f} µs, over all of them)"
        )
    else:
        worst = (
            f" (medians; worst repeat's p99 {best.worst_p99_us:,.0f} µs)"
            if best.repeats > 1
            else ""
        )
    head = (
        f"Action: serve '{best.description}' ({best.variant}), clients at {best.load_label}. "
        f"Result: {best.throughput_infer_per_s:,.0f} infer/s at p99 {best.latency_p99_us:,.0f} "
        f"µs{worst}: "
    )
    if pick.kind == "throughput-first":
        near = pick.near_budget
        lead = "tied within the noise with the highest" if overridden else "the highest"
        return (
            head + f"{lead} median throughput "
            f"of the {n_of(pick.qualifying, 'operating point')} whose p99 stays within the "
            f"{budget:,.0f} µs budget in every repeat (of {len(recs.eligible)} eligible"
            + (
                f"; {near} more had a median p99 within the budget but a repeat above it"
                if near
                else ""
            )
            + ")."
        )
    budget_note = (
        f"every repeat within the {budget:,.0f} µs budget"
        if best.within(budget)
        else f"a repeat above the {budget:,.0f} µs budget"
    )
    lead = "tied within the noise with the lowest" if overridden else "the lowest"
    return (
        head + f"{lead} median p99 of the {n_of(pick.qualifying, 'operating point')} whose "
        f"median throughput carries the target load of {recs.target_load_infer_per_s or 0:,.0f} "
        f"infer/s (this one with {budget_note}, which the ranking did not ask of the others)."
    )


def justification(pick: Pick, recs: Recommendations) -> str:
    """The pick's paragraph: action, result, the notes, tie-break, baseline, judgement and
    runner-up."""
    note = exclusion_note(recs)
    note = (f" {note}" if note else "") + _length_note(recs)
    goal = "throughput" if pick.kind == "throughput-first" else "latency"
    return (
        _result_sentence(pick, recs)
        + note
        + _tie_sentence(pick.tie_break)
        + " "
        + _baseline_sentence(pick)
        + " Judgement: "
        + _judgement(pick, goal)
        + " "
        + _runner_up_sentence(pick)
        + control_note(recs, pick.point.load_key)
        + _cache_caveat(pick.point)
        + load_generator_note(recs, pick)
        + doubt_sentence(recs, "this pick rests")
    )


@dataclass(frozen=True)
class Bound:
    """A point at the load generator's limit, as the row rule ``cpu_bound`` flags it."""

    used: float  # cores used (perf_analyzer's; or the server's and its together)
    text: str  # "perf_analyzer used 0.93 of its own 1 core"
    label: str  # "load-generator-bound" (CPU split) | "CPU-bound" (shared cores)
    meaning: str  # what it does to the figures


def bound_cores(recs: Recommendations, p: OperatingPoint) -> Bound | None:
    """Where the load generator may have set the point's pace (``cpu_bound``'s test: 90% of
    perf_analyzer's own cores under the CPU split, of the machine's where the two shared them);
    None where it did not, or where the cores are not known."""
    if recs.cores is None or p.perf_analyzer_cores is None:
        return None
    cores, server = recs.cores
    client = p.perf_analyzer_cores
    if server is not None:
        own = max(1, cores - server)
        if client < CPU_BOUND_SHARE * own:
            return None
        return Bound(
            client,
            f"perf_analyzer used {client:.2f} of its own {own} core{'s' if own != 1 else ''}",
            "load-generator-bound",
            "the figures may be the load generator's ceiling, not the server's",
        )
    if p.server_cores is None or p.server_cores + client < CPU_BOUND_SHARE * cores:
        return None
    used = p.server_cores + client
    competed = client >= CLIENT_SHARE_THAT_MATTERS * cores
    return Bound(
        used,
        f"the server and perf_analyzer together used {used:.2f} of the {cores} cores "
        f"(perf_analyzer {client:.2f})",
        "CPU-bound",
        "the load generator competed with the server for the cores, so the figures may "
        "understate a dedicated server"
        if competed
        else "the server had the cores nearly to itself: the machine's cores set the pace",
    )


def load_generator_note(recs: Recommendations, pick: Pick) -> str:
    """' Caveat: ...' where the pick (or its runner-up) ran at the load generator's limit, as
    its row in the log flags it: its figures may be the load generator's ceiling, and a tie
    between two such points is one more repeats would not separate; '' otherwise."""
    mine = bound_cores(recs, pick.point)
    runner = bound_cores(recs, pick.runner_up) if pick.runner_up is not None else None
    if mine is None:
        return ""
    apart = pick.runner_up_verdict is not None and pick.runner_up_verdict.clear
    both = (
        f"; the runner-up was too ({runner.used:.2f})"
        # only an unseparated pair is one more repeats may not separate (issue 36 audit)
        + ("" if apart else ", so more repeats may not separate them")
        if runner is not None
        else ""
    )
    return f" Caveat: at this point {mine.text} ({mine.label}): {mine.meaning}{both}."


def control_note(recs: Recommendations, load_key: str) -> str:
    """Where the A/A control at the pick's load read a difference only by its paired blocks
    (the process term widened it into none): how far identical copies differed there, which a
    lead near it may be (issue 36 audit: a pick "beats" its runner-up by +4%, CI +0.3% to +6%,
    where the copies read +0.03% to +3.8% paired)."""
    said = control_reach(recs.trust, load_key)
    return f" {said[0].upper()}{said[1:]}." if said else ""


def control_reach(trust: RunTrust | None, load_key: str) -> str:
    """'at this load the A/A control's identical copies read ...: a lead of about that size
    may be noise' where the control at ``load_key`` read a difference only by its paired
    blocks; '' elsewhere (``control_note`` and the efficiency lead quote it)."""
    found = [w for w in (trust.controls_widened if trust else ()) if w.load_key == load_key]
    if not found:
        return ""
    said = "; ".join(f"{w.figure} {w.phrase}" for w in found)
    return (
        f"at this load the A/A control's identical copies read {said}: a lead of about that "
        "size may be noise"
    )


def doubt_sentence(recs: Recommendations, rests: str = "the picks rest") -> str:
    """' Note: this run's verdicts are not to be trusted: ...' where the run's trust
    (``stats/run_trust.py``) has a doubt; '' for a quiet run."""
    caveat = recs.trust.caveat() if recs.trust is not None else ""
    return f" Note: {caveat}; {rests} on its verdicts." if caveat else ""


def _cache_caveat(p: OperatingPoint) -> str:
    """Where the pick serves from the cache, its figures hold for inputs repeating as often."""
    if p.cache_hit_share is None:
        return ""
    return (
        f" Caveat: the response cache answered {p.cache_hit_share:.0%} of this point's requests; "
        "its figures hold for traffic whose inputs repeat as often."
    )
