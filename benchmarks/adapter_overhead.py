#!/usr/bin/env python3
"""Benchmark: what the onnxruntime adapter (backends/onnxruntime/model.py) costs per execution.

On one real tritonserver, three things are measured at client batch sizes 1 and 8:
- the demo model served through the ``onnxruntime`` Python-based backend: Triton's compute-infer
  time per execution (statistics extension, batch_stats for that batch size);
- an ``identity`` Python-based model that moves the same bytes (input [b,256] -> output [b,10]):
  what the Python backend itself costs (stub IPC, tensor wrapping), with no model run;
- the same ONNX model run in-process by onnxruntime with the same session options.
adapter cost = demo compute-infer - identity compute-infer - in-process run.

Load is perf_analyzer at concurrency 1 (one execution at a time, no dynamic batching), so every
execution has exactly the client's batch size. Rounds are interleaved (demo, identity, in-process,
then again) and the spread over rounds is reported. Results: JSON + markdown under --out.

Usage: python benchmarks/adapter_overhead.py [--rounds 3] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tritonlab.experiments.manifest import build_manifest
from tritonlab.experiments.store import write_json_atomic, write_text_atomic
from tritonlab.models.demo import export_simple_mlp
from tritonlab.models.inspect import OnnxModelInfo, inspect_onnx
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.perf.runner import run_perf
from tritonlab.perf.settings import PerfSettings
from tritonlab.repository.config import build_model_config, write_config
from tritonlab.repository.layout import add_model
from tritonlab.repository.variants import ServingVariant
from tritonlab.server.locate import prepare_bundled_server
from tritonlab.server.process import TritonServer

BATCH_SIZES = (1, 8)
TARGET_US = 25.0


def compute_infer_us_per_execution(before: dict, after: dict, batch: int) -> float:
    def find(stats: dict) -> tuple[int, int]:
        for entry in stats.get("batch_stats", []):
            if int(entry["batch_size"]) == batch:
                infer = entry["compute_infer"]
                return int(infer["count"]), int(infer["ns"])
        return 0, 0

    c0, n0 = find(before)
    c1, n1 = find(after)
    if c1 - c0 <= 0:
        raise RuntimeError(f"no executions of batch {batch} were recorded")
    return (n1 - n0) / (c1 - c0) / 1e3


def in_process_us(
    onnx_path: Path, batch: int, period_us: float = 0.0, iterations: int = 2000
) -> float:
    """Median onnxruntime run time with the backend's session options (1 thread, no spin).

    ``period_us`` > 0 paces the calls like the server's executions (one every ``period_us``),
    so caches and CPU idle states look like they do between served requests; 0 is a hot loop.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((batch, 256), dtype=np.float32)
    for _ in range(200):
        session.run(["output"], {"input": x})
    samples = []
    next_ns = time.perf_counter_ns()
    for _ in range(iterations):
        if period_us:
            next_ns += int(period_us * 1e3)
            delay = next_ns - time.perf_counter_ns()
            if delay > 0:
                time.sleep(delay / 1e9)
        t0 = time.perf_counter_ns()
        session.run(["output"], {"input": x})
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e3


PROFILE_RE = re.compile(
    r"tritonlab-adapter-profile instance=\S+ batch=(\d+) executions=(\d+) "
    r"read_inputs_us=([\d.]+) onnxruntime_run_us=([\d.]+) build_responses_us=([\d.]+)"
)


def adapter_profile(log_text: str) -> dict[int, dict[str, float]]:
    """The backend's own phase timings per batch size, printed at unload (profile mode)."""
    out = {}
    for m in PROFILE_RE.finditer(log_text):
        out[int(m.group(1))] = {
            "executions": int(m.group(2)),
            "read_inputs_us": float(m.group(3)),
            "onnxruntime_run_us": float(m.group(4)),
            "build_responses_us": float(m.group(5)),
        }
    return out


