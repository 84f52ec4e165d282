"""The experiment log's "Method" section: how verdicts are made, how many there are, and why
the adaptive rounds stopped. The markdown log and the HTML report both use it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tritonlab.decisions.adaptive import TARGET_HALF_WIDTH_PCT, watched_intervals
from tritonlab.decisions.search_space import MIN_RACE_ROUNDS
from tritonlab.decisions.tune_record import TuneRecord
from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.rounds import AdaptiveRound, StoppingRecord
from tritonlab.explanation.explain import Analysis
from tritonlab.explanation.rules import (
    CPU_BOUND_SHARE,
    SATURATED_QUEUE_SHARE,
    TRAP_BATCH_SHARE_OF_IN_FLIGHT,
    TRAP_QUEUE_MAX_SHARE_OF_DELAY,
    TRAP_QUEUE_SHARE_OF_DELAY,
)
from tritonlab.report.conditions_text import RACE_ORDER
from tritonlab.stats.robust import MIN_BLOCKS
from tritonlab.stats.verdicts import CONFIDENCE, MIN_EFFECT_PCT, Verdict

if TYPE_CHECKING:
    from tritonlab.report.run_data import RunData


@dataclass(frozen=True)
class VerdictCount:
    """The throughput and p99 verdicts a log states, and those that could not read higher or
    lower whatever the noise: "not comparable", or "no verdict" (no interval)."""

    stated: int = 0
    not_comparable: int = 0
    no_verdict: int = 0

    @property
    def open(self) -> int:
        """Verdicts with an interval: the chances for a false "higher" or "lower"."""
        return self.stated - self.not_comparable - self.no_verdict


def _stated(analysis: Analysis) -> list[Verdict]:
    """Throughput and p99 verdicts of one load: against the baseline, and against the closest
    earlier configuration where that is another one."""
    baseline = analysis.reports[0].summary.variant.name
    figures = ("throughput", "latency_p99")
    verdicts: list[Verdict] = []
    for r in analysis.reports[1:]:
        verdicts += [r.verdicts[f] for f in figures]
        if r.reference and r.reference != baseline:
            verdicts += [r.reference_verdicts[f] for f in figures]
    return verdicts


def count_verdicts(analyses: list[Analysis]) -> VerdictCount:
    """The log's throughput and p99 verdicts, counted by what they could have read."""
    verdicts = [v for a in analyses for v in _stated(a)]
    return VerdictCount(
        stated=len(verdicts),
        not_comparable=sum(1 for v in verdicts if not v.comparable),
        no_verdict=sum(1 for v in verdicts if v.comparable and not v.has_interval),
    )


def stopping_note(
    adaptive: bool,
    rounds: list[AdaptiveRound],
    stopping: StoppingRecord | None = None,
    tune: TuneRecord | None = None,
    sweep: bool = False,
) -> str:
    """What the multiplicity count must allow for: the rounds a stopping rule added (from the
    records of ``adaptive.json``, ``stopping.json`` and ``tune.json``), '' when none ran."""
    level = f"{CONFIDENCE:.0%}"
    optional = (
        "looking after every round and stopping on a decided word raises the chance of a false "
        "higher or lower above the level stated, so the count is approximate"
    )
    notes = []
    if rounds and stopping is not None and stopping.precision:
        notes.append(
            f"{_rounds(len(rounds))} added after the planned ones while "
            f"{watched_intervals(sweep)} was wider than ±{TARGET_HALF_WIDTH_PCT:g}%, whatever its "
            "word: a rule on "
            "the intervals' width, not on where they lie, keeps their coverage near "
            f"{level} (the test suite simulates the rule: a rule that also waited for a "
            "decided word would not), so the count is approximate"
        )
    elif rounds:
        notes.append(
            f"{_rounds(len(rounds))} added after the planned ones while a verdict that a "
            "recommendation or an explanation rests on was undecided (adaptive repeats: until "
            f"its interval excludes no change or lies within ±{MIN_EFFECT_PCT:g}%, or the round "
            f"limit); {optional}"
        )
    elif adaptive:
        notes.append("the adaptive rule added no round, so the count is for the planned rounds")
    counts = Counter(
        (step.configuration, step.concurrency)
        for step in (tune.steps if tune else ())
        if step.phase == "race"
    )
    race = max(counts.values(), default=0)
    if race > MIN_RACE_ROUNDS:
        fewest = min(counts.values())
        over = (
            f"up to {race} rounds ({fewest} to {race} per contender; each verdict over the "
            "rounds both its sides have)"
            if fewest < race
            else f"{race} rounds"
        )
        notes.append(
            f"the tune's race verdicts (against its leader) were measured over {over}, "
            f"one more at a time after the first {MIN_RACE_ROUNDS} while one was undecided; "
            "looking after every round and stopping on a decided word raises the chance of a "
            "false higher or lower in those verdicts above the level stated"
        )
    return " ".join(f"{n[0].upper()}{n[1:]}." for n in notes)


