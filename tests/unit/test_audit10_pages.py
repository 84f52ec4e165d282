"""The tenth independent audit's page findings, each fixed in the code that writes the page:

1. an instance change whose figures are "not comparable" is never read as "no server figure
   moved" (only "no clear difference" verdicts say a figure did not move);
2. the trace example's SUMMARY.md carries a tune's trust wherever it quotes that tune;
3. it does not attribute a difference (queue or compute) between two rows it calls not
   comparable;
4. the Model Analyzer page says when two picks are compared at different loads (operating
   points, not configurations) and gives their verdict at the common load;
5. the demo precision summary carries each condition's trusted runs beside its targets met.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import ModuleType

import pytest
from script_module import load_script

from tritonlab.experiments.store import CellResult
from tritonlab.explanation.rule_support import RuleContext
from tritonlab.explanation.rules import instances_effect
from tritonlab.perf.records import FELL_BEHIND
from tritonlab.report.run_data import load_run
from tritonlab.stats.aggregate import VariantSummary

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "examples" / "simple_mlp_trace"
RESULTS = ROOT / "benchmarks" / "results"
UNMOVED = "no server figure moved clearly"


# --- 1. a "not comparable" verdict is not "did not move" --------------------------------------


def _with_two_instances(by_name: dict[str, VariantSummary], fell_behind: bool) -> VariantSummary:
    """The seed run's baseline configuration with 2 instances (its cells); with
    ``fell_behind``, perf_analyzer said in every repeat of the latter that it did not keep up,
    so its figures are not comparable with the baseline's."""
    base = by_name["baseline"]
    variant = dataclasses.replace(base.variant, name="baseline_x2", instance_count=2)

    def cell(c: CellResult) -> CellResult:
        perf = c.perf
        if fell_behind:
            warning = f"Perf Analyzer was {FELL_BEHIND} with the desired request rate."
            perf = dataclasses.replace(perf, warnings=[*perf.warnings, warning])
        return dataclasses.replace(c, variant=variant, perf=perf)

    return dataclasses.replace(base, variant=variant, cells=tuple(cell(c) for c in base.cells))


def _context(by_name: dict[str, VariantSummary], subject: VariantSummary) -> RuleContext:
    base = by_name["baseline"]
    return RuleContext(subject, base, base, 2, (*by_name.values(), subject))


def test_not_comparable_instance_figures_are_not_read_as_unmoved(
    by_name: dict[str, VariantSummary],
) -> None:
    subject = _with_two_instances(by_name, fell_behind=True)
    finding = instances_effect(_context(by_name, subject))
    assert finding is not None
    assert "throughput not comparable" in finding.text
    assert UNMOVED not in finding.text
    assert "was not what limited this load" not in finding.text
    assert "could not be compared" in finding.text


def test_no_clear_difference_still_reads_unmoved(by_name: dict[str, VariantSummary]) -> None:
    subject = _with_two_instances(by_name, fell_behind=False)
    finding = instances_effect(_context(by_name, subject))
    assert finding is not None
    assert "throughput no clear difference" in finding.text
    assert UNMOVED in finding.text


def test_the_compare_log_reads_no_not_comparable_row_as_unmoved() -> None:
    log = (TRACE / "compare" / "docs" / "experiment_log.md").read_text()
    for paragraph in log.split("\n"):
        if "instances: throughput not comparable" in paragraph:
            assert UNMOVED not in paragraph


# --- 2 and 3. the trace example's summary ------------------------------------------------------


def test_every_quote_of_a_doubtful_tune_carries_its_trust(trace_summary: str) -> None:
    caveat = load_run(TRACE / "tune_concurrency").trust.caveat()
    assert caveat, "the stored fixed-concurrency tune is not to be trusted (14 of 40 disturbed)"
    doubt = caveat.split(": ", 1)[1]  # '14 of 40 cells were stored disturbed (...)...'
    quotes = [
        line
        for line in trace_summary.splitlines()
        if "tune_concurrency/" in line or "the fixed-concurrency tune" in line
    ]
    assert len(quotes) == 2  # its pick and its race
    for line in quotes:
        assert "not to be trusted" in line and doubt in line, line


