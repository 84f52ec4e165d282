"""``tritonlab check`` on stored runs: the gate's outcomes, comparability, outputs, exit codes.

The stored-run cases use the committed example runs; the planted regression on the real server
is tests/integration/test_check_live.py.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritonlab.cli import app
from tritonlab.decisions.check import compare_stored
from tritonlab.decisions.gate import (
    EXIT_ERROR,
    EXIT_NOT_COMPARABLE,
    EXIT_PASS,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    Outcome,
    Thresholds,
    gate,
    more_rounds_to_decide,
)
from tritonlab.pipeline.check import LiveCheck, run_live_check
from tritonlab.report.check_outputs import json_text, junit_xml, markdown
from tritonlab.server.launch import ServerOptions
from tritonlab.stats.verdicts import HIGHER, LOWER, NO_CLEAR, NOT_COMPARABLE, Verdict

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MLP, RERUN, CNN = EXAMPLES / "simple_mlp", EXAMPLES / "simple_mlp_rerun", EXAMPLES / "tiny_cnn"
runner = CliRunner()


def _verdict(figure: str, low: float, high: float, pairs: int = 5) -> Verdict:
    word = HIGHER if low > 0 else LOWER if high < 0 else NO_CLEAR
    return Verdict(figure, word, (low + high) / 2, 100.0, 100.0, "test", low, high, pairs)


@pytest.mark.parametrize(
    ("figure", "low", "high", "outcome"),
    [
        ("throughput", -3.0, 4.0, Outcome.PASS),  # rules out a drop beyond 5%
        ("throughput", -20.0, -8.0, Outcome.REGRESSION),  # the whole interval below -5%
        ("throughput", -9.0, 1.0, Outcome.UNDECIDED),  # straddles -5%
        ("throughput", -4.0, -1.0, Outcome.PASS),  # clearly lower, but within the threshold
        ("latency_p99", -5.0, 9.0, Outcome.PASS),
        ("latency_p99", 12.0, 40.0, Outcome.REGRESSION),
        ("latency_p99", 2.0, 30.0, Outcome.UNDECIDED),
    ],
)
def test_the_gate_reads_the_interval_against_the_threshold(
    figure: str, low: float, high: float, outcome: Outcome
) -> None:
    result = gate("baseline", "grpc_b1_c8", _verdict(figure, low, high), Thresholds(5.0, 10.0))
    assert result.outcome is outcome
    assert (result.more_rounds is not None) == (outcome is Outcome.UNDECIDED)


def test_no_interval_is_undecided_and_other_loads_are_not_comparable() -> None:
    one = Verdict("throughput", NO_CLEAR, -30.0, 100.0, 70.0, "one repeat")
    assert gate("b", "k", one, Thresholds()).outcome is Outcome.UNDECIDED
    other = Verdict("throughput", NOT_COMPARABLE, None, 1.0, 1.0, "different offered loads")
    result = gate("b", "k", other, Thresholds())
    assert result.outcome is Outcome.NOT_COMPARABLE
    assert "different offered loads" in result.reason()


def test_more_rounds_grow_as_the_estimate_nears_the_threshold() -> None:
    far = more_rounds_to_decide(_verdict("throughput", -12.0, 2.0, pairs=4), -5.0)
    near = more_rounds_to_decide(_verdict("throughput", -11.0, 1.5, pairs=4), -5.0)
    assert far is not None and near is not None and near > far >= 1
    # an interval centred on the threshold cannot be expected to leave it
    low, high = 100 * (0.95 * 0.9 - 1), 100 * (0.95 / 0.9 - 1)  # centred on -5% in log units
    centred = Verdict("throughput", NO_CLEAR, -5.0, 1.0, 1.0, "t", low, high, 4)
    assert more_rounds_to_decide(centred, -5.0) is None


def test_two_stored_runs_of_the_same_model_pass_or_stay_undecided_with_reasons() -> None:
    report = compare_stored(RERUN, MLP, Thresholds(), set())
    assert report.not_comparable == []
    assert report.exit_status in (EXIT_PASS, EXIT_UNDECIDED)
    configs = {r.config for r in report.results}
    assert configs == {"baseline", "batch_5ms_x1", "batch_5ms_x2", "batch_0ms_x1"}
    assert {r.figure for r in report.results} == {"throughput", "latency_p99"}
    assert "unpaired" in report.rounds and "no round is shared" in report.rounds
    for r in report.results:
        assert r.verdict.pairs == 0  # two days share no round
        if r.outcome is Outcome.UNDECIDED:
            assert "straddles" in r.reason() or "no interval" in r.reason()
    # docs/ci_gate.md: some configuration's median throughput differs by more than 5% between
    # the two runs of the same model, and the gate at 5% cannot decide on them
    drops = [r.verdict for r in report.results if r.figure == "throughput"]
    assert max(abs(v.variant_median / v.reference_median - 1) for v in drops) > 0.05  # type: ignore[operator]
    assert report.exit_status == EXIT_UNDECIDED
    # wide enough thresholds decide every figure: the two runs agree within +-80%
    wide = compare_stored(RERUN, MLP, Thresholds(80.0, 80.0), set())
    assert wide.exit_status == EXIT_PASS


def test_two_different_models_are_not_comparable_and_say_why() -> None:
    report = compare_stored(CNN, MLP, Thresholds(), set())
    assert report.exit_status == EXIT_NOT_COMPARABLE
    text = " ".join(report.not_comparable)
    assert "model sha256" in text and "model inputs" in text


def _copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src / "results", dst / "results")
    (dst / ".tritonlab").write_text("{}\n")
    return dst


def test_a_software_difference_stops_the_gate_unless_it_is_the_declared_change(
    tmp_path: Path,
) -> None:
    new = _copy_run(RERUN, tmp_path / "new")
    manifest = json.loads((new / "results/manifest.json").read_text())
    manifest["server"]["version"] = "2.52.0"
    (new / "results/manifest.json").write_text(json.dumps(manifest))
    report = compare_stored(new, MLP, Thresholds(), set())
    assert report.exit_status == EXIT_NOT_COMPARABLE
    assert any(
        "tritonserver: 2.51.0 (baseline) vs 2.52.0 (new)" in r for r in report.not_comparable
    )
    declared = compare_stored(new, MLP, Thresholds(), {"software"})
    assert declared.not_comparable == []
    assert any("--expect-change software" in n for n in declared.notes)


def test_a_stored_run_with_a_clear_drop_is_a_regression(tmp_path: Path) -> None:
    """The rerun's cells with every throughput halved: the gate's stored path finds it."""
    new = _copy_run(RERUN, tmp_path / "new")
    for path in (new / "results/cells").glob("*.json"):
        cell = json.loads(path.read_text())
        cell["perf"]["measurement"]["throughput_infer_per_s"] /= 2.0
        path.write_text(json.dumps(cell))
    report = compare_stored(new, MLP, Thresholds(), set())
    assert report.exit_status == EXIT_REGRESSION
    drops = [r for r in report.results if r.figure == "throughput"]
    assert all(r.outcome is Outcome.REGRESSION for r in drops)
    tree = ET.fromstring(junit_xml(report).split("?>", 1)[1])
    assert tree.get("failures") == str(len(drops))
    assert len(tree.findall("testcase")) == len(report.results)
    assert "**REGRESSION**" in markdown(report)
    stored = json.loads(json_text(report))
    assert stored["exit_status"] == EXIT_REGRESSION
    assert [r["outcome"] for r in stored["results"]].count("regression") == len(drops)


def test_cli_exit_codes_and_outputs(tmp_path: Path) -> None:
    junit, data = tmp_path / "out" / "check.xml", tmp_path / "check.json"
    result = runner.invoke(
        app,
        ["check", str(RERUN), "--against", str(MLP), "--junit", str(junit), "--json", str(data)],
    )
    assert result.exit_code in (EXIT_PASS, EXIT_UNDECIDED), result.output
    assert json.loads(data.read_text())["exit_status"] == result.exit_code
    assert ET.parse(junit).getroot().tag == "testsuite"
    different = runner.invoke(app, ["check", str(CNN), "--against", str(MLP)])
    assert different.exit_code == EXIT_NOT_COMPARABLE
    for bad in (
        ["check", str(RERUN)],  # no --against
        ["check", str(RERUN), "--against", str(MLP), "--max-regression", "five"],
        ["check", str(RERUN), "--against", str(MLP), "--max-regression", "0%"],
        ["check", str(RERUN), "--against", str(MLP), "--expect-change", "weather"],
        ["check", str(tmp_path), "--against", str(MLP)],  # not a run folder
    ):
        result = runner.invoke(app, bad)
        assert result.exit_code == EXIT_ERROR, (bad, result.output)  # could not check
        assert "error:" in result.output


def test_a_live_check_of_a_model_with_other_inputs_stops_before_any_server(
    tmp_path: Path,
) -> None:
    report = run_live_check(
        LiveCheck(MLP, tmp_path / "check"),
        Thresholds(),
        ServerOptions(),
        new_onnx=CNN / "tiny_cnn.onnx",
    )
    assert report.exit_status == EXIT_NOT_COMPARABLE
    assert "model inputs" in report.not_comparable[0]
    assert not (tmp_path / "check").exists()  # refused before anything was written or served
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx file")
    result = runner.invoke(
        app, ["check", str(broken), "--against", str(MLP), "--out", str(tmp_path / "c2")]
    )
    assert result.exit_code == EXIT_ERROR and "error:" in result.output, result.output
    assert not (tmp_path / "c2").exists()  # refused before anything was written


def _digest(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_out_may_not_be_the_baseline_or_another_run_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    baseline = tmp_path / "baseline"
    shutil.copytree(MLP, baseline)
    other = tmp_path / "other"
    shutil.copytree(RERUN, other)
    (other / ".tritonlab").write_text("{}\n")
    before = _digest(baseline), _digest(other)
    onnx = str(baseline / "simple_mlp.onnx")
    # (--fresh on another run of ours sets it aside, as asked: not a case here)
    cases = [
        (out, f) for out in (baseline, baseline / "check", tmp_path) for f in ([], ["--fresh"])
    ]
    for out, fresh in [*cases, (other, [])]:
        result = runner.invoke(
            app, ["check", onnx, "--against", str(baseline), "--out", str(out), *fresh]
        )
        assert result.exit_code == EXIT_ERROR, (out, fresh, result.output)
        assert (_digest(baseline), _digest(other)) == before, (out, fresh)
    assert (
        "only read"
        in runner.invoke(
            app, ["check", onnx, "--against", str(baseline), "--out", str(baseline)]
        ).output
    )


def test_a_new_side_that_did_not_carry_the_load_is_a_regression_first(tmp_path: Path) -> None:
    """perf_analyzer fell behind on the new side only: the new side could not serve what the
    baseline served, a regression that outranks a figure not comparable elsewhere."""
    new = _copy_run(RERUN, tmp_path / "new")
    for path in (new / "results/cells").glob("baseline__*.json"):
        cell = json.loads(path.read_text())
        cell["perf"]["warnings"] = ["Perf Analyzer was not able to keep up with the desired rate"]
        path.write_text(json.dumps(cell))
    report = compare_stored(new, MLP, Thresholds(80.0, 80.0), set())
    behind = [r for r in report.results if r.config == "baseline"]
    assert {r.outcome for r in behind} == {Outcome.REGRESSION}
    assert all("did not carry the offered load" in r.reason() for r in behind)
    assert report.exit_status == EXIT_REGRESSION


def test_two_sides_alternate_who_goes_first_every_other_round(tmp_path: Path) -> None:
    from tritonlab.experiments.plan import LoadPoint
    from tritonlab.experiments.runner import planned_rounds
    from tritonlab.repository.layout import RepositoryModel
    from tritonlab.repository.variants import ServingVariant

    new, old = (
        RepositoryModel(name, ServingVariant(name, name), tmp_path / name)
        for name in ("candidate", "baseline")
    )
    loads = [LoadPoint()]
    rounds = planned_rounds(4, [new, old], lambda m: loads, set(), alternate=True)
    orders = [[m.variant.name for m, _ in r] for r in rounds]
    assert orders == [["candidate", "baseline"], ["baseline", "candidate"]] * 2
    plain = planned_rounds(2, [new, old], lambda m: loads, set())
    assert [[m.variant.name for m, _ in r] for r in plain] == [["candidate", "baseline"]] * 2


def test_the_command_exits_with_the_gates_could_not_check_status() -> None:
    from tritonlab.cli.check_cmd import COULD_NOT_CHECK

    assert COULD_NOT_CHECK == EXIT_ERROR