def page_trust_note(run: RunData) -> str:
    """What a page quoting the run carries: its trust's page note and, for a tune, its race's
    stopping rule as its log's method states it ('' for a quiet, controlled run)."""
    note = run.trust.page_note()
    if run.tune is not None and (race := stopping_note(False, [], None, run.tune)):
        note = f"{note} {race}".strip()
    return note


def run_stopping_note(run: RunData) -> str:
    """``stopping_note`` of a loaded run."""
    return stopping_note(
        run.manifest.adaptive is not None,
        run.adaptive_rounds,
        run.stopping,
        run.tune,
        run.manifest.sweep is not None,
    )


def _rounds(count: int) -> str:
    return f"{count} extra round{' was' if count == 1 else 's were'}"


def robust_blocks(analyses: list[Analysis]) -> bool:
    """Whether any verdict of the log was paired over enough blocks for the robust interval."""
    return any(
        v.pairs >= MIN_BLOCKS
        for a in analyses
        for r in a.reports
        for v in (*r.verdicts.values(), *r.reference_verdicts.values())
    )


def multiplicity_line(count: VerdictCount, stopping: str = "") -> str:
    """The multiplicity bullet: the verdicts that could read higher or lower by chance, how
    many would if nothing differed, and ``stopping`` (``stopping_note``)."""
    level = f"{CONFIDENCE:.0%}"
    left_out = [
        text
        for n, text in (
            (count.not_comparable, f"{count.not_comparable} are not comparable"),
            (count.no_verdict, f"{count.no_verdict} have no verdict: one repeat or no figure"),
        )
        if n
    ]
    which = (
        f"; {count.open} of them have an interval and could read higher or lower "
        f"({', '.join(left_out)})"
        if left_out
        else ""
    )
    return (
        f"- Multiplicity: the rows of this log state {count.stated} throughput and p99 "
        f"verdicts against the baseline and against the row each is explained from{which}, "
        f"each at {level} two-sided, with no correction: if nothing differed at all, about "
        f"{count.open * (1 - CONFIDENCE):.1f} of them would still read higher or lower by "
        "chance. The comparisons the rules, picks, knees and other sections add between "
        "rows are not in this count and carry the same chance each."
        + (f" {stopping}" if stopping else "")
    )


