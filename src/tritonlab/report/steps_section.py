"""The experiment log's "Pipeline steps" section: which called model binds, from Triton's
per-model statistics (``explanation/steps.py``), and what could and could not be attributed."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from tritonlab.experiments.store import CellResult
from tritonlab.explanation.steps import StepsAtLoad, binding_step, queue_growth, steps_table
from tritonlab.report.text_format import num

# Shares closer than this (in points of the total) are called close, not one step binding.
CLOSE_SHARE = 0.10


def _share_sentence(row: StepsAtLoad, label: str) -> str:
    top = row.binding
    others = "; ".join(f"`{s.step}` {s.share:.0%}" for s in row.steps if s.step != top.step)
    runner_up = max((s.share for s in row.steps if s.step != top.step), default=0.0)
    verb = (
        "binds"
        if top.share - runner_up >= CLOSE_SHARE
        else "holds the most, within 10 points of the next (no clear binding step)"
    )
    return (
        f"- {label} at {row.load_key}: step `{top.step}` {verb}, with {top.share:.0%} of the "
        f"request's server time (queue {num(top.queue_us)} µs + compute "
        f"{num(top.compute_us)} µs per request it served"
        + (f", {top.calls_per_request:.2g} calls per request" if top.calls_per_request != 1 else "")
        + ")"
        + (f"; {others}" if others else "")
        + "."
    )


def _attribution(kind: str, cells: Sequence[CellResult]) -> list[str]:
    """What Triton's statistics attribute to the measured model itself, and what they cannot."""
    served = [
        (c.steps, s) for c in cells if c.steps and (s := c.server) is not None and s.request_count
    ]
    if not served:
        return []
    own = [
        s.compute_us_per_request if kind == "bls" else s.request_us_per_request for _, s in served
    ]
    called = [
        sum(
            (d.queue_us_per_request + d.compute_us_per_request)
            * (d.request_count / s.request_count)
            for d in steps.values()
        )
        for steps, s in served
    ]
    own_us, called_us = statistics.median(own), statistics.median(called)
    if kind == "bls":
        return [
            "- What Triton attributes: the BLS model's compute (median "
            f"{num(own_us)} µs per request) includes the time it waited on its calls; the "
            f"called models' queue and compute add up to {num(called_us)} µs per request. The "
            f"rest, about {num(max(own_us - called_us, 0.0))} µs, is the BLS model's own Python "
            "work and the calls' overhead together: Triton's statistics do not split it further.",
        ]
    return [
        "- What Triton attributes: a request spent (median) "
        f"{num(own_us)} µs in the ensemble; its steps' queue and compute add up to "
        f"{num(called_us)} µs per request, "
        + (
            "so the steps account for all of it (within 1%): nothing measurable is left to the "
            "ensemble scheduler."
            if abs(own_us - called_us) <= 0.01 * own_us
            else f"and the difference, about {num(own_us - called_us)} µs, is the ensemble "
            "scheduler's own time (passing tensors between the steps)."
        ),
    ]


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
        "every step's.",
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
        lines.append(_share_sentence(top, label))
        if growth := queue_growth(table, variant):
            parts = [
                f"`{g.step}`'s queue {'grows' if g.grows else 'does not grow'} with load "
                f"({num(g.low_queue_us)} µs at concurrency {g.low_concurrency}, "
                f"{num(g.high_queue_us)} µs at {g.high_concurrency})"
                for g in growth
            ]
            lines.append(f"- {label}: " + "; ".join(parts) + ".")
    lines += _attribution(kind, [c for c in cells if not c.variant.control])
    if (binding := binding_step(table, table[0].variant)) is not None:
        lines.append(
            f"- The baseline's binding step is `{binding.step}`: the knobs that can move this "
            "pipeline are that step's (its instances, batching and threads) first."
        )
    return [*lines, ""]
