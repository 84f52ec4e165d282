"""The block engine: every configuration loaded at once, many short cells in random block order.

Why: on a shared 2-core machine a stretch in which the scheduler, a neighbour or the hypervisor
slows everything can last longer than one cell. The classic engine loaded one configuration at a
time and measured it for ~10 s, so such a stretch could land on one configuration and not the
other, and three rounds gave a t-interval that one bad round could blow up. This engine:

1. **Co-loads** every configuration of the plan into one server (each is its own model name),
   when the memory estimate fits; switching is then free and cells can be short. Otherwise it
   falls back to loading one configuration at a time, with the reason recorded.
2. **Warms up** each configuration once per load point (discarded), and sets the load point's
   window from the slowest warm-up so that a window holds at least ``REQUESTS_PER_WINDOW``
   requests: ``MIN_WINDOW_MS`` for a fast model, up to the plan's window for a slow one.
3. Measures **blocks**: every (configuration, load) cell once, in an order shuffled with the
   run's seed and the block number (periodic interference cannot alias onto one
   configuration). The seed is the plan's fingerprint and a random part drawn when the run
   starts (``run_seed``), recorded in ``engine.json`` and kept on a resume: every order is
   reproducible from the record, and two fresh runs of one plan are independent replicates,
   so whatever favours a place in the order does not repeat from one to the next. A cell is
   ``WINDOWS_PER_CELL`` windows, which perf_analyzer takes whatever they read (its stability
   check is off: the engine's statistics handle the spread across blocks). The verdicts pair
   cells by block.
4. Monitors **interference** per cell (``interference.py``) and re-measures disturbed cells.

This module holds the engine's decisions and their record (``results/engine.json``); the
measuring is ``block_engine.BlockEngine``, the statistics ``stats/robust.py`` and the stopping
rule ``decisions/adaptive.py``.
"""

from __future__ import annotations

import math
import random
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from tritonlab.experiments.plan import ExperimentPlan, MeasurementSettings
from tritonlab.records import Record
from tritonlab.repository.layout import RepositoryModel
from tritonlab.result_files import read_result, write_result
from tritonlab.run_layout import RunLayout

ENGINE_BLOCKS = "blocks"
ENGINE_CLASSIC = "classic"
ENGINES = (ENGINE_BLOCKS, ENGINE_CLASSIC)
SEARCH_KEY = "*"  # windows_ms key of a search's one window (tune)

MIN_WINDOW_MS = 200
WARMUP_WINDOW_MS = 300
REQUESTS_PER_WINDOW = 100
WINDOWS_PER_CELL = 3
# perf_analyzer's stability threshold, in %, that accepts any three windows.
ANY_STABILITY_PCT = 1000.0
# Defaults of a block-engine run: blocks first measured, at most, and seconds for the extra ones.
DEFAULT_BLOCKS = 10
# Co-loaded configurations can be reloaded (new stub processes) before every this many blocks,
# so that each is spread over several processes in case a process has a speed of its own for
# its lifetime. Measured side by side (`make aa-bench`, benchmarks/results/aa_floor.md), the
# reloads did not pay: identical configurations were told apart about as often with them as
# without (a false alarm or none on each side, too few to tell apart), and each reload cost a
# load and a warm-up of every configuration. So 0 (never) by default;
# the benchmark keeps the comparison.
RELOAD_EVERY_BLOCKS = 0
# At most this many blocks: a run or demo is stopped by its measuring budget (below) before
# this in all but the quietest case; 40 once stopped a quiet demo at 183 s with a headline
# interval of ±5.3% (benchmarks/results/demo_precision.md at 202ea3c), 67 s under its budget.
DEFAULT_MAX_BLOCKS = 60
# Seconds of extra blocks after the planned ones, for a sweep (a run or demo has the measuring
# budget below instead, which counts the planned blocks too).
DEFAULT_EXTRA_BUDGET_S = 150.0
# What a run or demo measures in all by default (``measuring_time.measuring_s``: the planned
# blocks, the disturbed cells measured again, the warm-ups): the extra blocks stop before they
# would pass it, so a machine busy with other work (whose disturbed cells are measured again)
# gets fewer extra blocks rather than a longer run. The precision target (issue 34) is a demo's
# headline intervals within ±5% in 250 s of measuring.
DEFAULT_MEASURING_BUDGET_S = 250.0

# Memory allowed per model instance (an allowance, not a measurement): a Python backend stub
# with onnxruntime (or OpenVINO) imported, plus the model's weights held about three times (the
# file read, the session's initializers, its arena). Co-loading uses at most half of the memory
# available when the run starts.
STUB_BYTES = 200 * 2**20
MODEL_COPIES = 3
COLOAD_SHARE_OF_AVAILABLE = 0.5


@dataclass(frozen=True)
class CoLoad(Record):
    """Whether every configuration is loaded at once, and the estimate behind it (bytes)."""

    co_loaded: bool
    estimate_bytes: int
    available_bytes: int
    instances: int
    reason: str


