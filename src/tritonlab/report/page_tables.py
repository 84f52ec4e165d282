"""The compact tables and figures the results pages (README blocks, ``docs/results.md``) set
beside each other: one load's configurations with their verdicts, and a run's baseline in a
sentence, printed with the digits that tell their medians apart.

For a pipeline whose configurations change one step, the queue and batch columns are that
step's own statistics (issue 36 audit: the ensemble's own "queued 4 µs" read as no queueing
where step `cnn` queued 245,823 µs, 82% of the latency).
"""

from __future__ import annotations

import statistics

from tritonlab.experiments.manifest import Manifest
from tritonlab.explanation.explain import FLOOR_NOTE, Analysis, VariantReport
from tritonlab.report.conditions_text import uneven_repeats_note
from tritonlab.report.text_format import num
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.load_drift import blocks_words, disturbed_blocks, within_load
from tritonlab.stats.robust import MIN_BLOCKS
from tritonlab.stats.summary import Summary, column_digits
from tritonlab.stats.verdicts import compare


def _phrase(report: VariantReport, figure: str) -> str:
    verdict = report.verdicts.get(figure)
    return "—" if verdict is None else verdict.phrase()


def _doubt(report: VariantReport, figure: str) -> str:
    """' (the A/A control's interval ...)' where the control's interval at the row's load
    reaches its change on ``figure`` against the baseline; else ''."""
    return f" ({FLOOR_NOTE})" if figure in report.floor_figures else ""


