"""The README's measured figures come from the committed benchmark results, by code."""

from __future__ import annotations

import importlib.util
import json
import statistics
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


def test_the_resolution_prose_follows_the_figures() -> None:
    """The README's sentences about the benchmark, checked against the same file."""
    report = json.loads((RESULTS / "resolution.json").read_text())
    text = (ROOT / "README.md").read_text()
    runs = [r for r in report["runs"] if r["model"] == "simple_mlp"]

    def widths(engine: str) -> list[float]:
        return [
            v["half_width_pct"]
            for r in runs
            if r["engine"] == engine
            for v in r["verdicts"]
            if v["figure"] == "throughput"
        ]

    assert "both the median and the widest throughput interval of the\ndemo came out" in text
    assert max(widths("blocks")) < max(widths("classic"))
    assert statistics.median(widths("blocks")) < statistics.median(widths("classic"))
    assert "each configuration got the same word in every run" in text
    assert report["summary"]["simple_mlp/blocks"]["same_word_every_run"]
    controls = [f["throughput"] for r in runs for f in r["aa_control"]]
    assert 'in one demo run it read "lower"' in text
    assert [c["word"] for c in controls].count("lower") == 1
    assert not [c for c in controls if c["word"] == "higher"]
    assert "Every control read below zero" in text
    every = [f["throughput"] for r in report["runs"] for f in r["aa_control"]]
    assert all(c["change_pct"] < 0 for c in every)


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


def test_the_model_analyzer_prose_follows_the_figures() -> None:
    data = json.loads((RESULTS / "vs_model_analyzer.json").read_text())
    text = (ROOT / "README.md").read_text()
    assert "its picks were clearly below the best Model Analyzer pick for both" in text
    assert all("paired over the re-measured rounds: lower" in t for t in data["targets"])
    assert "the time target is met and the pick target is\nmissed" in text
    assert all("target <= 0.5 met" in t and "-5% missed" in t for t in data["targets"])


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
