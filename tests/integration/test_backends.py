"""Two backends in one sweep on the real server: the demo MLP served by onnxruntime and by
OpenVINO (f32, and bf16 asked for), compared with verdicts and explained with per-engine cost
terms; the roofline's data recorded beside it. Short windows: this checks the mechanics, the
committed examples (examples/*_backends) carry the measured comparison."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from integration_support import cli_env, tritonlab_command

from tritonlab.result_files import read_result

pytestmark = pytest.mark.integration


@pytest.mark.timeout(300)
def test_onnxruntime_and_openvino_in_one_sweep(demo_onnx: Path, tmp_path: Path) -> None:
    shutil.copy(demo_onnx, tmp_path / "mlp.onnx")
    (tmp_path / "plan.yaml").write_text(
        "model: mlp.onnx\n"
        "axes: {backend: [openvino]}\n"
        "combined:\n  - changes: {backend: openvino, precision: bf16}\n"
        "loads: {concurrency: [4]}\n"
        "repeats: 1\n"
        "measurement: {measurement_interval_ms: 400, stability_percentage: 80, max_trials: 6}\n"
    )
    out = tmp_path / "out"
    result = subprocess.run(
        [
            *tritonlab_command(),
            "sweep",
            "plan.yaml",
            "--out",
            str(out),
            "--max-repeats",
            "1",
            "--no-progress",
        ],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=280,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr

    # every engine's answers were checked against onnxruntime
    checks = read_result(out / "results" / "infer_check.json")
    engines = {c.get("engine", "onnxruntime"): c for c in checks}
    assert set(engines) == {"onnxruntime", "openvino f32", "openvino bf16"}
    assert engines["openvino f32"]["max_abs_diff"] <= 1e-4
    assert engines["openvino bf16"]["max_rel_diff"] is not None

    # the same model.onnx, served by the other backend with its precision pinned
    config = (out / "models" / "mlp__nobatch_openvino" / "config.pbtxt").read_text()
    assert 'backend: "openvino"' in config and "INFERENCE_PRECISION_HINT" in config
    served = (out / "server" / "tritonserver.log").read_text()
    assert "tritonlab-openvino" in served and "asked=bf16" in served

    # per-engine in-process terms, the precision really used, the roofline's inputs
    operators = read_result(out / "results" / "operators.json")
    assert set(operators["engines_in_process_us_per_execution"]) == {
        "openvino f32",
        "openvino bf16",
    }
    assert set(operators["engines_precision_used"]) == {"openvino f32", "openvino bf16"}
    assert operators["machine_ceilings"]["gemm_flop_per_s"] > 0
    assert set(operators["operator_us_per_execution"]["1"]) == {"/0/Gemm", "/2/Gemm"}

    log = (out / "docs" / "experiment_log.md").read_text()
    assert "backend onnxruntime -> openvino (f32)" in log  # the action, one change
    assert "onnxruntime -> openvino f32: throughput" in log  # the engine-effect rule
    assert "µs per sample on onnxruntime" in log  # ... in the cost model's terms
    assert "F, P on openvino f32" in log
    assert "### Roofline" in log
    assert (out / "plots" / "roofline.png").exists()
    cells = [json.loads(p.read_text()) for p in (out / "results" / "cells").glob("*.json")]
    assert {c["variant"].get("backend", "onnxruntime") for c in cells} == {
        "onnxruntime",
        "openvino",
    }
