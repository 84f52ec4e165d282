"""Unit-tier fixtures: the recorded seed run, loaded and summarised (read-only, shared)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.script_module import load_script
from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.store import CellResult, load_cells
from tritonlab.stats.aggregate import VariantSummary, summarise


@pytest.fixture(scope="session")
def seed_manifest(seed_run_dir: Path) -> Manifest:
    return Manifest.from_dict(json.loads((seed_run_dir / "results" / "manifest.json").read_text()))


@pytest.fixture(scope="session")
def plan_order(seed_manifest: Manifest) -> list[str]:
    """Variant names in the recorded plan's order (baseline first)."""
    return seed_manifest.variant_order


@pytest.fixture(scope="session")
def seed_cells(seed_run_dir: Path) -> list[CellResult]:
    cells = load_cells(seed_run_dir)
    assert len(cells) == 12, "the recorded seed run has 4 variants x 3 repeats"
    return cells


@pytest.fixture(scope="session")
def seed_summaries(seed_cells: list[CellResult], plan_order: list[str]) -> list[VariantSummary]:
    return summarise(seed_cells, plan_order)


@pytest.fixture(scope="session")
def by_name(seed_summaries: list[VariantSummary]) -> dict[str, VariantSummary]:
    """The recorded summaries by variant name: baseline, batch_5ms_x1, batch_5ms_x2, ..."""
    return {s.variant.name: s for s in seed_summaries}


@pytest.fixture(scope="module")
def trace_script() -> ModuleType:
    """``scripts/trace_example.py`` as a module."""
    return load_script("scripts/trace_example.py")


@pytest.fixture(scope="module")
def trace_summary(trace_script: ModuleType) -> str:
    """The trace example's SUMMARY.md as ``scripts/trace_example.py`` renders it now."""
    root = Path(__file__).resolve().parents[2]
    return str(trace_script.render(root / "examples" / "simple_mlp_trace"))