def identity_model(repo: Path, info: OnnxModelInfo) -> str:
    """An identity model with the demo's tensors (input [256] -> output [10])."""
    name = "identity_mlp_io"
    variant = ServingVariant("baseline", "identity", max_batch_size=64, intra_op_threads=None)
    config = build_model_config(info, variant, name)
    config.backend = "identity"
    config.ClearField("default_model_filename")
    folder = repo / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    write_config(config, folder / "config.pbtxt")
    return name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-ms", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()

    perf = locate_perf_analyzer()
    keys = ("demo", "identity", "in_process_hot", "in_process_paced")
    rows: dict[str, dict[int, list[float]]] = {k: {b: [] for b in BATCH_SIZES} for k in keys}
    os.environ["TRITONLAB_ADAPTER_PROFILE"] = "1"  # inherited by tritonserver and its stubs
    with tempfile.TemporaryDirectory(prefix="tritonlab-bench-") as tmp:
        work = Path(tmp)
        onnx_path = export_simple_mlp(work / "simple_mlp.onnx").onnx_path
        info = inspect_onnx(onnx_path)
        repo = work / "models"
        demo = add_model(repo, info, "simple_mlp", ServingVariant("baseline", "adapter bench"))
        ident = identity_model(repo, info)
        server = TritonServer(prepare_bundled_server(), repo, work / "triton.log")
        period_us = 0.0
        with server.start():
            for rnd in range(args.rounds):
                for batch in BATCH_SIZES:
                    for key, model in (("demo", demo.model_name), ("identity", ident)):
                        settings = PerfSettings(
                            model_name=model,
                            url=server.grpc_url,
                            batch_size=batch,
                            concurrency=1,
                            measurement_interval_ms=args.window_ms,
                            stability_percentage=50,
                        )
                        before = server.model_statistics(model)
                        result = run_perf(perf, settings, work / "perf", f"{model}_b{batch}_{rnd}")
                        after = server.model_statistics(model)
                        rows[key][batch].append(
                            compute_infer_us_per_execution(before, after, batch)
                        )
                        if key == "demo" and result.measurement:
                            # executions per second = requests per second at concurrency 1
                            period_us = 1e6 * batch / result.measurement.throughput_infer_per_s
                    rows["in_process_hot"][batch].append(in_process_us(onnx_path, batch))
                    rows["in_process_paced"][batch].append(
                        in_process_us(onnx_path, batch, period_us, iterations=1000)
                    )
                print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
        profile = adapter_profile(server.log_text())

    results = {}
    for batch in BATCH_SIZES:
        med = {k: statistics.median(rows[k][batch]) for k in keys}

        def per_round(reference: str, b: int = batch) -> list[float]:
            return [
                d - i - o
                for d, i, o in zip(
                    rows["demo"][b], rows["identity"][b], rows[reference][b], strict=True
                )
            ]

        results[f"batch_{batch}"] = {
            "demo_compute_infer_us": med["demo"],
            "identity_compute_infer_us": med["identity"],
            "in_process_hot_us": med["in_process_hot"],
            "in_process_paced_us": med["in_process_paced"],
            "adapter_us_vs_hot": med["demo"] - med["identity"] - med["in_process_hot"],
            "adapter_us_vs_paced": med["demo"] - med["identity"] - med["in_process_paced"],
            "adapter_us_vs_hot_per_round": per_round("in_process_hot"),
            "adapter_us_vs_paced_per_round": per_round("in_process_paced"),
            "backend_phases_us": profile.get(batch),
            "raw_us": {k: rows[k][batch] for k in keys},
        }
    record = build_manifest(
        benchmark="adapter_overhead",
        target_adapter_us=TARGET_US,
        rounds=args.rounds,
        results=results,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "adapter_overhead.json", record)
    lines = [
        "# onnxruntime adapter overhead",
        "",
        f"Machine: {record['machine']['cpu_model']}, {record['machine']['cpu_affinity_count']} "
        f"cores; date {record['created_utc']}; tritonlab commit {record['tool']['commit']}; "
        f"{args.rounds} interleaved rounds, medians (per-round adapter cost in brackets).",
        "",
        "| batch | demo compute infer | identity compute infer | in-process ORT hot / paced "
        "| adapter vs hot | adapter vs paced | inside the stub: read / run / respond |",
        "|---|---|---|---|---|---|---|",
    ]
    for batch in BATCH_SIZES:
        r = results[f"batch_{batch}"]
        hot = ", ".join(f"{x:.1f}" for x in r["adapter_us_vs_hot_per_round"])
        paced = ", ".join(f"{x:.1f}" for x in r["adapter_us_vs_paced_per_round"])
        ph = r["backend_phases_us"] or {}
        lines.append(
            f"| {batch} | {r['demo_compute_infer_us']:.1f} | {r['identity_compute_infer_us']:.1f} "
            f"| {r['in_process_hot_us']:.1f} / {r['in_process_paced_us']:.1f} "
            f"| {r['adapter_us_vs_hot']:.1f} ({hot}) | {r['adapter_us_vs_paced']:.1f} ({paced}) "
            f"| {ph.get('read_inputs_us', 0):.1f} / {ph.get('onnxruntime_run_us', 0):.1f} / "
            f"{ph.get('build_responses_us', 0):.1f} |"
        )
    lines += [
        "",
        "All times in µs per execution. adapter = demo compute infer - identity compute infer - "
        "in-process run; 'hot' runs onnxruntime in a tight loop, 'paced' at the served "
        f"execution rate. Target at batch 1: <= {TARGET_US:g} µs.",
    ]
    write_text_atomic(args.out / "adapter_overhead.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