def decide_coload(
    models: list[RepositoryModel], model_file_bytes: int, available_bytes: int | None = None
) -> CoLoad:
    """Co-load when the estimate fits in half the available memory; the reason either way.

    The estimate: per instance a backend stub plus ``MODEL_COPIES`` copies of the model file
    (a deliberate over-estimate)."""
    available = psutil.virtual_memory().available if available_bytes is None else available_bytes
    instances = sum(m.variant.instance_count for m in models)
    estimate = instances * (STUB_BYTES + MODEL_COPIES * model_file_bytes)
    fits = estimate <= int(COLOAD_SHARE_OF_AVAILABLE * available)
    mib = 2**20
    if len(models) < 2:
        reason = "one configuration: nothing to co-load"
    elif fits:
        reason = (
            f"{len(models)} configurations ({instances} instances) co-loaded: estimated "
            f"{estimate / mib:,.0f} MiB ({instances} x ({STUB_BYTES / mib:.0f} MiB stub + "
            f"{MODEL_COPIES} x {model_file_bytes / mib:,.1f} MiB model)), within half of the "
            f"{available / mib:,.0f} MiB available"
        )
    else:
        reason = (
            f"one configuration loaded at a time: co-loading {len(models)} configurations "
            f"({instances} instances) was estimated at {estimate / mib:,.0f} MiB, over half of "
            f"the {available / mib:,.0f} MiB available"
        )
    return CoLoad(len(models) >= 2 and fits, estimate, available, instances, reason)


def run_seed(fingerprint: str) -> str:
    """A fresh run's seed: the plan's fingerprint and 32 random bits."""
    return f"{fingerprint}-{secrets.token_hex(4)}"


def block_order(cells: list[Any], seed: str, block: int) -> list[Any]:
    """``cells`` shuffled for ``block`` (reproducible from the seed and the block number)."""
    shuffled = list(cells)
    random.Random(f"{seed}:{block}").shuffle(shuffled)
    return shuffled


def window_ms_for(throughput_infer_per_s: float, batch_size: int, max_window_ms: int) -> int:
    """The shortest window (from MIN_WINDOW_MS, in 50 ms steps) that holds REQUESTS_PER_WINDOW
    requests at the warm-up's throughput, capped at the plan's window."""
    requests_per_s = throughput_infer_per_s / max(1, batch_size)
    if requests_per_s <= 0:
        return max_window_ms
    stepped = 50 * math.ceil(1000.0 * REQUESTS_PER_WINDOW / requests_per_s / 50)
    return int(min(max_window_ms, max(MIN_WINDOW_MS, stepped)))


def cell_measurement(plan: ExperimentPlan, window_ms: int) -> MeasurementSettings:
    """A block cell's perf_analyzer settings: WINDOWS_PER_CELL windows of ``window_ms``."""
    return replace(
        plan.measurement,
        measurement_interval_ms=window_ms,
        stability_percentage=ANY_STABILITY_PCT,
        max_trials=WINDOWS_PER_CELL,
        retries_when_unstable=0,
    )


@dataclass(frozen=True)
class Reload(Record):
    """One reload of the co-loaded configurations (``seconds``: with the warm-ups after it)."""

    before_block: int
    load_order: tuple[str, ...]
    seconds: float = 0.0


@dataclass
class EngineRecord(Record):
    """``results/engine.json``: what the block engine decided (kept across resumes), with the
    engine's fixed constants (windows, requests) beside it."""

    DERIVED = ("windows_per_cell", "min_window_ms", "requests_per_window")

    engine: str
    seed: str
    coload: CoLoad | None = None
    windows_ms: dict[str, int] = field(default_factory=dict)
    warmup_infer_per_s: dict[str, dict[str, float]] = field(default_factory=dict)
    cores: int = 0
    warmup_s: float = 0.0  # wall seconds of the co-loading and warm-up cells
    load_order: list[str] = field(default_factory=list)  # the configurations, as co-loaded
    reload_every_blocks: int = 0
    reloads: list[Reload] = field(default_factory=list)

    @property
    def windows_per_cell(self) -> int:
        """Windows each cell measures (``WINDOWS_PER_CELL``)."""
        return WINDOWS_PER_CELL

    @property
    def min_window_ms(self) -> int:
        """The shortest window (``MIN_WINDOW_MS``)."""
        return MIN_WINDOW_MS

    @property
    def requests_per_window(self) -> int:
        """Requests a window aims at (``REQUESTS_PER_WINDOW``)."""
        return REQUESTS_PER_WINDOW


def load_engine_record(run_dir: Path) -> EngineRecord | None:
    """The block engine's record of ``run_dir``, or None when there is none yet
    (``ResultFileError`` for a corrupt file or one from a newer tritonlab)."""
    data = read_result(RunLayout(run_dir).engine)
    return EngineRecord.from_dict(data) if isinstance(data, dict) and data else None


def save_engine_record(run_dir: Path, record: EngineRecord) -> None:
    """Write ``record`` to ``results/engine.json`` atomically, with its schema version."""
    write_result(RunLayout(run_dir).engine, record.to_dict())
