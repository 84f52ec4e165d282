"""The README's measured figures come from the committed benchmark results, by code."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def _bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_resolution_figures_are_the_benchmark_files() -> None:
    """README and resolution.md hold exactly what resolution.json renders to
    (`python benchmarks/resolution.py --readme` rewrites both)."""
    resolution = _bench("resolution")
    report = json.loads((RESULTS / "resolution.json").read_text())
    assert resolution.readme_block(report) in (ROOT / "README.md").read_text()
    assert (RESULTS / "resolution.md").read_text() == resolution.render_md(report) + "\n"
    assert "/work/" not in (RESULTS / "resolution.json").read_text()  # no machine paths
