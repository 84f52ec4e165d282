#!/usr/bin/env python3
"""Run Triton Model Analyzer 1.44.0 on tritonlab's demo MLP, on the same server and perf_analyzer.

The Model Analyzer side of the side-by-side benchmark. Run it with the project venv's Python
(tritonlab is imported from there to export the model and write its config.pbtxt); Model
Analyzer itself lives in its own venv (``setup_ma.sh``) and is started as a subprocess::

    .venv/bin/python benchmarks/vs_model_analyzer/model_analyzer_run.py --mode brute --out DIR
    .venv/bin/python benchmarks/vs_model_analyzer/model_analyzer_run.py --mode quick --out DIR

Modes:
  brute  instance count 1-2 x dynamic batching on/off, concurrency 1,2,4,8,16
         (MA adds its own ``<model>_config_default`` run on top)
  quick  ``run_config_search_mode: quick`` with Model Analyzer's defaults otherwise

Both use the perf_analyzer settings tritonlab uses by default: gRPC, batch size 1,
time_windows of 2000 ms, stability 25 %, at most 8 trials.

Writes ``DIR/<mode>/``: ``result.json`` (see ``README.md`` for its schema), the MA config YAML,
its log, the model repositories, the checkpoint, the server log and the wrappers' call log.
Standard library + PyYAML only (besides tritonlab for the model).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MODEL_NAME = "simple_mlp"
MAX_BATCH_SIZE = 64
P99_BUDGET_US = 10_000
MA_VERSION = "1.44.0"

# The perf_analyzer settings tritonlab uses by default (experiments/plan.py MeasurementSettings,
# perf/settings.py PerfSettings): gRPC, -b 1, time_windows 2000 ms, -s 25, --max-trials 8.
PERF_ANALYZER_FLAGS = {
    "measurement-mode": "time_windows",
    "measurement-interval": 2000,
    "stability-percentage": 25,
    "max-trials": 8,
}
BRUTE_CONCURRENCY = [1, 2, 4, 8, 16]
BRUTE_INSTANCE_COUNTS = [1, 2]
# MA's default kills perf_analyzer above 80 % CPU; on 2 cores a busy client uses more than that.
PERF_ANALYZER_CPU_UTIL = 800
INTERRUPT_GRACE_S = 20.0
STOP_GRACE_S = 10.0


def log(message: str) -> None:
    print(f"[ma-run {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Binaries: tritonlab locate, and the wrappers Model Analyzer starts
# --------------------------------------------------------------------------------------------


def locate(tritonlab: Path, what: str) -> tuple[dict[str, str], dict[str, str]]:
    """(variables, exported environment) from ``tritonlab locate <what> --shell``."""
    proc = subprocess.run(
        [str(tritonlab), "locate", what, "--shell"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"tritonlab locate {what} failed: {proc.stderr.strip()}")
    variables: dict[str, str] = {}
    exports: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        words = shlex.split(line)
        if not words or words[0] == "unset":
            continue
        target = exports if words[0] == "export" else variables
        key, _, value = words[-1].partition("=")
        target[key] = value
    return variables, exports


def _prepend(name: str, value: str, current: str | None) -> str:
    """The exported value minus what the current environment already has at its end."""
    if current and value.endswith(os.pathsep + current):
        value = value[: -len(current) - 1]
    return f'export {name}={shlex.quote(value)}"${{{name}:+:${name}}}"'


def write_wrappers(bin_dir: Path, run_dir: Path, tritonlab: Path) -> dict[str, str]:
    """``tritonserver`` and ``perf_analyzer`` scripts that exec the real binaries.

    Each records its pid (``exec`` keeps it) under ``run_dir/pids`` so a Ctrl-C can stop what
    Model Analyzer started in sessions of their own, and logs its arguments to ``calls.log``.
    """
    server_vars, server_env = locate(tritonlab, "server")
    perf_vars, perf_env = locate(tritonlab, "perf")
    bin_dir.mkdir(parents=True, exist_ok=True)
    pids = run_dir / "pids"
    pids.mkdir(exist_ok=True)
    calls = run_dir / "calls.log"

    def env_lines(exports: dict[str, str]) -> list[str]:
        lines = []
        for key in ("LD_LIBRARY_PATH",):  # PATH: set explicitly below for the server
            if key in exports:
                lines.append(_prepend(key, exports[key], os.environ.get(key)))
        return lines

    server_flags = [f"--backend-directory={server_vars['BACKEND_DIR']}"]
    if server_vars.get("CACHE_DIR"):
        server_flags.append(f"--cache-directory={server_vars['CACHE_DIR']}")
    # The Python backend stub imports onnxruntime from the environment first on PATH.
    server_path_first = server_vars["TRITONLAB_BIN"]
    scripts = {
        "tritonserver": [
            *env_lines(server_env),
            f'export PATH={shlex.quote(server_path_first)}":$PATH"',
            "unset PYTHONHOME",
            f"exec {shlex.quote(server_vars['TRITONSERVER'])} "
            + " ".join(shlex.quote(f) for f in server_flags)
            + ' "$@"',
        ],
        "perf_analyzer": [
            *env_lines(perf_env),
            f'exec {shlex.quote(perf_vars["PERF_ANALYZER"])} "$@"',
        ],
    }
    paths: dict[str, str] = {}
    for name, body in scripts.items():
        path = bin_dir / name
        text = "\n".join(
            [
                "#!/bin/sh",
                f"# Generated by {Path(__file__).name}: the real {name} with its environment.",
                f": > {shlex.quote(str(pids))}/{name}.$$",
                f'printf "%s %s %s\\n" "$(date +%s.%N)" {name} "$*" >> {shlex.quote(str(calls))}',
                *body,
                "",
            ]
        )
        path.write_text(text)
        path.chmod(0o755)
        paths[name] = str(path)
    paths["real_tritonserver"] = server_vars["TRITONSERVER"]
    paths["real_perf_analyzer"] = perf_vars["PERF_ANALYZER"]
    return paths


# --------------------------------------------------------------------------------------------
# Model repository, as tritonlab writes it
# --------------------------------------------------------------------------------------------


def build_model_repository(repo_dir: Path, onnx_cache: Path) -> str:
    """Export the demo MLP and write its folder the way tritonlab's build_repository does."""
    from tritonlab.models.inspect import inspect_onnx
    from tritonlab.models.zoo import export_builtin
    from tritonlab.repository.layout import build_repository
    from tritonlab.repository.variants import ServingVariant

    onnx_path = onnx_cache / f"{MODEL_NAME}.onnx"
    if not onnx_path.exists():
        onnx_cache.mkdir(parents=True, exist_ok=True)
        export_builtin(MODEL_NAME, onnx_path)
    info = inspect_onnx(onnx_path)
    # tritonlab's baseline: no batching, 1 KIND_CPU instance, max_batch_size 64, 1 intra-op thread.
    baseline = ServingVariant(
        "baseline", "baseline (no batching, count=1)", max_batch_size=MAX_BATCH_SIZE
    )
    shutil.rmtree(repo_dir, ignore_errors=True)
    (model,) = build_repository(repo_dir, info, MODEL_NAME, [baseline])
    return model.config_path.read_text()


