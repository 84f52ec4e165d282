"""Models users bring, served and measured on the real server: token ids with several int64
inputs and a dynamic sequence axis, no batch axis, FP16, several outputs, mixed dtypes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx_factory as factory
import pytest
from integration_support import FAST_RUN_FLAGS, StartServer, run_cli

from tritonlab.result_files import read_result

pytestmark = pytest.mark.integration


def _cells(out_dir: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((out_dir / "results/cells").glob("*.json"))]


@pytest.mark.timeout(360)
def test_token_id_model_with_three_int64_inputs(start_server: StartServer, tmp_path: Path) -> None:
    model = factory.token_classifier(tmp_path / "tokens.onnx")
    out_dir = tmp_path / "tokens"
    result = run_cli(
        [
            "run",
            str(model),
            "--out",
            str(out_dir),
            "--shape",
            "input_ids:32",
            "--configs",
            "seed",
            *FAST_RUN_FLAGS,
        ],
        tmp_path,
        300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "measured 5 cells, reused 0" in result.stdout  # 4 and the A/A control

    # perf_analyzer sent the derived data: valid ids, ones for the mask, the sequence set.
    data = json.loads((out_dir / "inputs" / "perf_data.json").read_text())["data"]
    assert {e["input_ids"]["shape"][0] for e in data} == {32}
    for cell in _cells(out_dir):
        command = cell["perf"]["command"]  # type: ignore[index]
        assert command[command.index("--input-data") + 1] == "inputs/perf_data.json"
        assert "input_ids:32" in command and "attention_mask:32" in command
        assert cell["perf"]["stable"] or cell["perf"]["measurement"]  # type: ignore[index]
        assert cell["server"]["request_count"] > 0  # type: ignore[index]

    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert "`input_ids` INT64 [batch, 32]: ints in [0, 1000)" in log
    assert "`attention_mask` INT64 [batch, 32]: all ones" in log
    assert "`token_type_ids` INT64 [batch, 32]: all zeros" in log
    assert "sequence = 32" in log
    check = read_result(out_dir / "results" / "infer_check.json")
    assert check[0]["input_shapes"]["input_ids"] == [2, 32]
    operators = json.loads((out_dir / "results" / "operators.json").read_text())
    assert operators["in_process_ceilings"], "the in-process ceiling was measured"
    assert "## Serving efficiency" in log

    # The project's own client sends the samples perf_analyzer sent (valid ids) and checks them.
    server = start_server(out_dir / "models", explicit_model_control=True)
    server.load_model("tokens")
    client = subprocess.run(
        [sys.executable, "client/infer_client.py", "--url", server.grpc_url, "--model", "tokens"],
        cwd=out_dir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert client.returncode == 0, client.stdout + client.stderr
    assert "OK" in client.stdout and "output logits: shape [2, 4]" in client.stdout


@pytest.mark.timeout(300)
def test_model_without_a_batch_axis(tmp_path: Path) -> None:
    model = factory.no_batch_axis(tmp_path / "fixed.onnx")
    out_dir = tmp_path / "fixed"
    result = run_cli(["run", str(model), "--out", str(out_dir), *FAST_RUN_FLAGS], tmp_path, 240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "measured 3 cells, reused 0" in result.stdout  # 2 and the A/A control
    assert "cannot batch" in result.stderr
    config = (out_dir / "models" / "fixed" / "config.pbtxt").read_text()
    assert "max_batch_size" not in config  # 0, protobuf's default, is not written
    assert "dynamic_batching" not in config
    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert "no batch axis" in log and "`x` FP32 [3, 8]: standard normal" in log
    assert "count=2" in log, "instance counts are still compared"


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("builder", "outputs", "sent"),
    [
        # one run covers FP16 in and out, an INT64 and an FP32 output, and several outputs
        (
            factory.fp16_multi_output,
            ["y", "argmax", "norm"],
            "`x` FP16 [batch, 32]: standard normal",
        ),
    ],
)
def test_run_on_dtypes_and_several_outputs(
    tmp_path: Path, builder: Callable[[Path], Path], outputs: list[str], sent: str
) -> None:
    model = builder(tmp_path / "m.onnx")
    out_dir = tmp_path / "project"
    result = run_cli(
        ["run", str(model), "--out", str(out_dir), "--configs", "seed", *FAST_RUN_FLAGS],
        tmp_path,
        260,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "measured 5 cells, reused 0" in result.stdout  # 4 and the A/A control
    check = read_result(out_dir / "results" / "infer_check.json")
    for protocol in check:
        assert sorted(protocol["output_shapes"]) == sorted(outputs)
    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert sent in log
    for cell in _cells(out_dir):
        assert cell["server"]["request_count"] > 0  # type: ignore[index]


@pytest.mark.timeout(120)
def test_infer_on_mixed_dtypes(tmp_path: Path) -> None:
    model = factory.mixed_dtypes(tmp_path / "mixed.onnx")
    result = run_cli(["infer", str(model), "--protocol", "both"], tmp_path, 100)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "`count` INT32 [batch, 4]: ints in [0, 8)" in result.stdout
    assert "`flag` BOOL [batch, 4]: random true/false" in result.stdout
    assert result.stdout.count("max abs diff vs onnxruntime 0 ") == 2, result.stdout


@pytest.mark.timeout(120)
def test_a_scalar_input_and_output_without_batching_are_served(tmp_path: Path) -> None:
    """A rank-0 input and output in a model without a batch axis: declared [1] (Triton 2.51
    refuses the empty reshape there), handed to onnxruntime as rank 0 by the adapter, and the
    answers equal onnxruntime's over both protocols."""
    model = factory.scalar_control(tmp_path / "scalar.onnx")
    result = run_cli(["infer", str(model), "--protocol", "both"], tmp_path, 100)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "`sr` INT64 []: ints in [0, 8)" in result.stdout
    assert result.stdout.count("max abs diff vs onnxruntime") == 2, result.stdout


