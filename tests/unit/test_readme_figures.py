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


def test_model_analyzer_figures_are_the_benchmark_files() -> None:
    """README and vs_model_analyzer.md hold what vs_model_analyzer.json renders to
    (`python benchmarks/vs_model_analyzer/compare.py --render` rewrites both)."""
    spec = importlib.util.spec_from_file_location(
        "compare", ROOT / "benchmarks" / "vs_model_analyzer" / "compare.py"
    )
    assert spec is not None and spec.loader is not None
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    data = json.loads((RESULTS / "vs_model_analyzer.json").read_text())
    assert data["targets"] == compare.targets(data)
    assert compare.readme_block(data) in (ROOT / "README.md").read_text()
    assert (RESULTS / "vs_model_analyzer.md").read_text() == compare.markdown(data)


def test_the_aa_benchmark_page_is_its_file() -> None:
    """aa_floor.md is what aa_floor.json renders to, and the docs' reading of it holds."""
    aa = _bench("aa_floor")
    report = json.loads((RESULTS / "aa_floor.json").read_text())
    assert (RESULTS / "aa_floor.md").read_text() == aa.render_md(report)
    assert "/work/" not in (RESULTS / "aa_floor.json").read_text()
    # docs/measuring.md: reloads "told identical configurations apart no less often"
    told_apart = {
        mode: s["throughput"]["excluding_zero"] / s["throughput"]["intervals"]
        for mode, s in report["summary"].items()
    }
    with_reloads = [v for m, v in told_apart.items() if m.startswith("reloads")]
    without = [v for m, v in told_apart.items() if m == "no reloads"]
    assert with_reloads and without and min(with_reloads) >= max(without)


def test_the_demo_control_reads_a_difference_more_often_than_the_copies() -> None:
    """docs/measuring.md: the demo's control has read "higher" or "lower" more often than the
    copies of the A/A benchmark; checked against both files."""
    demo = json.loads((RESULTS / "resolution.json").read_text())
    controls = [
        f["throughput"]["word"]
        for r in demo["runs"]
        if r["model"] == "simple_mlp"
        for f in r["aa_control"]
    ]
    aa = json.loads((RESULTS / "aa_floor.json").read_text())
    copies = [p["throughput"]["excludes_zero"] for r in aa["runs"] for p in r["pairs"]]
    demo_share = sum(w in ("higher", "lower") for w in controls) / len(controls)
    assert demo_share > sum(copies) / len(copies)