def compact_table(
    analysis: Analysis, step: str | None = None, baseline: str | None = None
) -> list[str]:
    """One load's configurations: median (range) infer/s and p99, queue, batch, verdicts; with
    ``step`` (the step a pipeline's configurations change), that step's queue and batch. The
    verdicts are against the load's first row; where that is not the run's ``baseline`` (a
    tune's load its start never reached) the columns say so (issue 36 audit: "vs baseline"
    over a column whose reference was another configuration)."""
    summaries = [r.summary for r in analysis.reports]
    tput = column_digits([s.throughput for s in summaries])
    p99 = column_digits([s.latency_p99 for s in summaries])
    where = f"step `{step}` " if step else ""
    first = summaries[0].variant.name if summaries else None
    other = baseline is not None and first != baseline
    against = "the first row" if other else "baseline"
    lines = [
        f"| config | infer/s | p99 µs | {where}queue µs | {where}mean batch | throughput vs "
        f"{against} | p99 vs {against} |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(analysis.reports):
        s = r.summary
        verdicts = (
            ("the reference (not the run's baseline) | the reference" if other else "— | —")
            if i == 0
            else f"{_phrase(r, 'throughput')}{_doubt(r, 'throughput')} | "
            f"{_phrase(r, 'latency_p99')}{_doubt(r, 'latency_p99')}"
        )
        queue, batch = _server(s, step)
        lines.append(
            f"| {s.variant.description} | {s.throughput.text(tput)}{_warned(s)} | "
            f"{s.latency_p99.text(p99)} "
            f"| {num(queue.median)} | {num(batch.median, 1)}{_split(s, step, batch.median)} | "
            f"{verdicts} |"
        )
    return lines


def pairs_caption(analysis: Analysis) -> str:
    """Where a table's verdicts rest on fewer than ``MIN_BLOCKS`` pairs, on how many and by
    which interval ('' where none does; issue 36 audit: a tune's 4-pair t-intervals quoted
    under a page that describes only the signed-rank one)."""
    pairs = sorted(
        {
            v.pairs
            for r in analysis.reports[1:]
            for f in ("throughput", "latency_p99")
            if (v := r.verdicts.get(f)) is not None and v.has_interval and v.pairs < MIN_BLOCKS
        }
    )
    if not pairs:
        return ""
    span = f"{pairs[0]}" if len(pairs) == 1 else f"{pairs[0]} to {pairs[-1]}"
    return (
        f"Verdicts in this table over {span} pairs: below {MIN_BLOCKS} pairs the interval is the "
        "mean log-ratio's Student-t interval, not the signed-rank one."
    )


# a mean batch is quoted bare where at least this share of executions held within one request of
# it; below, the page says what it is a mean of
SIZE_NEAR_MEAN = 0.25


def _split(s: VariantSummary, step: str | None, mean: float | None) -> str:
    """' (a mean of sizes 1 and 7)' or ' (a mean over sizes 1 to 31, most often 1: 59%)' where
    under a quarter of the executions held within one request of the mean batch (issue 36 audits: a
    page quoted "mean batch 4.0" where half the executions held 1 and half 7, and "10.1" over
    sizes 1 to 16); '' otherwise, and for a step's batch (its sizes are not stored)."""
    counts = s.batch_distribution
    total = sum(counts.values())
    if step is not None or mean is None or not total:
        return ""
    centre = round(mean)  # the size nearest the mean, as the column prints it
    if sum(n for size, n in counts.items() if abs(size - centre) <= 1) >= SIZE_NEAR_MEAN * total:
        return ""
    common = sorted(sorted(counts, key=lambda size: -counts[size])[:2])
    if sum(counts[size] for size in common) >= 0.8 * total:
        return f" (a mean of sizes {' and '.join(str(size) for size in common)})"
    most = max(counts.values())
    tops = sorted(size for size, n in counts.items() if n == most)  # a tie names every size
    each = " each" if len(tops) > 1 else ""
    return (
        f" (a mean over sizes {min(counts)} to {max(counts)}, most often "
        f"{' and '.join(str(t) for t in tops)}: {100 * most / total:.0f}%{each})"
    )


def _warned(s: VariantSummary) -> str:
    """' (...)' where perf_analyzer could not keep up the row's rate in a repeat (the log
    leaves the point out of its picks) or warned in some repeats; else '' (issue 36 audit: a
    page quoted open-loop rows its log had excluded, without a word)."""
    warned = sum(1 for c in s.cells if c.perf.warnings)
    if s.load_generator_fell_behind:
        return " (perf_analyzer could not keep up this rate in a repeat: left out of the picks)"
    if warned:
        return f" (perf_analyzer warned in {warned} of {len(s.cells)} repeats)"
    return ""


def _server(s: VariantSummary, step: str | None) -> tuple[Summary, Summary]:
    """The queue (µs per request) and mean batch: the measured model's, or ``step``'s own."""
    if step is None:
        return s.queue_us, s.mean_batch
    return s.step_figure(step, "queue_us_per_request"), s.step_figure(step, "mean_batch_size")


def baseline_figures(s: VariantSummary, beside: list[VariantSummary], doubt: str = "") -> str:
    """A run's baseline throughput and p99 in a sentence, with the digits that tell it apart
    from the ``beside`` figures it is quoted with; ``doubt`` (the run's caveat) appended."""
    tput = column_digits([x.throughput for x in (s, *beside)])
    p99 = column_digits([x.latency_p99 for x in (s, *beside)])
    tail = f" ({doubt})" if doubt else ""
    return f"{s.throughput.text(tput)} infer/s, p99 {s.latency_p99.text(p99)} µs{tail}"


def called_steps_caption(manifest: Manifest, analysis: Analysis) -> str:
    """For a BLS model (its configurations change the BLS model itself), that the table's
    queue and batch are its own counters, and the batch each model it calls ran at (issue 36
    audit: a BLS row's batch of 4.2 read as batching reaching the CNN, which ran at 1.0)."""
    repository = manifest.model.repository or {}
    if repository.get("kind") != "bls":
        return ""
    ranges = []
    for step in repository.get("called") or []:
        batches = [
            m
            for r in analysis.reports
            if (m := r.summary.step_figure(str(step), "mean_batch_size").median) is not None
        ]
        if batches:
            low, high = min(batches), max(batches)
            shown = f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f}"
            ranges.append(f"`{step}` {shown}")
    called = (
        "; the models it calls kept their own batches, mean batch in every row: "
        + ", ".join(ranges)
        if ranges
        else ""
    )
    return (
        f"The queue and mean batch columns are the BLS model `{repository.get('model')}`'s own "
        f"counters{called} (the log's Pipeline steps table)."
    )


