"""Parts of the log's "How it was measured" section read from the cells and the benchmark
files: the windows the cells were measured with, and a co-loaded run's process term."""

from __future__ import annotations

from tritonlab.experiments.blocks import EngineRecord
from tritonlab.experiments.store import CellResult
from tritonlab.stats.error_rates import measured_rates


def process_term_line(engine: EngineRecord) -> list[str]:
    """A co-loaded run's verdicts hold the process term, said where the log says how it
    measured (issue 36 audit: a trace tune's intervals widened by ±1.5% where its log never
    mentioned the term; a warm-up run's said so only in its error-rates line)."""
    if engine.coload is None or not engine.coload.co_loaded:
        return []
    rates = measured_rates()
    term = rates.process_term if rates is not None else None
    if term is None:
        return []
    return [
        "- Verdicts between two configurations of this co-loaded run hold the process term, "
        f"±{term.pair_half_width_pct():.1f}% on a throughput or server-side interval (each "
        "configuration's own server process: docs/measuring.md, \"Each configuration's own "
        'process"); p99 intervals and one configuration at two loads are not widened.'
    ]


def cell_windows(cells: list[CellResult]) -> str:
    """The windows the cells were measured with, by load ('2000 ms at every load', or per
    load): what perf_analyzer was given, not the engine's planned window (issue 36 audit: a
    trace tune's log said 200 ms where every cell ran 2,000 ms)."""
    by_load: dict[str, set[int]] = {}
    for c in cells:
        by_load.setdefault(c.load_key, set()).add(c.perf.settings.measurement_interval_ms)
    if not by_load:
        return ""
    every = {ms for found in by_load.values() for ms in found}
    if len(every) == 1:
        return f"{every.pop()} ms at every load"
    return ", ".join(
        f"{'/'.join(str(ms) for ms in sorted(found))} ms at {key}"
        for key, found in sorted(by_load.items())
    )
