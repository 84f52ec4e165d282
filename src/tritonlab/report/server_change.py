"""Where a configuration's difference from the first row lies in the server: the change in
queue and in compute time per request at one load, each with its paired verdict, and which of
the changes the intervals separate (a page's "why" lines under a side-by-side table, e.g. the
trace example's ``SUMMARY.md``)."""

from __future__ import annotations

from tritonlab.stats.aggregate import VariantSummary, compare_figure, why_not_comparable


def server_change_lines(rows: list[VariantSummary], label: str) -> list[str]:
    """What the server's figures say about each row's difference from the first at one load:
    the change in queue and in compute time per request, each with its paired verdict, and
    which of the changes the intervals separate is the larger (issue 36 audit: "the larger
    change is in computing" named a change its interval did not separate, beside a queue
    change that was)."""
    first = rows[0]
    qa, ca = first.queue_us.median, first.compute_us.median
    lines = []
    for row in rows[1:]:
        qb, cb = row.queue_us.median, row.compute_us.median
        if why := why_not_comparable(first, row):  # issue 36 audit: attributed all the same
            lines.append(
                f"- `{row.variant.name}` against `{first.variant.name}` under {label}: not read; "
                f"the two rows are not comparable ({why}), so whether the difference lies in "
                "waiting in the queue or in computing cannot be told from them."
            )
            continue
        if qa is None or ca is None or qb is None or cb is None:
            lines.append(
                f"- {row.variant.name}: the server's queue or compute figures are missing."
            )
            continue
        queue = compare_figure("queue", "queue_us", first, row)
        compute = compare_figure("compute", "compute_us", first, row)
        lines.append(
            f"- `{row.variant.name}` against `{first.variant.name}` under {label}: queue time "
            f"per request {qa:,.0f} -> {qb:,.0f} µs ({queue.phrase()}), compute time "
            f"{ca:,.0f} -> {cb:,.0f} µs ({compute.phrase()}), mean batch "
            f"{first.mean_batch.median or 0:.1f} -> {row.mean_batch.median or 0:.1f}: "
            f"{where_text(queue.clear, abs(qb - qa), compute.clear, abs(cb - ca))}."
        )
    return lines


def where_text(queue_clear: bool, queue_us: float, compute_clear: bool, compute_us: float) -> str:
    """Which change the server's figures show, by the paired verdicts first, then the size."""
    if queue_clear and compute_clear:
        where = "waiting in the queue" if queue_us > compute_us else "computing"
        return f"both changes are separated from the noise; the larger is in {where}"
    if queue_clear or compute_clear:
        shown, other = (
            ("waiting in the queue", "compute") if queue_clear else ("computing", "queue")
        )
        return (
            f"the change the intervals separate is in {shown} (the {other} change is not "
            "separated from the noise)"
        )
    return (
        "neither change is separated from the noise: these figures cannot tell whether the "
        "difference lies in waiting in the queue or in computing"
    )