# --------------------------------------------------------------------------------------------
# Model Analyzer configuration
# --------------------------------------------------------------------------------------------


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def ma_config(mode: str, run_dir: Path, wrappers: dict[str, str]) -> dict[str, Any]:
    http, grpc, metrics = free_ports(3)
    config: dict[str, Any] = {
        "model_repository": str(run_dir / "model_repository"),
        "output_model_repository_path": str(run_dir / "output_model_repository"),
        "override_output_model_repository": True,
        "checkpoint_directory": str(run_dir / "checkpoints"),
        "export_path": str(run_dir / "export"),
        "triton_launch_mode": "local",
        "triton_server_path": wrappers["tritonserver"],
        "perf_analyzer_path": wrappers["perf_analyzer"],
        "triton_output_path": str(run_dir / "tritonserver.log"),
        "triton_http_endpoint": f"localhost:{http}",
        "triton_grpc_endpoint": f"localhost:{grpc}",
        "triton_metrics_url": f"http://localhost:{metrics}/metrics",
        "client_protocol": "grpc",
        # No top-level batch_sizes: quick mode refuses any list of them (its default is -b 1).
        "perf_analyzer_flags": dict(PERF_ANALYZER_FLAGS),
        "perf_analyzer_cpu_util": PERF_ANALYZER_CPU_UTIL,
        "run_config_search_mode": mode,
        # PDF/HTML reports are not part of the comparison (and need wkhtmltopdf).
        "skip_summary_reports": True,
        "skip_detailed_reports": True,
    }
    model: dict[str, Any] = {"cpu_only": True}
    if mode == "brute":
        model["model_config_parameters"] = {
            "instance_group": [{"kind": "KIND_CPU", "count": list(BRUTE_INSTANCE_COUNTS)}],
            # MA 1.44 reads the first item of this list to decide what the sweep looks like and
            # crashes when it is null: "on" ({}: max_queue_delay 0) first, then "off".
            "dynamic_batching": [{}, None],
        }
        model["parameters"] = {"concurrency": list(BRUTE_CONCURRENCY), "batch_sizes": [1]}
    config["profile_models"] = {MODEL_NAME: model}
    return config


