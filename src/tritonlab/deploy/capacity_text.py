"""The words of ``tritonlab capacity``: table cells and the markdown summary, from the typed
``CapacityReport`` (``deploy.capacity_run``); the console table and the markdown read the same
cells."""

from __future__ import annotations

from tritonlab.decisions.capacity import LOAD_KINDS, Capacity, PointCapacity
from tritonlab.deploy.capacity_run import CapacityReport, SizedCapacity

COLUMNS = (
    "configuration",
    "load",
    "capacity infer/s per replica (95% interval)",
    "p99 ms (95% interval)",
    "p99 holds",
    "replicas (range)",
    "provision",
)


def _span(median: float, ci: tuple[float, float] | None, scale: float, digits: int) -> str:
    text = f"{median / scale:,.{digits}f}"
    if ci is None:
        return text + " (one repeat)"
    return text + f" ({ci[0] / scale:,.{digits}f}–{ci[1] / scale:,.{digits}f})"


def _point_cells(p: PointCapacity) -> list[str]:
    return [
        f"{p.load_key} ({p.load_words}, {p.repeats} repeats)",
        _span(p.throughput_infer_per_s, p.throughput_ci95_infer_per_s, 1.0, 0),
        _span(p.latency_p99_us, p.latency_p99_ci95_us, 1000.0, 2),
        str(p.p99_holds),
    ]


def row_cells(row: SizedCapacity) -> list[str]:
    """One table row per configuration: its capacity point, or why it has none."""
    c: Capacity = row.capacity
    name = f"{c.description} ({c.config_key})"
    if c.point is None or row.replicas is None:
        return [name, "—", "none within the budget", "—", "—", "—", "—"]
    r = row.replicas
    spread = f"{r.at_median} ({r.fewest}–{r.cautious})"
    return [name, *_point_cells(c.point), spread, str(r.cautious)]


def headline(report: CapacityReport) -> str:
    """The question answered, in one line."""
    return (
        f"{report.run} ({report.selection}): replicas for "
        f"{report.target_load_infer_per_s:,.0f} infer/s at p99 <= "
        f"{report.latency_budget_p99_us / 1000:g} ms"
    )


TRACE_WORDS = LOAD_KINDS[0].words  # "under the trace"


def notes(report: CapacityReport) -> list[str]:
    """The notes under the table, as sentences."""
    lines = [
        f"Capacity per replica: the highest median throughput among a configuration's load "
        f"points whose {report.rule}; throughput and p99 intervals are the {report.interval}.",
    ]
    for row in report.sized:
        if row.replicas is not None:
            lines.append(f"{row.capacity.config_key}: {row.replicas.words}.")
    for row in report.rows:
        c = row.capacity
        if c.point is None:
            lines.append(f"{c.config_key}: {c.why_none()}.")
        if c.dropped:
            lines.append(
                f"{c.config_key}: its load points {' and '.join(c.dropped)} were left out "
                "(perf_analyzer did not keep to that load), so the capacity stands on the others."
            )
        if c.at_least:
            lines.append(
                f"{c.config_key}: the chosen point is the highest load measured and its p99 "
                "holds, so a replica carries at least this much; measure higher loads to find "
                "where the budget breaks."
            )
    if any(row.capacity.point is not None and row.capacity.load_words == TRACE_WORDS
           for row in report.rows):  # fmt: skip
        lines.append(
            "Under a replayed trace the offered load is the trace's, so a capacity there is the "
            "trace's rate a replica carried within the budget: a lower bound for traffic of "
            "that shape (a faster replay of the same shape would find how much more it carries)."
        )
    lines.append(f"Capacity {report.hardware_note}.")
    return lines


def markdown(report: CapacityReport) -> str:
    """The report as markdown: headline, the table, then the notes."""
    out = [f"## Capacity: {headline(report)}", ""]
    out.append("| " + " | ".join(COLUMNS) + " |")
    out.append("|" + "---|" * len(COLUMNS))
    for row in report.rows:
        cells = [cell.replace("|", "\\|") for cell in row_cells(row)]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out += [f"- {line}" for line in notes(report)]
    return "\n".join(out) + "\n"
