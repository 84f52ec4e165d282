"""The experiment log's "Pipeline steps" section: which called model binds, from Triton's
per-model statistics (``explanation/steps.py``), and what could and could not be attributed."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from scipy.stats import binomtest

from tritonlab.experiments.store import CellResult
from tritonlab.explanation.steps import (
    QueueGrowth,
    StepsAtLoad,
    binding_step,
    queue_growth,
    steps_table,
)
from tritonlab.report.text_format import num
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.verdicts import compare

# Shares closer than this (in points of the total) are called close, not one step binding.
CLOSE_SHARE = 0.10


def _growth_word(g: QueueGrowth) -> str:
    """'grows' (at least twofold and 100 µs), 'rises, less than twofold,' or 'does not grow'
    (issue 36 audit: a 72% rise was called "does not grow")."""
    if g.grows:
        return "grows"
    if g.high_queue_us > g.low_queue_us:
        return "rises, less than twofold,"
    return "does not grow"


def _share_sentence(row: StepsAtLoad, label: str, kind: str) -> str:
    top = row.binding
    others = "; ".join(f"`{s.step}` {s.share:.0%}" for s in row.steps if s.step != top.step)
    runner_up = max((s.share for s in row.steps if s.step != top.step), default=0.0)
    verb = (
        "binds"
        if top.share - runner_up >= CLOSE_SHARE
        else "holds the most, within 10 points of the next (no clear binding step)"
    )
    among = "of the steps' server time"
    text = (
        f"- {label} at {row.load_key}: "
        + ("among the steps, " if kind == "bls" else "")
        + f"step `{top.step}` {verb}, with {top.share:.0%} {among} (queue {num(top.queue_us)} "
        f"µs + compute {num(top.compute_us)} µs per request it served"
        + (f", {top.calls_per_request:.2g} calls per request" if top.calls_per_request != 1 else "")
        + ")"
        + (f"; {others}" if others else "")
    )
    if kind == "bls" and row.own_queue_binds:
        text += (
            f"; but requests waited longer for the BLS model itself: {num(row.own_queue_us)} µs "
            f"in its own queue per request, more than `{top.step}`'s queue and compute (a BLS "
            "instance is busy while its calls run, so the wait for one holds the calls' time "
            "too)"
        )
    return text + "."


def _attribution(
    kind: str, cells: Sequence[CellResult], labels: dict[str, str] | None = None
) -> list[str]:
    """What Triton's statistics attribute to the measured model itself, and what they cannot:
    per configuration and load, the median over its cells of each cell's own figures (a
    difference of medians pooled over configurations is no configuration's, issue 36)."""
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for c in cells:
        if not c.steps or (s := c.server) is None or not s.request_count:
            continue
        # a batched execution charges each request it carried the whole execution's compute:
        # the BLS model's own share per request is its executions' compute over the requests
        # they carried (issue 36 audit: 151 ms of "Python work" at mean batch 4.17 was that)
        own = s.request_us_per_request
        if kind == "bls":
            own = s.compute_us_per_execution * s.execution_count / s.request_count
        called = sum(
            (d.queue_us_per_request + d.compute_us_per_request)
            * (d.request_count / s.request_count)
            for d in c.steps.values()
        )
        groups.setdefault((c.variant.name, c.load_key), []).append((own, called))
    if not groups:
        return []
    lines = [
        "- What Triton attributes, per configuration and load (medians over its cells of "
        "each cell's own figures): "
        + (
            "the BLS model's compute (each execution's shared over the requests it carried) "
            "includes the time it waited on its calls; the rest, "
            "after the called models' queue and compute, is the BLS model's own Python work and "
            "the calls' overhead together (Triton's statistics do not split it further)."
            if kind == "bls"
            else "a request's time in the ensemble against its steps' queue and compute; the "
            "difference is the ensemble scheduler's own time (passing tensors between steps)."
        )
    ]
    for (variant, load), pairs in groups.items():
        label = (labels or {}).get(variant, variant)
        own_us = statistics.median(o for o, _ in pairs)
        called_us = statistics.median(c for _, c in pairs)
        rest_us = statistics.median(o - c for o, c in pairs)
        whole = "compute" if kind == "bls" else "in the ensemble"
        # the rest is the median of each cell's own difference, not a difference of the two
        # medians quoted beside it (issue 36 audit: "exceed it by 543 µs" beside medians 700 apart)
        if rest_us < 0:
            over = sum(1 for o, c in pairs if c > o)
            # a sign test: so many cells one way is not the reads' timing only where chance
            # would give it less than 1 time in 20 (issue 36 audit: 5 of 6 was called that)
            systematic = binomtest(over, len(pairs), 0.5).pvalue < 0.05
            why = (
                f"in {over} of {len(pairs)} cells, more than read timing gives by chance: the "
                "called models' statistics count time this model's own do not, which Triton's "
                "statistics do not name"
                if systematic
                else f"in {over} of {len(pairs)} cells; the statistics of different models are "
                "not read at the same instant, so parts can exceed the whole"
            )
            rest = (
                f"the called models' figures exceed it by {num(-rest_us)} µs"
                + (", within 1%" if -rest_us <= 0.01 * own_us else "")
                + f" (the median of each cell's difference; {why})"
            )
        elif rest_us <= 0.01 * own_us:
            rest = (
                f"the called models account for all but {num(rest_us)} µs of it, within 1% "
                "(the median of each cell's difference)"
            )
        else:
            rest = f"the rest {num(rest_us)} µs (the median of each cell's difference)"
        lines.append(
            f"  - {label} at {load}: {whole} {num(own_us)} µs per request, called models "
            f"{num(called_us)} µs, {rest} ({len(pairs)} cell{'s' if len(pairs) != 1 else ''})."
        )
    return lines