@pytest.mark.timeout(200)
def test_user_samples_are_sent_and_bad_ones_refused(tmp_path: Path) -> None:
    model = factory.token_classifier(tmp_path / "tokens.onnx")
    ids = np.arange(2 * 12, dtype=np.int64).reshape(2, 12)
    np.savez(
        tmp_path / "samples.npz",
        input_ids=ids,
        attention_mask=np.ones_like(ids),
        token_type_ids=np.zeros_like(ids),
    )
    good = run_cli(
        ["infer", str(model), "--input-data", str(tmp_path / "samples.npz")], tmp_path, 150
    )
    assert good.returncode == 0, good.stdout + good.stderr
    assert "the user's samples (min 0, max 23)" in good.stdout
    assert "'input_ids': [2, 12]" in good.stdout

    np.savez(tmp_path / "bad.npz", input_ids=ids)
    bad = run_cli(["infer", str(model), "--input-data", str(tmp_path / "bad.npz")], tmp_path, 60)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "no array for input" in bad.stderr


@pytest.mark.timeout(300)
def test_sequence_length_is_a_sweep_axis(tmp_path: Path) -> None:
    factory.token_classifier(tmp_path / "tokens.onnx")
    (tmp_path / "plan.yaml").write_text(
        "model: tokens.onnx\n"
        "axes: {instance_count: [2]}\n"
        "loads: {concurrency: [2], sequence_length: [16, 64]}\n"
        "repeats: 1\n"
        "measurement: {measurement_interval_ms: 400, stability_percentage: 80, max_trials: 6}\n"
    )
    out_dir = tmp_path / "seq"
    result = run_cli(
        ["sweep", "plan.yaml", "--out", str(out_dir), "--max-repeats", "1", "--no-progress"],
        tmp_path,
        260,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    keys = {c["load_key"] for c in _cells(out_dir)}
    assert keys == {"grpc_b1_c2_s16", "grpc_b1_c2_s64"}
    for cell in _cells(out_dir):
        command = cell["perf"]["command"]  # type: ignore[index]
        length = cell["load_key"].rsplit("_s", 1)[1]  # type: ignore[union-attr]
        assert f"input_ids:{length}" in command
        data_file = command[command.index("--input-data") + 1]
        assert data_file == f"inputs/perf_data_s{length}.json"
        assert cell["server"]["request_count"] > 0  # type: ignore[index]
    data = json.loads((out_dir / "inputs" / "perf_data_s64.json").read_text())["data"]
    assert {e["input_ids"]["shape"][0] for e in data} == {64}
    check = read_result(out_dir / "results" / "infer_check.json")
    assert check[0]["input_shapes"]["input_ids"] == [2, 16], "the reference length is checked"