def method_lines(
    count: VerdictCount | None = None, stopping: str = "", robust: bool = False, tune: bool = False
) -> list[str]:
    """The log's "Method" section as markdown lines: statistics, verdicts and rules (``tune``:
    a tune's run, whose cells are not whole interleaved rounds)."""
    level = f"{CONFIDENCE:.0%}"
    interval = (
        f"the Hodges-Lehmann estimate (the median of the pairwise means of the log-ratios) "
        f"with its exact two-sided {level} Wilcoxon signed-rank interval, which one disturbed "
        f"block cannot blow up (with fewer than {MIN_BLOCKS} pairs: their mean with a "
        f"two-sided {level} Student-t interval, scipy.stats)"
        if robust
        else f"their mean (as a percentage) with a two-sided {level} Student-t confidence "
        "interval (scipy.stats)"
    )
    return [
        "## Method",
        "",
        "- Each figure is the median over the repeats; brackets give the range of the "
        "repeats (min–max), what a handful of repeats can support, never an extrapolated "
        "interval.",
        (
            f"- A tune measures its search's points one after another and then {RACE_ORDER}, "
            'so a verdict ("higher", "lower", "no clear difference") pairs the two '
            "configurations' repeats by repeat number: race cells of the same number, measured "
            "apart (not together) and possibly minutes apart, or for two search points their "
            "single cells, taken minutes apart, "
            if tune
            else "- Repeats are measured in interleaved rounds (every configuration once, then "
            'again), so a verdict ("higher", "lower", "no clear difference") pairs the two '
            "configurations' repeats by round "
        )
        + "and takes the log-ratio of each pair: the change shown is "
        f"{interval}. "
        "The word follows the interval: higher or lower only when the interval excludes no "
        "change, so a word can never contradict its numbers. Configurations under different "
        'offered loads, or a load perf_analyzer did not keep up, are "not comparable"; with '
        'a single repeat on a side there is no interval and no verdict ("no verdict"), and no '
        "judgement reads one as an effect or as its absence.",
        multiplicity_line(count or VerdictCount(), stopping),
        "- Queue, compute and batch sizes come from Triton's statistics extension (the "
        "difference between snapshots taken just before and just after each perf_analyzer "
        "run), not from estimates; CPU is the user + system time of the server's process tree "
        "and of perf_analyzer over the same run, divided by its wall time.",
        f"- Rules: queue-delay trap when {TRAP_QUEUE_SHARE_OF_DELAY:.0%}–"
        f"{TRAP_QUEUE_MAX_SHARE_OF_DELAY:.0%} of the delay is spent queued, an execution takes "
        f"less than the delay and mean batch >= {TRAP_BATCH_SHARE_OF_IN_FLIGHT:.0%} of the "
        "inferences in flight, with fewer in flight than the batch target (a longer wait, or "
        "an execution longer than the delay, is a busy instance); saturated when queue >= "
        f"{SATURATED_QUEUE_SHARE:.0%} of server time with the instances busy; CPU-bound when "
        f"server + client use >= {CPU_BOUND_SHARE:.0%} of the cores; Little's law flags "
        "throughput x latency / concurrency outside 0.8–1.2.",
        "",
    ]


def adaptive_lines(
    manifest: Manifest, rounds: list[AdaptiveRound], stopping: StoppingRecord | None = None
) -> list[str]:
    """Markdown bullets on the adaptive repeats: rounds planned, each extra round and why it ran
    (or why none did); [] without adaptive repeats."""
    if (adaptive := manifest.adaptive) is None:
        return []
    planned = manifest.plan.repeats
    head = (
        f"- Adaptive repeats: {planned} rounds planned, at most {adaptive.max_repeats} repeats "
        "of each configuration"
        + (f", extra rounds within {adaptive.budget_s:.0f} s" if adaptive.budget_s else "")
        + (
            f" and while the run's measuring in all stays within "
            f"{adaptive.measuring_budget_s:.0f} s"
            if adaptive.measuring_budget_s
            else ""
        )
        + "."
    )
    if not rounds:
        ended = (
            f" It stopped because {stopping.reason}."
            if stopping
            else " Why is not recorded in this run folder (it holds no results/stopping.json)."
        )
        return [head + " No extra round was measured." + ended]
    lines = [head]
    if stopping is None:
        lines.append(
            "- Why the extra rounds stopped is not recorded in this run folder (it holds no "
            "results/stopping.json)."
        )
    # numbered by their order after the planned rounds (older files could repeat a number)
    numbered = list(enumerate(rounds, planned + 1))
    shown = numbered if len(rounds) <= 3 else [numbered[0], numbered[-1]]
    if len(rounds) > 3:
        lines.append(
            f"- {len(rounds)} extra rounds ({planned + 1} to {planned + len(rounds)}), "
            f"{sum(len(r.cells) for r in rounds)} cells; the first and the last:"
        )
    for number, record in shown:
        reasons = "; ".join(record.reasons[:4]) + (
            f"; and {len(record.reasons) - 4} more" if len(record.reasons) > 4 else ""
        )
        lines.append(
            f"- Round {number}: {len(record.cells)} cells re-measured because "
            f"these verdicts were undecided: {reasons}."
        )
    return lines