def drift_note(analysis: Analysis, summaries: list[VariantSummary]) -> str:
    """Where blocks set apart at this load (every configuration off its own median,
    ``stats.load_drift``) are among a row's pairs and its throughput word against the first
    row differs without them, that row's verdict both ways (issue 36 audit: the knee table
    alone said so, while a row at the load read "no clear difference" that without them read
    "lower"); '' where no row's word turns on those blocks."""
    disturbed = disturbed_blocks(summaries, "throughput")
    if not analysis.reports:
        return ""
    first = analysis.reports[0].summary
    parts, dropped, stands = [], set(), 0
    for r in analysis.reports[1:]:
        hit, without = within_load(first, r.summary, "throughput", disturbed)
        if not hit:
            continue
        dropped |= set(hit)
        stated = compare("throughput", first.throughput, r.summary.throughput)
        if without is None or without.word == stated.word:
            stands += 1
            continue
        parts.append(
            f"'{r.summary.variant.description}' {without.phrase()} without "
            f"{'it' if len(hit) == 1 else 'them'}, {stated.phrase()} with "
            f"{'it' if len(hit) == 1 else 'them'}"
        )
    if not parts:
        return ""
    others = (
        f"; the other {stands} row{'s' if stands != 1 else ''}' words are the same without "
        f"{'it' if len(dropped) == 1 else 'them'}"
        if stands
        else ""
    )
    blocks = blocks_words(list(dropped))
    return (
        f" {blocks[0].upper()}{blocks[1:]} read every configuration at this load off its own "
        "median (the knee table's rule); pairing at one load cancels only the part of such a "
        "shift every configuration shares, and a row's throughput word against the first row "
        f"turns on {'it' if len(dropped) == 1 else 'them'}: " + "; ".join(parts) + others + "."
    )


def blocks_note(analysis: Analysis, tune: bool = False) -> str:
    """'' when every row at the load rests on as many repeats; else that their medians are
    over different blocks (extra rounds measured only some rows: issue 36 audit, a sweep's
    baseline over 27 blocks beside a configuration over 10, while the run drifted), with the
    longer rows' medians over the blocks every row has."""
    why = (
        "the search's race measured its contenders more"
        if tune
        else "the extra rounds measured only the configurations a watched verdict needed"
    )
    note = uneven_repeats_note([len(r.summary.cells) for r in analysis.reports], why, tune)
    if not note:
        return ""
    text = f" {note}"
    common = set.intersection(*({c.block for c in r.summary.cells} for r in analysis.reports))
    longer = [r.summary for r in analysis.reports if len(r.summary.cells) > len(common)]
    # p99 too: the extra rounds may run at another pace (issue 36 audit: a row's p99 over 28
    # blocks read 28% under its neighbour's, over the 10 they share 15% above it)
    shown = []
    for s in longer:
        kept = [m for c in s.cells if c.block in common and (m := c.perf.measurement)]
        if not kept:
            continue
        p99s = [m.latency_p99_us for m in kept if m.latency_p99_us is not None]
        p99 = f", p99 {statistics.median(p99s):,.0f} µs" if p99s else ""
        p99_all = f", {s.latency_p99.median:,.0f} µs" if p99s and s.latency_p99.median else ""
        tput = statistics.median(m.throughput_infer_per_s for m in kept)
        shown.append(
            f"{s.variant.description} {tput:,.0f} infer/s{p99} (all: "
            f"{s.throughput.median or 0:,.0f} infer/s{p99_all})"
        )
    if common and shown:
        text += (
            f" Over the {len(common)} {'repeats' if tune else 'blocks'} every row has, the "
            "longer rows read: " + "; ".join(shown) + "."
        )
    return text
