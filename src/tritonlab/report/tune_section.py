"""The experiment log's account of a tune: the pick, the runner-up, and the path the search took.

It restates ``results/tune.json``: every step with what was measured, what came back and the
measured figure that motivated it, so a reader can follow (and dispute) each move.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tritonlab.decisions.search_space import NOISE_PCT
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.error_rates import process_sd_log
from tritonlab.stats.summary import span_digits, span_text
from tritonlab.stats.verdicts import HIGHER, LOWER, NO_CLEAR, Verdict, compare, widened_record

if TYPE_CHECKING:
    from tritonlab.decisions.search_space import Knobs
    from tritonlab.decisions.tune_record import TuneFigure, TunePick, TuneRecord


def figure_span(figure: TuneFigure, repeats: int, scale: float, digits: int) -> str | None:
    """A pick's figure as 'median (low–high)' divided by ``scale`` with ``digits`` (more where
    the range would read as one number; the range only over more than one repeat); None when it
    has no median."""
    if figure.median is None:
        return None
    return span_text(figure.median / scale, _spread(figure, repeats, scale), digits)


def _spread(figure: TuneFigure, repeats: int, scale: float) -> tuple[float, float] | None:
    if repeats > 1 and figure.low is not None and figure.high is not None:
        return (figure.low / scale, figure.high / scale)
    return None


def shared_digits(picks: list[TunePick | None]) -> tuple[int, int]:
    """The digits of throughput (infer/s) and p99 (ms) that show every pick's range and tell
    their medians apart where they differ: a pick and its runner-up side by side read alike."""
    shown = [p for p in picks if p is not None]
    out = []
    for attr, scale, digits in (("throughput_infer_per_s", 1.0, 0), ("latency_p99_us", 1000.0, 2)):
        figures = [(getattr(p, attr), p.repeats) for p in shown]
        medians = [f.median / scale for f, _ in figures if f.median is not None]
        need = [span_digits(_spread(f, n, scale), digits, *medians) for f, n in figures]
        out.append(max(need, default=digits))
    return out[0], out[1]


def _pick_line(label: str, pick: TunePick | None, digits: tuple[int, int] = (0, 2)) -> str:
    if pick is None:
        return f"- **{label}**: none."
    thr = figure_span(pick.throughput_infer_per_s, pick.repeats, 1, digits[0]) or "n/a"
    p99 = figure_span(pick.latency_p99_us, pick.repeats, 1000, digits[1]) or "n/a"
    return (
        f"- **{label}**: {pick.description}, {pick.where()}: "
        f"{thr} infer/s, p99 {p99} ms (median and range of {pick.repeats} repeats)."
    )


def _configuration(k: Knobs) -> str:
    batching = "batching" if k.batching else "no batching"
    return (
        f"{k.instances} x, {batching}, max {k.max_batch}, {k.threads or 'default'} thr, "
        f"{k.protocol}{k.held_text()}"
    )


def tune_section(
    tune: TuneRecord | None,
    pipeline_step: str | None = None,
    co_loaded: bool = False,
    summaries: Sequence[VariantSummary] = (),
) -> list[str]:
    """The log's tune section (no lines for a run that was not a tune)."""
    if tune is None:
        return []
    settings = tune.settings
    budget = settings.p99_budget_us
    goal = f"goal {settings.goal}" + (
        f", p99 budget {budget / 1000:g} ms" if budget is not None else ", no latency budget"
    )
    if settings.min_throughput_infer_per_s:
        goal += f", carrying at least {settings.min_throughput_infer_per_s:,.0f} infer/s"
    if settings.trace is not None:
        from tritonlab.perf.trace import KEPT_TO_PCT, TraceStats

        trace = TraceStats.from_dict(settings.trace)
        goal += (
            f", every configuration measured under the replayed {trace.words()} (no "
            "concurrency ramp: the offered load is the trace's; a configuration carries it "
            f"when it serves at least {100 - KEPT_TO_PCT:g}% of the trace's mean rate, and "
            f"perf_analyzer sent at most {KEPT_TO_PCT:g}% of the requests late)"
        )
    lines = [
        "## Tune: the pick and the path to it",
        "",
        f"`tritonlab tune`, {goal}; time budget {settings.time_budget_s:.0f} s; "
        f"{tune.cells_measured} cells measured and {tune.cells_reused} "
        f"reused in {tune.wall_s:.0f} s.",
        "",
        _pick_line("Pick", tune.pick, shared_digits([tune.pick, tune.runner_up])),
        _pick_line("Runner-up", tune.runner_up, shared_digits([tune.pick, tune.runner_up])),
    ]
    if verdict := tune.verdict:
        stored = verdict
        if co_loaded and not _one_process(tune):
            # the configurations stayed loaded: the race carries each one's process term; the
            # pick and a runner-up of one server configuration share its process and speed
            verdict = widened_record(verdict, process_sd_log(verdict.figure))
        lines.append(
            f"- Runner-up against the pick ({verdict.figure}, paired over the race's "
            f"{verdict.pairs} rounds): {verdict.phrase()}"
            + (
                " (with each configuration's process term, which the search stored it without)"
                if verdict.ci95_change_pct != stored.ci95_change_pct
                else ""
            )
            + "."
        )
    if tune.tie_break:
        lines.append(f"- Tie broken: {tune.tie_break}.")
    lines += [f"- {n[0].upper()}{n[1:]}." for n in tie_notes(tune)]
    if ties := load_ties_note(tune, summaries):
        lines.append(f"- {ties[0].upper()}{ties[1:]}.")
    if (pick := tune.pick) and not pick.meets_p99_budget_every_repeat:
        line = over_budget_line(pick)
        lines.append(f"- {line[0].upper()}{line[1:]}.")
    if note := race_points_note(tune):
        lines.append(f"- {note[0].upper()}{note[1:]}.")
    lines += [
        f"- Why the search stopped: {tune.stop_reason or 'it was interrupted'}.",
        "- The pick's `config.pbtxt`, ready to deploy: `pick/<model>/config.pbtxt`.",
        "",
        "The path: each step's single measurement steers the search ("
        + (
            "ramp: one point per configuration, under the trace"
            if settings.fixed_load
            else "ramp: concurrency doubled while throughput rose more than the noise margin"
        )
        + "; move: a neighbour the figures argue for; race: the close contenders measured "
        "again one cell at a time, the one with the fewest race cells next, whose repeats with "
        "each one's search-phase cell decide the pick: the median of every repeat at the "
        "point). The why column is the search's own reason, stored in `results/tune.json` when "
        "it took the step: it read only the figures measured by then."
        + batch_compute_note(tune)
        + beat_note(tune)
        + (
            f" In this pipeline the path's queue, compute and batch figures are step "
            f"`{pipeline_step}`'s own, which steer the search; the results tables below hold "
            "the measured model's own counters."
            if pipeline_step is not None
            else ""
        ),
        "",
        "| # | phase | configuration | conc. | repeat | infer/s | p99 ms | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, step in enumerate(tune.steps, 1):
        rate, p99 = step.throughput_infer_per_s, step.latency_p99_us
        lines.append(
            f"| {i} | {step.phase} | {_configuration(step.configuration)} | "
            f"{'trace' if settings.fixed_load else step.concurrency} | "
            f"{step.repeat}{' (stored)' if step.reused else ''} | "
            f"{'failed' if rate is None else f'{rate:,.0f}'} | "
            f"{'n/a' if p99 is None else f'{p99 / 1000:.2f}'} | {step.reason} |"
        )
    return [*lines, ""]


OLD_EACH = "µs compute each)"


def batch_compute_note(tune: TuneRecord) -> str:
    """Where a stored reason of a batching point says "N µs compute each" (the wording before
    issue 36's audit), what that figure is: Triton's compute per request, which counts every
    request of a batch the batch's whole execution; '' where no such reason is stored."""
    rows = [
        str(i)
        for i, step in enumerate(tune.steps, 1)
        if step.configuration.batching and OLD_EACH in step.reason
    ]
    if not rows:
        return ""
    return (
        f" In row{'s' if len(rows) > 1 else ''} {', '.join(rows)} "
        f"({'batching points' if len(rows) > 1 else 'a batching point'}), the "
        "reason's \"compute each\" is Triton's compute per request, which counts every request "
        "of a batch the batch's whole execution: per batch, not per inference."
    )


OLD_BEAT = "instances did not beat"


def beat_note(tune: TuneRecord) -> str:
    """Where a stored reason says "4 instances did not beat 2 (21 against 20)" (the wording
    before issue 36's audit), that it means by more than the noise margin: the figure it
    quotes first may be the higher one; '' where no such reason is stored."""
    rows = [
        str(i)
        for i, step in enumerate(tune.steps, 1)
        if OLD_BEAT in step.reason and "noise margin" not in step.reason
    ]
    if not rows:
        return ""
    return (
        f' In row{"s" if len(rows) > 1 else ""} {", ".join(rows)}, "did not beat" means not '
        f"by more than the {NOISE_PCT:g}% noise margin: the figure it quotes first may be the "
        "higher one."
    )


def pick_sentence(tune: TuneRecord, summaries: Sequence[VariantSummary]) -> str:
    """'tune's pick: ... Why the search stopped: ... Note: ...': the pick as a page quotes it,
    with what its race left open (issue 36 audit: a run README named the pick without the
    runner-up the race did not separate from it)."""
    pick = tune.pick
    if pick is None:
        return ""
    notes = [race_points_note(tune), *tie_notes(tune), load_ties_note(tune, summaries)]
    said = "".join(f" Note: {n}." for n in notes if n)
    return (
        f"tune's pick: {pick.description} at concurrency {pick.concurrency}. "
        f"Why the search stopped: {tune.stop_reason}.{said}"
    )


def tie_notes(tune: TuneRecord) -> list[str]:
    """What a quote of the pick must carry about its runner-up: that the race did not separate
    them, or that a stored tie-break compared them at different concurrencies."""
    verdict, pick, runner = tune.verdict, tune.pick, tune.runner_up
    notes = []
    if verdict is not None and verdict.reading not in (HIGHER, LOWER) and not tune.tie_break:
        if _one_process(tune) and pick and runner:
            notes.append(
                "the race did not separate the pick from the runner-up on "
                f"{verdict.figure}, and they are one server configuration at two client loads "
                f"({pick.configuration.protocol} {pick.where()} against "
                f"{runner.configuration.protocol} {runner.where()}): between these two the "
                f"choice is the client's load; {_p99_apart(pick, runner)}"
            )
        else:
            notes.append(
                "the race did not separate the pick from the runner-up: the pick leads by the "
                f"median of its repeats only, and on {verdict.figure} either would serve as "
                f"well as this run can tell{_budget_apart(tune)}"
            )
    undecided = verdict is not None and verdict.reading not in (HIGHER, LOWER)
    if verdict is not None and undecided and _race_favours_runner(tune):
        race = (
            "over the race's paired rounds the runner-up's median is the better "
            f"({_median_text(verdict.variant_median)} against "
            f"{_median_text(verdict.reference_median)})"
        )
        if _pick_leads_overall(tune):
            notes.append(f"{race}: the pick leads only with its search-phase cell counted")
        else:  # issue 36 audit: "leads only with its search-phase cell" where it led on neither
            notes.append(
                f"{race}, and over every repeat too: the pick "
                + (
                    "came from the tie-break, not from a lead"
                    if tune.tie_break
                    else "leads on neither"
                )
                + f" on {verdict.figure}"
            )
    if (
        tune.tie_break
        and pick
        and runner
        and pick.concurrency != runner.concurrency
        and not tune.settings.fixed_load
    ):
        notes.append(
            "the tie-break compared the pick and the runner-up at different concurrencies "
            f"({pick.concurrency} against {runner.concurrency}): in a closed loop the latency "
            "grows with the concurrency, so the figure measured the load, not the configuration "
            "(a tritonlab since issue 36 breaks ties at the same concurrency only); the race "
            "did not separate the two"
        )
    return notes


def load_ties_note(tune: TuneRecord, summaries: Sequence[VariantSummary]) -> str:
    """'' unless other configurations measured at the pick's load are not separated from it on
    the goal's figure: then which (issue 36 audit: max batch 8 and 16 not told apart at the
    pick's load while the pick read as the server configuration to deploy)."""
    pick = tune.pick
    if pick is None or tune.settings.fixed_load:
        return ""
    at = [
        s
        for s in summaries
        if s.settings.protocol == pick.configuration.protocol
        and s.settings.concurrency == pick.concurrency
        and s.settings.request_rate_per_s is None
    ]
    own = next((s for s in at if s.variant.name == pick.variant), None)
    if own is None:
        return ""
    attr = "throughput" if tune.settings.goal == "throughput" else "latency_p99"
    level = [
        (s, v)
        for s in at
        if s is not own and (v := _race_pair(attr, s, own)).word == NO_CLEAR and v.has_interval
    ]
    if not level:
        return ""
    listed = "; ".join(
        f"'{s.variant.description}' (the pick against it: {v.phrase()})" for s, v in level
    )
    figure = attr.replace("_", " ")
    return (
        f"at the pick's load ({own.load_key}, over the race's rounds) the pick is not "
        f"separated on {figure} "
        f"from {listed}: the pick is the search's choice, and "
        + ("this serves" if len(level) == 1 else "these serve")
        + " that load as well as this run can tell"
    )


def _race_pair(attr: str, other: VariantSummary, own: VariantSummary) -> Verdict:
    """``own`` against ``other`` on ``attr`` over the race's rounds only: a repeat's first
    cell is its search-phase measurement, taken at another time for each configuration, so
    repeat 1 is not a shared round (issue 36 audit: a contender paired over its search-phase
    cell read ahead of the pick, undecided over the race's rounds)."""
    rounds = (frozenset(other.throughput.rounds) & frozenset(own.throughput.rounds)) - {1}
    a, b = getattr(other, attr), getattr(own, attr)
    return compare(attr, a.over(rounds), b.over(rounds))


def _budget_apart(tune: TuneRecord) -> str:
    """'' unless the goal has a p99 budget and the pick and runner-up went over it in different
    numbers of repeats: then those counts (issue 36 audit: "either would serve as well" where
    the runner-up was over the budget in 2 of 13 repeats and the pick in none)."""
    pick, runner = tune.pick, tune.runner_up
    if tune.settings.p99_budget_us is None or pick is None or runner is None:
        return ""
    a, b = pick.p99_over_budget_repeats, runner.p99_over_budget_repeats
    if a is None or b is None or a == b:
        return ""
    return (
        f", though on the p99 budget they differ: the runner-up's p99 was over it in {b} of its "
        f"{runner.repeats} repeats and the pick's in {a} of {pick.repeats}"
    )


def _one_process(tune: TuneRecord) -> bool:
    """True when the pick and the runner-up are one server configuration (one model process
    in a co-loaded run) at two client loads or protocols."""
    pick, runner = tune.pick, tune.runner_up
    return pick is not None and runner is not None and pick.variant == runner.variant


def _p99_apart(pick: TunePick, runner: TunePick) -> str:
    """The two points' p99 (ms) in words: every repeat of one below every repeat of the other
    where so, else their medians with no verdict (the race paired only its goal's figure)."""
    a, b = pick.latency_p99_us, runner.latency_p99_us
    if a.median is None or a.low is None or a.high is None:
        return "their p99 was not compared"
    if b.median is None or b.low is None or b.high is None:
        return "their p99 was not compared"
    spans = sorted([("pick", a.low, a.high), ("runner-up", b.low, b.high)], key=lambda t: t[2])
    (lower, ll, lh), (upper, ul, uh) = spans
    if lh < ul:
        return (
            f"every p99 repeat of the {lower} ({ll / 1000:,.2f}–{lh / 1000:,.2f} ms) was below "
            f"every one of the {upper}'s ({ul / 1000:,.2f}–{uh / 1000:,.2f} ms)"
        )
    return (
        f"their p99 medians are {a.median / 1000:,.2f} and {b.median / 1000:,.2f} ms, with "
        "overlapping repeats (no p99 verdict was paired)"
    )


def _pick_leads_overall(tune: TuneRecord) -> bool:
    """True when the pick's median over every repeat is the better on the goal's figure."""
    pick, runner = tune.pick, tune.runner_up
    if pick is None or runner is None:
        return False
    if tune.settings.goal == "throughput":
        a, b = pick.throughput_infer_per_s.median, runner.throughput_infer_per_s.median
        return a is not None and b is not None and a >= b
    a, b = pick.latency_p99_us.median, runner.latency_p99_us.median
    return a is not None and b is not None and a <= b


def _race_favours_runner(tune: TuneRecord) -> bool:
    """True when the race's own medians (the verdict's, over its paired rounds) favour the
    runner-up although the pick leads by the median of every repeat."""
    v = tune.verdict
    if v is None or v.reference_median is None or v.variant_median is None:
        return False
    if tune.settings.goal == "throughput":
        return v.variant_median > v.reference_median
    return v.variant_median < v.reference_median


def _median_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def race_points_note(tune: TuneRecord) -> str:
    """'' unless the race's contenders ran at different concurrencies or protocols: then how
    many ran at each load, and that a verdict between two at different loads compares
    operating points, not configurations at one load; whether the pick and the runner-up
    shared a load (issue 36 audit: "each verdict compares two operating points" where five of
    six verdicts were at the pick's own load)."""
    if tune.settings.fixed_load:
        return ""
    race = [s for s in tune.steps if s.phase == "race"]
    at: dict[tuple[str, int], set[str]] = {}
    for s in race:
        at.setdefault((s.configuration.protocol, s.concurrency), set()).add(
            s.configuration.variant_name
        )
    if len(at) < 2:
        return ""
    loads = ", ".join(
        f"{p} c{c} ({len(names)} configuration{'s' if len(names) != 1 else ''})"
        for (p, c), names in sorted(at.items())
    )
    pick, runner = tune.pick, tune.runner_up
    shared = ""
    if pick is not None and runner is not None:
        same = (pick.configuration.protocol, pick.concurrency) == (
            runner.configuration.protocol,
            runner.concurrency,
        )
        shared = (
            "; the pick and the runner-up ran at one load"
            if same
            else "; the pick and the runner-up ran at different loads"
        )
    return (
        f"the race's contenders ran at more than one load ({loads}): a verdict between two at "
        "different loads compares operating points, each configuration at its own load, not "
        f"two configurations at one load{shared}"
    )


def over_budget_line(pick: TunePick) -> str:
    """What the log and the command say of a pick whose p99 went over the budget in a repeat
    (a point is within the budget when the median of its repeats is: decisions/search.py)."""
    over, median_us = pick.p99_over_budget_repeats, pick.latency_p99_us.median
    if over is None or median_us is None:  # a tune.json from before the median rule
        return "no configuration met the p99 budget in every repeat"
    return (
        f"the pick's p99 was over the budget in {over} of its {pick.repeats} repeats; "
        f"their median, {median_us / 1000:.2f} ms, is within it"
    )
