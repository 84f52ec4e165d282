"""The experiment log's "Method" section: how verdicts are made, how many there are, and why
the adaptive rounds stopped. The markdown log and the HTML report both use it."""

from __future__ import annotations

from tritonlab.analysis.adaptive import TARGET_HALF_WIDTH_PCT
from tritonlab.analysis.explain import Analysis
from tritonlab.analysis.robust import MIN_BLOCKS
from tritonlab.analysis.rules import (
    CPU_BOUND_SHARE,
    SATURATED_QUEUE_SHARE,
    TRAP_BATCH_SHARE_OF_IN_FLIGHT,
    TRAP_QUEUE_MAX_SHARE_OF_DELAY,
    TRAP_QUEUE_SHARE_OF_DELAY,
)
from tritonlab.analysis.verdicts import CONFIDENCE, MIN_EFFECT_PCT
from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.rounds import AdaptiveRound, StoppingRecord


def count_verdicts(analyses: list[Analysis]) -> int:
    """Throughput and p99 verdicts the log states: against the baseline, and against the
    closest earlier configuration where that is another one."""
    total = 0
    for analysis in analyses:
        for r in analysis.reports[1:]:
            total += 2
            if r.reference and r.reference != analysis.reports[0].summary.variant.name:
                total += 2
    return total


def robust_blocks(analyses: list[Analysis]) -> bool:
    """Whether any verdict of the log was paired over enough blocks for the robust interval."""
    return any(
        v.pairs >= MIN_BLOCKS
        for a in analyses
        for r in a.reports
        for v in (*r.verdicts.values(), *r.reference_verdicts.values())
    )


def method_lines(
    verdicts: int = 0, adaptive: bool = False, robust: bool = False, precision: bool = False
) -> list[str]:
    """The log's "Method" section as markdown lines: statistics, verdicts and rules."""
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
        "- Repeats are measured in interleaved rounds (every configuration once, then again), "
        'so a verdict ("higher", "lower", "no clear difference") pairs the two configurations\' '
        "repeats by round and takes the log-ratio of each pair: the change shown is "
        f"{interval}. "
        "The word follows the interval: higher or lower only when the interval excludes no "
        "change, so a word can never contradict its numbers. Configurations under different "
        'offered loads, or a load perf_analyzer did not keep up, are "not comparable"; with '
        "a single repeat there is no interval and no verdict.",
        f"- Multiplicity: this log states {verdicts} throughput and p99 verdicts, each at "
        f"{level} two-sided, with no correction: if nothing differed at all, about "
        f"{verdicts * (1 - CONFIDENCE):.1f} of them would still read higher or lower by chance."
        + (
            (
                " Rounds were added while a headline throughput interval was wider than "
                f"±{TARGET_HALF_WIDTH_PCT:g}%, whatever its word: a rule on the intervals' "
                "width, not on where they lie, keeps their coverage near "
                f"{level} (the test suite simulates the rule: a rule that also waited for a "
                "decided word would not)."
            )
            if precision
            else (
                " Verdicts that a recommendation or an explanation rests on are measured "
                "further (adaptive repeats) until their interval excludes no change or lies "
                f"within ±{MIN_EFFECT_PCT:g}%, or the round limit is reached; looking after "
                "every round and stopping on a decided word raises the chance of a false "
                "higher or lower above the level stated."
            )
            if adaptive
            else ""
        ),
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
    adaptive = manifest.adaptive
    if adaptive is None:
        return []
    planned = manifest.plan.repeats
    head = (
        f"- Adaptive repeats: {planned} rounds planned, at most {adaptive.max_repeats}"
        + (f", extra rounds within {adaptive.budget_s:.0f} s" if adaptive.budget_s else "")
        + "."
    )
    if not rounds:
        ended = f" It stopped because {stopping.reason}." if stopping else ""
        return [head + " No extra round was measured." + ended]
    lines = [head]
    shown = rounds if len(rounds) <= 3 else [rounds[0], rounds[-1]]
    if len(rounds) > 3:
        lines.append(
            f"- {len(rounds)} extra rounds ({rounds[0].round} to {rounds[-1].round}), "
            f"{sum(len(r.cells) for r in rounds)} cells; the first and the last:"
        )
    for record in shown:
        reasons = "; ".join(record.reasons[:4]) + (
            f"; and {len(record.reasons) - 4} more" if len(record.reasons) > 4 else ""
        )
        lines.append(
            f"- Round {record.round}: {len(record.cells)} cells re-measured because "
            f"these verdicts were undecided: {reasons}."
        )
    return lines