def test_a_quiet_tune_is_quoted_without_a_doubt(trace_summary: str) -> None:
    assert load_run(TRACE / "tune_trace").trust.trusted
    line = next(x for x in trace_summary.splitlines() if "tune_trace/" in x)
    assert "not to be trusted" not in line
    # trusted, with the one doubt a quiet run without an A/A control carries
    assert "Note: no A/A control was measured in this run" in line


def test_rows_not_comparable_are_not_attributed(trace_summary: str) -> None:
    trace_section = trace_summary.split("### Under the trace", 1)[1]
    for name in ("fixed_runner_up", "trace_runner_up"):
        line = next(x for x in trace_section.splitlines() if x.startswith(f"- `{name}`"))
        assert "the larger" not in line and "separated" not in line
        assert "not comparable" in line and "cannot be told" in line
    start = next(x for x in trace_section.splitlines() if x.startswith("- `start`"))
    assert "the larger is in" in start  # a comparable row is still read


def test_the_committed_summary_is_the_render(trace_summary: str) -> None:
    assert (TRACE / "SUMMARY.md").read_text() == trace_summary


# --- 4. picks at different loads -----------------------------------------------------------------


@pytest.fixture(scope="module")
def ma() -> tuple[ModuleType, dict]:
    module = load_script("benchmarks/vs_model_analyzer/compare.py")
    return module, json.loads((RESULTS / "vs_model_analyzer.json").read_text())


def test_picks_at_different_loads_say_so_with_the_common_load_verdict(
    ma: tuple[ModuleType, dict],
) -> None:
    module, data = ma
    page = module.markdown(data)
    line = next(
        x for x in page.splitlines() if x.startswith("- tune_thr's") and "ma_brute_thr" in x
    )
    assert "tune_thr's throughput at c128 relative to ma_brute_thr's at c16" in line
    assert "two operating points" in line and "not two configurations" in line
    assert "median p99 49.22 ms against 7.44 ms" in line
    assert "at the common load c16, tune_thr's configuration against ma_brute_thr's: lower" in line
    # one configuration at one load (the A/A pair) has nothing to add
    aa = next(x for x in page.splitlines() if x.startswith("- tune_p99's") and "brute" in x)
    assert "operating points" not in aa


def test_the_common_load_verdict_is_the_stored_rounds(ma: tuple[ModuleType, dict]) -> None:
    _, data = ma
    points = load_script("benchmarks/vs_model_analyzer/operating_points.py")
    load, verdict = points.common_load_verdict(data, "ma_brute_thr", "tune_thr")
    assert load == 16
    assert verdict.word.value == "lower"
    assert verdict.change_pct == pytest.approx(-15.4, abs=0.1)
    low, high = verdict.ci95_change_pct
    assert low == pytest.approx(-21.2, abs=0.1) and high == pytest.approx(-9.1, abs=0.1)


def test_the_targets_name_the_loads(ma: tuple[ModuleType, dict]) -> None:
    module, data = ma
    throughput = next(t for t in module.targets(data) if t.startswith("throughput:"))
    assert "at their own loads (c128 against c64)" in throughput
    assert "at the common load c16" in throughput
    assert (RESULTS / "vs_model_analyzer.md").read_text() == module.markdown(data)


# --- 5. the demo precision summary carries trust ------------------------------------------------


def test_the_demo_precision_summary_counts_trusted_runs() -> None:
    bench = load_script("benchmarks/demo_precision.py")
    report = json.loads((RESULTS / "demo_precision.json").read_text())
    table = bench.summary_table(report)
    assert "trusted runs" in table[0]
    loaded = next(x for x in table if x.startswith("| split, half a core of other work |"))
    assert "| 0 of 3 (" in loaded
    for figures in ("182 of 195", "142 of 150", "179 of 195"):
        assert f"{figures} cells were stored disturbed" in loaded
    quiet = next(x for x in table if x.startswith("| split, quiet |"))
    assert "| 3 of 3 | 3 of 3 |" in quiet
    assert (RESULTS / "demo_precision.md").read_text() == bench.render_md(report)


def test_a_run_without_a_trust_record_is_not_counted_trusted() -> None:
    bench = load_script("benchmarks/demo_precision.py")
    runs = [{"run": 1, "aa_control": []}, {"run": 2, "trust": None, "aa_control": []}]
    assert bench.trusted_runs(runs) == (
        "0 of 2 (run 1, its trust not stated; run 2, its trust not stated)"
    )