# --------------------------------------------------------------------------------------------
# Running it, and cleaning up whatever it started
# --------------------------------------------------------------------------------------------


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _pid_running_binary(pid: int, binary: str) -> bool:
    """True when ``pid`` is alive and is (still) ``binary``, not a recycled pid."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return os.path.realpath(exe) == os.path.realpath(binary)


def _process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def stop_started_binaries(run_dir: Path, wrappers: dict[str, str]) -> list[str]:
    """SIGTERM then SIGKILL every recorded tritonserver/perf_analyzer still running.

    MA starts both with ``start_new_session=True``, so each leads its own process group (the
    server's group also holds its Python backend stubs): the whole group is signalled.
    """
    targets: list[tuple[str, int]] = []
    for record in sorted((run_dir / "pids").glob("*.*")):
        name, _, pid_text = record.name.rpartition(".")
        binary = wrappers.get(f"real_{name}")
        if binary and pid_text.isdigit() and _pid_running_binary(int(pid_text), binary):
            targets.append((name, int(pid_text)))
    stopped = []
    for name, pid in targets:
        stopped.append(f"{name} pid {pid}")
        group = _process_group(pid)
        with contextlib.suppress(OSError):
            if group == pid:
                os.killpg(pid, signal.SIGTERM)
            else:
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for name, pid in targets:
        while _pid_running_binary(pid, wrappers[f"real_{name}"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        group = _process_group(pid)
        with contextlib.suppress(OSError):
            if group == pid:
                os.killpg(pid, signal.SIGKILL)  # the group may still hold backend stubs
            elif _pid_running_binary(pid, wrappers[f"real_{name}"]):
                os.kill(pid, signal.SIGKILL)
    return stopped


class Interrupted(Exception):
    pass


def run_model_analyzer(
    ma_bin: Path, config_path: Path, run_dir: Path, wrappers: dict[str, str]
) -> tuple[int, bool]:
    """Run ``model-analyzer profile`` in its own process group; (exit code, interrupted)."""
    cmd = [str(ma_bin), "-v", "profile", "-f", str(config_path)]
    log_path = run_dir / "model_analyzer.log"
    log("running: " + " ".join(shlex.quote(c) for c in cmd))
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    env.pop("PYTHONPATH", None)
    interrupted = False

    def on_signal(signum: int, _frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    proc = None
    try:
        with open(log_path, "w") as log_file:
            proc = subprocess.Popen(
                cmd,
                cwd=run_dir,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
            try:
                code = proc.wait()
            except Interrupted as exc:
                interrupted = True
                log(f"{exc}: asking Model Analyzer to stop (SIGINT), then killing what is left")
                # Further signals must not interrupt the cleanup below.
                for s in old:
                    signal.signal(s, signal.SIG_IGN)
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGINT)
                try:
                    code = proc.wait(timeout=INTERRUPT_GRACE_S)
                except subprocess.TimeoutExpired:
                    code = -9
    finally:
        if proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)  # MA's group: itself and any helper
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        stopped = stop_started_binaries(run_dir, wrappers)
        if stopped:
            log("stopped what Model Analyzer left running: " + ", ".join(stopped))
        for s, handler in old.items():
            signal.signal(s, handler)
    return code, interrupted


# --------------------------------------------------------------------------------------------
# Reading the results from the checkpoint (the CSV rounds latencies to 0.1 ms)
# --------------------------------------------------------------------------------------------


def _latest_checkpoint(checkpoint_dir: Path) -> Path | None:
    found = [(int(p.stem), p) for p in checkpoint_dir.glob("*.ckpt") if p.stem.isdigit()]
    return max(found)[1] if found else None


def _record_value(records: dict[str, Any], tag: str, scale: float = 1.0) -> float | None:
    record = records.get(tag)
    if record is None:
        return None
    value = record.get("_value") if isinstance(record, dict) else None
    return round(float(value) * scale, 3) if value is not None else None


# MA stores perf_analyzer's microsecond latencies divided by 1000 (milliseconds, full precision:
# 0.658 is 658 us); its CSV rounds the same values to 0.1 ms.
_MS_TO_US = 1000.0


def checkpoint_config_to_pbtxt(model_config: dict[str, Any]) -> str:
    """The checkpoint's model config (protobuf JSON mapping) as config.pbtxt text."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    config = json_format.ParseDict(model_config, model_config_pb2.ModelConfig())
    return str(text_format.MessageToString(config))


def describe_config(pbtxt: str) -> dict[str, Any]:
    """ServingVariant-like fields from a config.pbtxt, parsed with Triton's protobuf schema."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    config = text_format.Parse(pbtxt, model_config_pb2.ModelConfig())
    data = json_format.MessageToDict(config, preserving_proto_field_name=True)
    groups = data.get("instance_group", [{}])
    batching = data.get("dynamic_batching")
    params = data.get("parameters", {})
    intra = params.get("intra_op_thread_count", {}).get("string_value")
    return {
        "dynamic_batching": batching is not None,
        "max_queue_delay_us": int((batching or {}).get("max_queue_delay_microseconds", 0)),
        "preferred_batch_sizes": [int(b) for b in (batching or {}).get("preferred_batch_size", [])],
        "max_batch_size": int(data.get("max_batch_size", 0)),
        "instance_count": sum(int(g.get("count", 1)) for g in groups) if groups else 1,
        "instance_kind": groups[0].get("kind", "KIND_GPU") if groups else None,
        "intra_op_threads": int(intra) if intra not in (None, "") and intra.isdigit() else None,
    }


def read_results(run_dir: Path) -> dict[str, Any]:
    """Every measured (config, concurrency) from MA's latest checkpoint."""
    checkpoint = _latest_checkpoint(run_dir / "checkpoints")
    if checkpoint is None:
        return {"checkpoint": None, "configs": {}, "measurements": []}
    state = json.loads(checkpoint.read_text())
    results = state.get("ResultManager.results", {}).get("_results", {})
    output_repo = run_dir / "output_model_repository"
    configs: dict[str, dict[str, Any]] = {}
    measurements: list[dict[str, Any]] = []
    for model_name, by_config in results.items():
        for config_name, entry in by_config.items():
            # entry: [ModelRunConfig-ish dict, {perf key: RunConfigMeasurement dict}]
            run_config, run_measurements = entry
            # The config.pbtxt MA wrote to its output repository; else the checkpoint's copy.
            pbtxt_path = output_repo / config_name / "config.pbtxt"
            if pbtxt_path.exists():
                pbtxt = pbtxt_path.read_text()
            else:
                variant = run_config["_model_run_configs"][0]["_model_config_variant"]
                pbtxt = checkpoint_config_to_pbtxt(variant["model_config"])
            configs[config_name] = {
                "model": model_name,
                **describe_config(pbtxt),
                "config_pbtxt": pbtxt,
            }
            for key, rcm in run_measurements.items():
                measurements.append(_measurement(config_name, key, rcm))
    measurements.sort(key=lambda m: (m["config"], m["concurrency"] or 0))
    return {"checkpoint": str(checkpoint), "configs": configs, "measurements": measurements}


def _measurement(config_name: str, key: str, rcm: dict[str, Any]) -> dict[str, Any]:
    concurrency = re.search(r"--concurrency-range[= ](\d+)", key)
    batch = re.search(r"-b (\d+)|--batch-size[= ](\d+)", key)
    # MA lengthens the window itself when perf_analyzer reports an unstable measurement.
    interval = re.search(r"--measurement-interval[= ](\d+)", key)
    records: dict[str, Any] = {}
    for mcm in rcm.get("_model_config_measurements", []):
        # [model name, ModelConfigMeasurement dict]
        body = mcm[1] if isinstance(mcm, list) else mcm
        records.update(dict(body.get("_non_gpu_data", [])))
    return {
        "config": config_name,
        "concurrency": int(concurrency.group(1)) if concurrency else None,
        "batch_size": int(next(g for g in batch.groups() if g)) if batch else None,
        "measurement_interval_ms": int(interval.group(1)) if interval else None,
        "throughput_infer_per_s": _record_value(records, "perf_throughput"),
        "p99_latency_us": _record_value(records, "perf_latency_p99", _MS_TO_US),
        "p95_latency_us": _record_value(records, "perf_latency_p95", _MS_TO_US),
        "avg_latency_us": _record_value(records, "perf_latency_avg", _MS_TO_US),
        "server_queue_us": _record_value(records, "perf_server_queue", _MS_TO_US),
        "server_compute_infer_us": _record_value(records, "perf_server_compute_infer", _MS_TO_US),
        "ma_measurement_key": key,  # "<variant> <perf_analyzer args>"
    }


def count_calls(run_dir: Path) -> dict[str, int]:
    counts = {"tritonserver_starts": 0, "perf_analyzer_runs": 0}
    calls = run_dir / "calls.log"
    if not calls.exists():
        return counts
    for line in calls.read_text().splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 2:
            continue
        args = parts[2] if len(parts) > 2 else ""
        if parts[1] == "tritonserver" and "--version" not in args:
            counts["tritonserver_starts"] += 1
        elif parts[1] == "perf_analyzer" and "-m " in args:
            counts["perf_analyzer_runs"] += 1
    return counts


def summarize(
    mode: str, run_dir: Path, wall_s: float, code: int, interrupted: bool
) -> dict[str, Any]:
    data = read_results(run_dir)
    measured = [m for m in data["measurements"] if m["throughput_infer_per_s"] is not None]

    def brief(m: dict[str, Any] | None) -> dict[str, Any] | None:
        if m is None:
            return None
        config = {k: v for k, v in data["configs"][m["config"]].items() if k != "config_pbtxt"}
        return {
            "config": m["config"],
            "serving": config,
            "concurrency": m["concurrency"],
            "throughput_infer_per_s": m["throughput_infer_per_s"],
            "p99_latency_us": m["p99_latency_us"],
        }

    best = max(measured, key=lambda m: m["throughput_infer_per_s"], default=None)
    within = [m for m in measured if m["p99_latency_us"] is not None]
    within = [m for m in within if m["p99_latency_us"] <= P99_BUDGET_US]
    best_within = max(within, key=lambda m: m["throughput_infer_per_s"], default=None)
    calls = count_calls(run_dir)
    return {
        "tool": "triton-model-analyzer",
        "tool_version": MA_VERSION,
        "mode": mode,
        "model": MODEL_NAME,
        "wall_s": round(wall_s, 1),
        "exit_code": code,
        "interrupted": interrupted,
        "perf_analyzer_flags": {
            **PERF_ANALYZER_FLAGS,
            "protocol": "grpc",
            "batch_size": 1,
        },
        "num_configs": len(data["configs"]),
        "num_measurements": len(data["measurements"]),
        "num_perf_analyzer_runs": calls["perf_analyzer_runs"],
        "num_server_starts": calls["tritonserver_starts"],
        "p99_budget_us": P99_BUDGET_US,
        "best_throughput": brief(best),
        "best_within_p99_budget": brief(best_within),
        "configs": data["configs"],
        "measurements": data["measurements"],
        "checkpoint": data["checkpoint"],
    }


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("brute", "quick"), required=True)
    parser.add_argument("--out", type=Path, required=True, help="results go to OUT/<mode>/")
    parser.add_argument(
        "--ma-venv", type=Path, default=REPO / ".venv-ma", help="venv made by setup_ma.sh"
    )
    parser.add_argument(
        "--tritonlab",
        type=Path,
        default=Path(sys.executable).parent / "tritonlab",
        help="the tritonlab CLI whose `locate` gives the binaries (default: beside this python)",
    )
    parser.add_argument(
        "--summarize-only", action="store_true", help="rewrite result.json from an earlier run"
    )
    args = parser.parse_args(argv)

    ma_bin = args.ma_venv / "bin" / "model-analyzer"
    if not ma_bin.exists():
        parser.error(f"{ma_bin} not found: run benchmarks/vs_model_analyzer/setup_ma.sh first")
    run_dir = (args.out / args.mode).resolve()
    result_path = run_dir / "result.json"

    if args.summarize_only:
        meta = json.loads(result_path.read_text())
        summary = summarize(
            args.mode, run_dir, meta["wall_s"], meta["exit_code"], meta["interrupted"]
        )
        result_path.write_text(json.dumps(summary, indent=2) + "\n")
        log(f"rewrote {result_path}")
        return 0

    if run_dir.exists():
        shutil.rmtree(run_dir)  # MA resumes from a checkpoint it finds: start clean
    run_dir.mkdir(parents=True)
    wrappers = write_wrappers(run_dir / "bin", run_dir, args.tritonlab)
    (run_dir / "wrappers.json").write_text(json.dumps(wrappers, indent=2) + "\n")
    build_model_repository(run_dir / "model_repository", args.out.resolve() / ".onnx")
    config = ma_config(args.mode, run_dir, wrappers)
    config_path = run_dir / "ma_config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    start = time.monotonic()
    code, interrupted = run_model_analyzer(ma_bin, config_path, run_dir, wrappers)
    wall_s = time.monotonic() - start
    summary = summarize(args.mode, run_dir, wall_s, code, interrupted)
    result_path.write_text(json.dumps(summary, indent=2) + "\n")

    log(
        f"{args.mode}: exit {code}, {wall_s:.0f} s, {summary['num_configs']} configs, "
        f"{summary['num_measurements']} measurements "
        f"({summary['num_perf_analyzer_runs']} perf_analyzer runs) -> {result_path}"
    )
    for label, key in (("best", "best_throughput"), ("best p99<=10ms", "best_within_p99_budget")):
        b = summary[key]
        if b:
            log(
                f"{label}: {b['config']} {b['serving']} c={b['concurrency']} "
                f"{b['throughput_infer_per_s']:.0f} infer/s p99 {b['p99_latency_us']:.0f} us"
            )
    if interrupted:
        return 130
    return 0 if code == 0 and summary["num_measurements"] else 1


if __name__ == "__main__":
    sys.exit(main())