def steps_section(cells: Sequence[CellResult], labels: dict[str, str], kind: str) -> list[str]:
    """The section (empty when no cell has step statistics); ``labels``: variant -> its
    description, ``kind``: ``ensemble`` or ``bls``."""
    table = steps_table([c for c in cells if not c.variant.control])
    if not table:
        return []
    lines = [
        "## Pipeline steps",
        "",
        "Triton's statistics of every model the measured one calls, read over the same "
        "windows as its own (medians over the repeats). A step's share is its requests times "
        "its server time per request (queue, compute and Triton's overhead), over the sum of "
        "every step's; the measured model's own queue is not in it.",
        "",
        "| config | load | step | calls / request | queue µs | compute µs | mean batch | share |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table:
        label = labels.get(row.variant, row.variant)
        for s in row.steps:
            lines.append(
                f"| {label} | {row.load_key} | `{s.step}` | {s.calls_per_request:.2g} | "
                f"{num(s.queue_us)} | {num(s.compute_us)} | {s.mean_batch:.1f} | {s.share:.0%} |"
            )
    lines.append("")
    for variant in dict.fromkeys(r.variant for r in table):
        label = labels.get(variant, variant)
        rows = [r for r in table if r.variant == variant]
        top = max(rows, key=lambda r: r.concurrency or 0)
        lines.append(_share_sentence(top, label, kind))
        if growth := queue_growth(table, variant):
            parts = [
                f"`{g.step}`'s queue {_growth_word(g)} with load "
                f"({num(g.low_queue_us)} µs at concurrency {g.low_concurrency}, "
                f"{num(g.high_queue_us)} µs at {g.high_concurrency}, one client: "
                f"{g.client or 'the same'}; medians of {g.low_repeats} and {g.high_repeats} "
                "repeats)"
                for g in growth
            ]
            lines.append(f"- {label}: " + "; ".join(parts) + ".")
    lines += _attribution(kind, [c for c in cells if not c.variant.control], labels)
    base_rows = [r for r in table if r.variant == table[0].variant]
    base_top = max(base_rows, key=lambda r: r.concurrency or 0)
    if kind == "bls" and base_top.own_queue_binds:
        lines.append(
            f"- The baseline's requests waited longest in the BLS model's own queue "
            f"({num(base_top.own_queue_us)} µs per request at {base_top.load_key}), longer than "
            f"in any step (the binding one, `{base_top.binding.step}`); the rows above say "
            "whether a configuration moved that."
        )
    elif (binding := binding_step(table, table[0].variant)) is not None:
        lines.append(
            f"- The baseline's binding step is `{binding.step}`: a configuration of that step "
            "is where a change could show first; the rows above say which of them moved the "
            "pipeline and which did not."
        )
    return [*lines, ""]


# A step's figures by the word the line uses: ``ServerStatsDelta`` names.
_STEP_FIGURE = {"batch": "mean_batch_size", "compute": "compute_us_per_inference"}


def changed_step_line(step: str, summary: VariantSummary, reference: VariantSummary | None) -> str:
    """The step the configurations change, by its own statistics, beside the measured model's
    counters above (an ensemble's or BLS model's own batch and compute are not the step's);
    against the baseline's step at the same load where ``reference`` is given. '' where no
    cell holds the step's statistics."""
    batch = summary.step_figure(step, _STEP_FIGURE["batch"])
    compute = summary.step_figure(step, _STEP_FIGURE["compute"])
    if batch.median is None or compute.median is None:
        return ""
    queue = summary.step_figure(step, "queue_us_per_request").median
    latency = summary.latency_avg.median
    queued = (
        ""
        if queue is None
        else f", queue {num(queue)} µs per request"
        + (
            f" ({100 * queue / latency:.0f}% of the measured model's mean latency)"
            if latency
            else ""
        )
    )  # the ensemble's own "queued 4 µs" read as no queueing (issue 36 audit)
    text = (
        f"The figures above are the measured model's own counters; the step the "
        f"configurations change, `{step}`, by its own statistics: mean batch "
        f"{batch.median:.2f}{queued}, compute per inference {num(compute.median)} µs"
    )
    if reference is not None:
        ref_batch = reference.step_figure(step, _STEP_FIGURE["batch"])
        ref_compute = reference.step_figure(step, _STEP_FIGURE["compute"])
        if ref_batch.median is not None and ref_compute.median is not None:
            verdict = compare("compute per inference", ref_compute, compute)
            text += (
                f" (the baseline's: mean batch {ref_batch.median:.2f}, compute per inference "
                f"{num(ref_compute.median)} µs; compute per inference {verdict.phrase()})"
            )
    return text + "."
