"""The roofline: machine ceilings (measured small), per-operator kernel times from onnxruntime's
profiler (fused and NCHWc kernels traced back to their operator), and which ceiling binds.

The ceilings are measured for real on tiny arrays (fast, not the figures a run reports); the
points are checked on numbers chosen so the binding ceiling is known beforehand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tritonlab.explanation.roofline import operator_points, served_points
from tritonlab.models.inspect import inspect_onnx
from tritonlab.perf.machine import MachineCeilings, machine_ceilings, measure_ceilings
from tritonlab.perf.op_timing import time_operators
from tritonlab.perf.operator_profile import OperatorProfile, OperatorsRecord, profile_operators
from tritonlab.report.roofline_text import roofline_lines

CEILINGS = MachineCeilings(
    bandwidth_bytes_per_s=20e9,
    triad_bytes_per_s=15e9,
    copy_bytes_per_s=20e9,
    gemm_flop_per_s=40e9,
    gemm_size=1024,
    bandwidth_array_bytes=128 << 20,
    threads=1,
    cpu="test CPU",
    measured_utc="2026-12-01T00:00:00Z",
    libraries={"numpy": "x", "onnxruntime": "y"},
    last_level_cache_bytes=8 << 20,
)


def _conv_relu_gemm(path: Path) -> Path:
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Relu: onnxruntime fuses Conv with
    its Relu and lays the Conv out as NCHWc, renaming its kernel."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.1).astype(np.float32), "w")
    g = numpy_helper.from_array((rng.standard_normal((4, 8)) * 0.1).astype(np.float32), "g")
    gb = numpy_helper.from_array(np.zeros(4, np.float32), "gb")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="/relu/Relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="/pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="/flat"),
        helper.make_node("Gemm", ["f", "g", "gb"], ["y0"], name="/fc/Gemm", transB=1),
        helper.make_node("Relu", ["y0"], ["y"], name="/fc/Relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [w, g, gb],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))
    return path


def test_every_heavy_operator_gets_its_own_kernel_time(tmp_path: Path) -> None:
    info = inspect_onnx(_conv_relu_gemm(tmp_path / "m.onnx"))
    names = [o.name for o in profile_operators(info.path).operators]
    assert names == ["/conv/Conv", "/fc/Gemm"]
    times = time_operators(info, names, [1, 4], runs=2)
    assert set(times) == {1, 4}
    for batch in (1, 4):
        assert set(times[batch]) == set(names), times  # fused/renamed kernels traced back
        assert all(us > 0 for us in times[batch].values())


def test_measured_ceilings_are_plausible_and_cached(tmp_path: Path) -> None:
    small = measure_ceilings(elements=1 << 16, gemm_sizes=(64, 128), repeats=2)
    assert small.bandwidth_bytes_per_s == max(small.triad_bytes_per_s, small.copy_bytes_per_s)
    assert 1e8 < small.bandwidth_bytes_per_s < 1e13
    assert 1e8 < small.gemm_flop_per_s < 1e14
    cached = dataclasses.replace(small, cpu="from the cache")
    import json

    from tritonlab.perf import machine

    key = machine.cache_key()
    (tmp_path / "machine_ceilings.json").write_text(
        json.dumps({"key": key, "ceilings": cached.to_dict()})
    )
    assert machine_ceilings(tmp_path).cpu == "from the cache"  # reused, not measured again


def _operators_record(us_batch1: float, us_batch64: float) -> OperatorsRecord:
    # one Gemm of 1024 x 256 fp32 weights: 0.52 MFLOP per sample, 1 MiB of weights
    op = {
        "name": "/0/Gemm",
        "op_type": "Gemm",
        "flops_per_sample": 2 * 1024 * 256,
        "weight_bytes": 1024 * 256 * 4,
        "activation_bytes_per_sample": (256 + 1024) * 4,
    }
    return OperatorsRecord.from_dict(
        {
            "profile": {"operators": [op]},
            "in_process_us_per_execution": {"1": us_batch1},
            "machine_ceilings": CEILINGS.to_dict(),
            "operator_us_per_execution": {
                "1": {"/0/Gemm": us_batch1},
                "64": {"/0/Gemm": us_batch64},
            },
        }
    )


def test_batching_moves_the_operator_from_the_bandwidth_to_the_compute_ceiling() -> None:
    points = {p.batch: p for p in operator_points(_operators_record(100.0, 2000.0))}
    assert points[1].binding == "memory bandwidth"  # ~0.5 FLOP/byte, ridge at 2
    assert points[64].binding == "compute (GEMM)"
    assert points[1].achieved_flop_per_s == pytest.approx(2 * 1024 * 256 / 100e-6)
    assert points[1].share_of_ceiling == pytest.approx(
        points[1].achieved_flop_per_s / (20e9 * points[1].intensity_flop_per_byte)
    )


def test_a_point_above_the_bandwidth_line_is_explained_by_the_cache() -> None:
    fast = roofline_lines(_operators_record(20.0, 2000.0), [])  # 26 GFLOP/s at 0.5 FLOP/byte
    text = "\n".join(fast)
    assert "above the ceiling that should bind" in text and "last-level cache" in text
    slow = "\n".join(roofline_lines(_operators_record(100.0, 2000.0), []))
    assert "above the ceiling that should bind" not in slow  # counter-example: nothing to explain


def test_no_roofline_without_ceilings() -> None:
    record = dataclasses.replace(_operators_record(100.0, 2000.0), machine_ceilings=None)
    assert roofline_lines(record, []) == [] and operator_points(record) == []


def test_the_roofline_plot_draws_operators_and_served_points(tmp_path: Path) -> None:
    from test_plots import SWEEP_RUN, assert_real_png

    from tritonlab.report.plot_support import PlotData
    from tritonlab.report.run_data import load_run
    from tritonlab.report.server_plots import plot_roofline

    run = PlotData.of(load_run(SWEEP_RUN))
    with_ceilings = dataclasses.replace(run, operators=_operators_record(100.0, 2000.0))
    path = plot_roofline(with_ceilings, tmp_path / "roofline.png")
    assert path is not None
    assert_real_png(path)
    again = plot_roofline(with_ceilings, tmp_path / "again.png")
    assert again is not None and again.read_bytes() == path.read_bytes()  # stable bytes
    assert plot_roofline(run, tmp_path / "none.png") is None  # no ceilings recorded: no plot


def test_a_model_without_heavy_operators_has_no_roofline_and_no_error(tmp_path: Path) -> None:
    """Seen on a token classifier (Gather and ReduceMean, no MatMul): no heavy operator, so
    no FLOPs to place and no plot; the run must not fail on the empty operator list."""
    from test_plots import SWEEP_RUN

    from tritonlab.report.plot_support import PlotData
    from tritonlab.report.run_data import load_run
    from tritonlab.report.server_plots import plot_roofline

    record = dataclasses.replace(
        _operators_record(100.0, 2000.0),
        profile=OperatorProfile(()),
        operator_us_per_execution={},
    )
    run = dataclasses.replace(PlotData.of(load_run(SWEEP_RUN)), operators=record)
    assert operator_points(record) == []
    assert served_points(record, run.summaries) == []
    assert plot_roofline(run, tmp_path / "roofline.png") is None
    assert "No operator timings" in "\n".join(roofline_lines(record, []))
