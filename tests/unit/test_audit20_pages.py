"""Two statements of generated pages an audit found misleading, now said by the code that writes
them: the replayed-traffic example's SUMMARY.md quotes perf_analyzer's warnings in a tune pick's
repeats, and the calibration page says where a process-term estimate was floored at zero."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType

import pytest
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "simple_mlp_trace"
RESULTS = ROOT / "benchmarks" / "results"
LATE = (
    "Perf Analyzer was not able to keep up with the desired request rate. "
    "{}% of the requests were delayed."
)
UNSTABLE = "Request latency is not stabilizing. Please try lowering the request rate."


@pytest.fixture(autouse=True)
def _beside_the_benchmarks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # bench_common, as the script has it


def _trace_example() -> ModuleType:
    return load_script("scripts/trace_example.py")


# 1. a tune pick's quote carries perf_analyzer's warnings in its repeats


def test_a_pick_quote_says_in_how_many_repeats_perf_analyzer_warned_and_what() -> None:
    quote = _trace_example().warnings_quote(
        [[LATE.format("1.21")], [], [LATE.format("2.17"), UNSTABLE], [LATE.format("1.05")]], True
    )
    assert quote == (
        "perf_analyzer warned in 3 of its 4 repeats: it sent up to 2.17% of the requests late, "
        "within the 5% a configuration may send late and still carry the trace; "
        '"Request latency is not stabilizing. Please try lowering the request rate" '
        "(in 1 of them)"
    )


def test_a_late_share_over_the_limit_and_quiet_repeats() -> None:
    script = _trace_example()
    assert script.warnings_quote([[], []], True) == ""
    over = script.warnings_quote([[LATE.format("6.5")], []], True)
    assert "up to 6.5% of the requests late, more than the 5%" in over
    closed = script.warnings_quote([[LATE.format("1.5")]], False)  # not under a trace
    assert (
        closed
        == "perf_analyzer warned in 1 of its 1 repeats: it sent up to 1.5% of the requests late"
    )


def test_the_summary_quotes_each_tunes_pick_with_its_stored_warnings() -> None:
    from tritonlab.decisions.tune_record import TunePick
    from tritonlab.perf.trace import delayed_pct
    from tritonlab.report.run_data import load_run

    summary = (EXAMPLE / "SUMMARY.md").read_text()
    for tune in ("tune_concurrency", "tune_trace"):
        pick = TunePick.from_dict(
            json.loads((EXAMPLE / tune / "results/tune.json").read_text())["pick"]
        )
        cells = [c for c in load_run(EXAMPLE / tune).cells if c.variant.name == pick.variant]
        if pick.load is None:
            cells = [c for c in cells if c.perf.settings.concurrency == pick.concurrency]
        assert len(cells) == pick.repeats
        warned = [c for c in cells if c.perf.warnings]
        line = next(x for x in summary.splitlines() if f"[`{tune}/`]" in x)
        if not warned:
            assert "perf_analyzer warned" not in line
            continue
        late = max(delayed_pct(list(c.perf.warnings)) for c in warned)
        assert f"perf_analyzer warned in {len(warned)} of its {len(cells)} repeats" in line
        assert f"up to {late:g}% of the requests late" in line


# 2. the calibration page says where the re-estimated process term was floored at zero


def test_the_term_parts_say_where_the_estimate_was_floored() -> None:
    from tritonlab.stats.process_term import estimate_sd_log

    bench = load_script("benchmarks/calibration_report.py")
    apart = [[0.1, 0.12, 0.11], [-0.1, -0.09, -0.11]]  # means far from 0: offsets show
    parts = bench.term_parts(apart)
    assert not parts["floored"]
    assert math.isclose(
        math.sqrt((parts["mean_square_log"] - parts["within_blocks_log"]) / 2),
        estimate_sd_log(apart),
    )
    noise = [[0.1, -0.1], [-0.2, 0.2]]  # means 0, blocks noisy: not separable from the noise
    floored = bench.term_parts(noise)
    assert floored["floored"] and floored["mean_square_log"] < floored["within_blocks_log"]
    assert estimate_sd_log(noise) == 0.0


def test_the_page_says_a_floored_term_in_words_with_its_parts() -> None:
    page = load_script("benchmarks/calibration_page.py")
    report = {
        "process_term_parts": {
            "throughput": {"mean_square_log": 0.2, "within_blocks_log": 0.1, "floored": False},
            "latency_p99": {
                "mean_square_log": 0.0012341,
                "within_blocks_log": 0.0012349,
                "floored": True,
            },
        }
    }
    assert page._floored(report, "throughput", "throughput") == ""
    assert page._floored({}, "latency_p99", "p99") == ""  # a report from before the parts
    assert page._floored(report, "latency_p99", "p99") == (
        " (floored at zero: the mean square of the A/A estimates' log-ratios, 0.001234, is "
        "smaller than what the blocks' own noise gives, 0.001235 (mean squares in log units, "
        "not spreads in %), so per-process offsets cannot be told from p99's noise)"
    )


def test_the_committed_calibration_page_says_which_estimate_was_floored() -> None:
    bench = load_script("benchmarks/calibration_report.py")
    stored = json.loads((RESULTS / "calibration.json").read_text())
    recomputed = json.loads(json.dumps(bench.build_report(ROOT / stored["raw"])))
    assert stored["process_term_parts"] == recomputed["process_term_parts"]
    line = next(
        x for x in (RESULTS / "calibration.md").read_text().splitlines() if "Estimated again" in x
    )
    for figure, words in (("throughput", "throughput"), ("latency_p99", "p99")):
        floored = stored["process_term_parts"][figure]["floored"]
        assert (f"cannot be told from {words}'s noise" in line) == floored
