"""The experiment log's "Replayed traces" section: each trace's figures and, per
configuration, whether perf_analyzer kept to the trace (its achieved request rate against the
trace's mean rate, and its own warnings that it could not keep up)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from tritonlab.experiments.plan import LoadPoint
from tritonlab.experiments.store import CellResult
from tritonlab.perf.trace import KEPT_TO_PCT, TraceStats, adherence, delayed_pct
from tritonlab.run_layout import RunLayout


def _config_row(stats: TraceStats, description: str, cells: list[CellResult]) -> str:
    found = [  # each measured cell's achieved rate against the trace
        (c, adherence(stats, m.throughput_infer_per_s, c.perf.settings.batch_size, c.perf.warnings))
        for c in cells
        if (m := c.perf.measurement) is not None
    ]
    if not found:
        return f"| {description} | {len(cells)} | no measurement | | | |"
    rates = [a.achieved_rate_per_s for _, a in found]
    median = statistics.median(rates)
    kept = sum(1 for _, a in found if a.kept_to)
    behind = sum(a.behind_warnings for _, a in found)
    late = max(delayed_pct(list(c.perf.warnings)) for c, _ in found)
    behind_text = f"{behind}" + (f" (at most {late:g}% of requests late)" if late else "")
    span = f" ({min(rates):,.1f}–{max(rates):,.1f})" if len(rates) > 1 else ""
    pct = 100.0 * median / stats.mean_rate_per_s
    verdict = "yes" if kept == len(found) else "no" if kept == 0 else "partly"
    over = (
        f"; above the trace's mean by {pct - 100:.0f}%: these cells offered more load than the "
        "trace"
        if pct > 100 + KEPT_TO_PCT
        else ""
    )  # keeping to a trace is two-sided (issue 36 audit: 107% of the mean read "kept: yes")
    return (
        f"| {description} | {len(found)} | {median:,.1f}{span} | {pct:.1f}% | "
        f"{verdict} ({kept} of {len(found)} cells{over}) | {behind_text} |"
    )


def trace_section(loads: Sequence[LoadPoint], cells: Sequence[CellResult]) -> list[str]:
    """The section, or nothing when no load replayed a trace."""
    traced = [ld for ld in loads if ld.trace is not None]
    if not traced:
        return []
    lines = [
        "## Replayed traces",
        "",
        "perf_analyzer sent requests at the gaps of each trace's interval file "
        "(`--request-intervals`, async requests), looping over it; every measurement window "
        "holds whole cycles of the trace, so a window that keeps to it carries about the trace's "
        "mean rate (a row far above it offered more load than the trace, and says so). The "
        "achieved rate is perf_analyzer's throughput over its windows divided by "
        "the client batch size; it *kept to* the trace when at least "
        f"{100 - KEPT_TO_PCT:g}% of the trace's mean rate. Falling short means perf_analyzer "
        "could not send on schedule (it "
        "warns that it could not keep up) or the server answered slower than requests came. "
        "A configuration's figures are compared with another's under the trace only where "
        f"perf_analyzer sent at most {KEPT_TO_PCT:g}% of the requests late in every repeat "
        "(what it sent is the offered load; completions short of the trace's rate are the "
        "server's result, and show in the throughput and latency).",
        "",
    ]
    for load in traced:
        stats = load.trace
        assert stats is not None
        own = [c for c in cells if c.load_key == load.key]
        files = RunLayout(Path())  # the paths as the run folder names them
        lines += [
            f"### {load.key}: trace {stats.name}",
            "",
            f"- Trace `{files.trace_csv(stats.name).as_posix()}` (sha256 `{stats.sha256[:16]}…`, "
            f"replayed from `{files.trace_intervals(stats.name).as_posix()}`): "
            f"{stats.request_count:,} requests "
            f"in a {stats.duration_s:g} s cycle, mean rate {stats.mean_rate_per_s:,.1f} req/s, "
            f"coefficient of variation of inter-arrival times {stats.interarrival_cv:.2f} (1 for "
            f"Poisson arrivals, above 1 burstier), peak {stats.peak_rate_per_s:,.0f} req/s over "
            "1 s.",
        ]
        if own:
            windows = sorted({c.perf.settings.measurement_interval_ms for c in own})
            cycles = sorted({round(w * 1000 / stats.cycle_us, 2) for w in windows})
            lines += [
                f"- Measured in {len(own)} cell(s); each measurement window lasted "
                f"{', '.join(f'{w:,} ms' for w in windows)}, "
                f"{' or '.join(f'{c:g}' for c in cycles)} whole cycle(s) of the trace.",
                "",
            ]
            lines += [
                "| config | cells | achieved req/s, median (range) | of the trace's mean "
                "| kept to it | not-keeping-up warnings |",
                "|---|---|---|---|---|---|",
            ]
            by_config: dict[str, list[CellResult]] = {}
            for cell in own:
                by_config.setdefault(cell.variant.description, []).append(cell)
            lines += [_config_row(stats, d, cs) for d, cs in by_config.items()]
        else:
            lines.append("- No cell of this load was measured.")
        lines.append("")
    return lines
