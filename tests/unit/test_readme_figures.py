"""The README's measured figures come from the committed benchmark results, by code."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

from script_module import load_script

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def _bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_resolution_figures_are_the_benchmark_files() -> None:
    """docs/results.md and resolution.md hold exactly what resolution.json renders to
    (`python benchmarks/resolution.py --readme` rewrites both)."""
    resolution = _bench("resolution")
    report = json.loads((RESULTS / "resolution.json").read_text())
    block = load_script("scripts/results_benchmarks.py")._from_docs(resolution.readme_block(report))
    assert block in (ROOT / "docs" / "results.md").read_text()
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
    assert (
        load_script("scripts/results_benchmarks.py")._from_docs(compare.readme_block(data))
        in (ROOT / "docs" / "results.md").read_text()
    )
    assert (RESULTS / "vs_model_analyzer.md").read_text() == compare.markdown(data)


def test_the_demo_precision_page_is_its_file() -> None:
    """demo_precision.md is what demo_precision.json renders to; a missed run says why."""
    path = RESULTS / "demo_precision.json"
    if not path.exists():
        return
    bench = _bench("demo_precision")
    report = json.loads(path.read_text())
    assert (RESULTS / "demo_precision.md").read_text() == bench.render_md(report)
    assert "/work/" not in path.read_text()
    for run in report["runs"]:
        assert bool(bench.missed(run)) != run["summary"]["met_target"]


def test_the_aa_benchmark_page_is_its_file() -> None:
    """aa_floor.md is what aa_floor.json renders to, and the docs' reading of it holds."""
    aa = _bench("aa_floor")
    report = json.loads((RESULTS / "aa_floor.json").read_text())
    assert (RESULTS / "aa_floor.md").read_text() == aa.render_md(report)
    assert "/work/" not in (RESULTS / "aa_floor.json").read_text()
    # docs/measuring.md: reloads told identical configurations apart "about as often as runs
    # without (a false alarm or none on each side ...)", both figures counted (issue 36: the
    # earlier "no less often" read throughput alone, where p99 had 0 against 1)
    told_apart = {
        mode: sum(s[f]["excluding_zero"] for f in ("throughput", "latency_p99"))
        for mode, s in report["summary"].items()
    }
    assert set(told_apart) == {"reloads", "no reloads"}
    assert all(count <= 1 for count in told_apart.values())


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


def _pages() -> ModuleType:
    return load_script("scripts/results_pages.py")


def test_the_readme_and_results_page_are_generated_from_the_examples() -> None:
    """The README's key results and docs/results.md are what scripts/results_pages.py renders
    from the committed examples and benchmark files (run it to update them)."""
    pages = _pages()
    assert (ROOT / "docs" / "results.md").read_text() == pages.render_results_page()
    assert pages.readme_block() in (ROOT / "README.md").read_text()
    assert pages.pipeline_block() in (ROOT / "README.md").read_text()


# A figure with a unit, outside code and outside generated blocks: what a hand-typed
# measurement looks like.
FIGURE = re.compile(
    r"(?<![\w.])[+\-−]?\d[\d,.]*\s?(infer/s|req/s|µs|ms\b|s\b|GB/s|GFLOP/s|FLOP/byte|%|x\b"
    r"|MB\b|KB\b|cores?\b)"
)
# The settings, thresholds and limits each page may state (not measurements): a new figure
# here must be a setting, or come from a generated block.
SETTINGS = {
    "README.md": {"150 s", "25%", "250 s", "3%", "32 MB", "5%", "95%"},
    "docs/backends.md": {"0.3 s", "1%", "25%", "5%"},
    "docs/development.md": set(),
    "docs/measuring.md": {
        "0.25 cores", "15%", "150 s", "2 cores", "200 ms", "250 s", "3%", "300 ms", "5%", "50 ms",
        "95%", "97%",
    },
    "docs/models.md": {"0 ms", "1 ms", "2 cores", "3 s", "5 ms"},
    "docs/reliability.md": {"1 s", "10 s", "2 x", "30 s", "32 MB", "60 s"},
    "docs/repositories.md": {"0 µs", "5 ms", "100 µs"},
    "docs/ci_gate.md": {"+10%", "-5%", "5%", "95%"},
    "docs/scaling.md": {"1 ms", "2 x", "30 s", "5%", "95%"},
    "docs/sweeps.md": {"10%", "120 s", "150 s", "200 ms", "3%", "5 ms", "5%", "50%", "90%", "95%"},
    "docs/tune.md": {"1 ms", "1 x", "10%", "2 cores", "2 s", "2 x", "20%", "5%", "900 s", "95%"},
}  # fmt: skip


def hand_typed_figures(text: str) -> list[tuple[int, str]]:
    """(line, figure) for every figure with a unit outside code spans, fenced code and the
    generated blocks (between ``<!-- ...generated... -->`` and ``<!-- ...end -->``)."""
    found: list[tuple[int, str]] = []
    fenced = generated = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("<!--") and "generated" in line:
            generated = True
        elif line.startswith("<!--") and line.rstrip().endswith("end -->"):
            generated = False
        elif not (fenced or generated):
            prose = re.sub(r"`[^`]*`", "", line)
            found += [(number, m.group(0)) for m in FIGURE.finditer(prose)]
    return found


def test_no_measured_figure_is_typed_by_hand_in_the_readme_or_docs() -> None:
    """Every figure with a unit in the README and docs/ (but the generated results page) is a
    setting listed above, or sits in a generated block."""
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    assert set(SETTINGS) == {"README.md", *pages} - {"docs/results.md"}
    typed = [
        f"{page}:{line}: {figure!r}"
        for page, allowed in SETTINGS.items()
        for line, figure in hand_typed_figures((ROOT / page).read_text())
        if figure not in allowed
    ]
    assert typed == [], "quote these from a generated block or the example's log: " + str(typed)


def test_the_figure_check_finds_a_typed_measurement() -> None:
    text = "Batching gave 5,457 infer/s at `--window-ms 2000`.\n```\n12 ms\n```\n"
    assert hand_typed_figures(text) == [(1, "5,457 infer/s")]
    assert hand_typed_figures("<!-- x: generated by y -->\n3 µs\n<!-- x: end -->\n") == []


def test_one_run_is_not_said_to_agree_with_itself() -> None:
    """Issue 36 (minor): "same word every run: yes" was written for a single run."""
    resolution = _bench("resolution")
    assert resolution.same_word_text({"runs": 1, "same_word_every_run": True}) == "n/a (one run)"
    assert resolution.same_word_text({"runs": 3, "same_word_every_run": True}) == "yes"
    assert resolution.same_word_text({"runs": 3, "same_word_every_run": False}) == "no"
