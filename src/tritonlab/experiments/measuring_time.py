"""How long a run has measured, read from its folder: the span of its cells, less the
serving-path probes measured inside it, plus the block engine's co-loading and warm-ups.

Read from disk rather than counted in memory, so that a resumed run counts what it measured
before, and the benchmarks that judge a run's measuring time (``benchmarks/resolution.py``,
``benchmarks/demo_precision.py``) read the same figure the extra rounds' budget stops on. The
cells' span includes the disturbed cells measured again and the loads between cells; it leaves
out the server's start, the model's export and the reports.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from tritonlab.experiments.blocks import load_engine_record
from tritonlab.experiments.store import CellResult, load_cells
from tritonlab.run_layout import SERVING_PATH_DIR


def _spans(cells: list[CellResult]) -> list[tuple[float, float]]:
    """Each cell's (start, end) in epoch seconds."""
    spans = []
    for cell in cells:
        start = dt.datetime.fromisoformat(cell.started_utc.replace("Z", "+00:00")).timestamp()
        spans.append((start, start + cell.perf.wall_s))
    return spans


def measuring_s(run_dir: Path) -> float:
    """Seconds ``run_dir``'s run has measured: its first cell's start to its last cell's end,
    less the span of the serving-path probes that started within it, plus the block engine's
    co-loading and warm-up (``results/engine.json``); 0.0 before any cell."""
    spans = _spans(load_cells(run_dir))
    if not spans:
        return 0.0
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    total = last - first
    probes = _spans(load_cells(run_dir, SERVING_PATH_DIR))
    inside = [(s, e) for s, e in probes if first <= s <= last]
    if inside:
        total -= max(e for _, e in inside) - min(s for s, _ in inside)
    engine = load_engine_record(run_dir)
    return round(total + (engine.warmup_s if engine else 0.0), 1)


def measuring_per_cell_s(run_dir: Path, measured_s: float) -> float:
    """``measured_s`` (``measuring_s`` of ``run_dir``) over the cells it spans, each try of a
    cell measured again counted: what one more cell has cost this run on average, the gaps
    between cells included; 0.0 before any cell. (The session's own count of cells also holds
    the serving-path probes, which ``measuring_s`` leaves out: dividing by it once priced a
    cell too low.)"""
    cells = load_cells(run_dir)
    tries = sum(c.interference.attempts if c.interference is not None else 1 for c in cells)
    return measured_s / tries if tries else 0.0
