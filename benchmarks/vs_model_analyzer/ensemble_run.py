#!/usr/bin/env python3
"""Run Triton Model Analyzer 1.44.0's ensemble search on tritonlab's built-in pipeline.

The Model Analyzer half of ``pipeline_compare.py`` (``make ma-pipeline-bench``); it can also run
on its own::

    .venv/bin/python benchmarks/vs_model_analyzer/ensemble_run.py --cnn tiny --out DIR
    .venv/bin/python benchmarks/vs_model_analyzer/ensemble_run.py --cnn resnet18_cnn --out DIR

It writes the pipeline repository (``tritonlab.models.pipeline_example``: ``preprocess`` and
``postprocess`` Python models around the ``cnn`` ONNX model, chained by the ensemble
``pipeline``) and runs ``model-analyzer profile`` on the ensemble in quick search mode (the mode
that profiles ensembles; brute refuses them), every composing model CPU-only
(``cpu_only_composing_models``), on the same bundled tritonserver and perf_analyzer as
``model_analyzer_run.py`` (whose wrappers, process handling and checkpoint reading it reuses).
The search is bounded (``--max-instances``, ``--max-batch``, ``--max-concurrency``) to keep one
run within about ten minutes on two cores.

Writes ``DIR/ensemble_<cnn>/``: ``result.json`` (exit code, wall time, the decisive log lines
when it failed, every measured ensemble configuration with its composing models' configs, the
pick), ``picked_repository/`` (the pipeline repository with the picked composing configs, ready
to serve) and Model Analyzer's own files (config YAML, log, checkpoint, server log).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import model_analyzer_run as mar  # noqa: E402  (the MLP run's wrappers and checkpoint reader)

ENSEMBLE = "pipeline"
PIPELINE_MARKER = ".tritonlab-pipeline"  # what write_pipeline_repository was asked for
COMPOSING = ("preprocess", "cnn", "postprocess")
PIPELINE_MAX_BATCH = 8
P99_BUDGET_US = 10_000
# The search bounds (Model Analyzer's defaults are 5 instances, max batch 128, concurrency 1024).
MAX_INSTANCES = 2
MAX_BATCH = 8
MAX_CONCURRENCY = 32
SWEEP_TOP_CONFIGS = 1
# Log lines worth quoting when a run fails (case-insensitive substrings).
DECISIVE = ("error", "exception", "traceback", "failed", "unable", "not supported", "refus")


def build_pipeline_repository(root: Path, cnn: str) -> dict[str, Any]:
    """The built-in pipeline, as tritonlab writes it (a folder it wrote earlier is rewritten,
    any other refused); what it was asked for."""
    from tritonlab.models.pipeline_example import write_pipeline_repository

    write_pipeline_repository(root, cnn=cnn, max_batch_size=PIPELINE_MAX_BATCH)
    return dict(json.loads((root / PIPELINE_MARKER).read_text()))


def ma_ensemble_config(
    run_dir: Path,
    repository: Path,
    wrappers: dict[str, str],
    max_instances: int,
    max_batch: int,
    max_concurrency: int,
) -> dict[str, Any]:
    """Model Analyzer's config: the MLP run's settings, quick search on the ensemble."""
    config = mar.ma_config("quick", run_dir, wrappers)
    config["model_repository"] = str(repository)
    config["profile_models"] = {ENSEMBLE: {"cpu_only": True}}
    config["cpu_only_composing_models"] = list(COMPOSING)
    config["run_config_search_max_instance_count"] = max_instances
    config["run_config_search_max_model_batch_size"] = max_batch
    config["run_config_search_max_concurrency"] = max_concurrency
    # The concurrency sweep after the quick search: the best configuration only (and the
    # default, which Model Analyzer always adds), not its top three.
    config["num_configs_per_model"] = SWEEP_TOP_CONFIGS
    return config


def decisive_lines(log_path: Path, limit: int = 25) -> list[str]:
    """The lines of Model Analyzer's log that say what went wrong (the last ``limit``)."""
    if not log_path.exists():
        return []
    lines = log_path.read_text(errors="replace").splitlines()
    hits = [line.rstrip() for line in lines if any(w in line.lower() for w in DECISIVE)]
    return hits[-limit:]


def closing_lines(log_path: Path, count: int = 3) -> list[str]:
    """The last ``count`` non-empty lines of Model Analyzer's log (how the run ended)."""
    if not log_path.exists():
        return []
    lines = [line.rstrip() for line in log_path.read_text(errors="replace").splitlines()]
    return [line for line in lines if line.strip(" ") and not line.endswith("] ")][-count:]


def _composing_variants(run_config: dict[str, Any]) -> list[dict[str, Any]]:
    """The composing models' config variants of one checkpointed run config."""
    found: list[dict[str, Any]] = []
    for mrc in run_config.get("_model_run_configs", []):
        found += list(mrc.get("_composing_config_variants", []))
    return found


def read_ensemble_results(run_dir: Path) -> dict[str, Any]:
    """Every measured ensemble configuration (its composing models' configs) and measurement,
    from Model Analyzer's latest checkpoint."""
    checkpoint = mar._latest_checkpoint(run_dir / "checkpoints")
    if checkpoint is None:
        return {"checkpoint": None, "configs": {}, "measurements": []}
    state = json.loads(checkpoint.read_text())
    results = state.get("ResultManager.results", {}).get("_results", {})
    configs: dict[str, dict[str, Any]] = {}
    measurements: list[dict[str, Any]] = []
    for _model, by_config in results.items():
        for config_name, (run_config, run_measurements) in by_config.items():
            composing = {}
            for variant in _composing_variants(run_config):
                pbtxt = mar.checkpoint_config_to_pbtxt(variant["model_config"])
                name = variant["model_config"]["name"]
                composing[name] = {
                    "variant": variant.get("variant_name"),
                    **mar.describe_config(pbtxt),
                    "config_pbtxt": pbtxt,
                }
            top = run_config["_model_run_configs"][0]["_model_config_variant"]
            configs[config_name] = {
                "ensemble_pbtxt": mar.checkpoint_config_to_pbtxt(top["model_config"]),
                "composing": composing,
            }
            for key, rcm in run_measurements.items():
                measurements.append(mar._measurement(config_name, key, rcm))
    measurements.sort(key=lambda m: (m["config"], m["concurrency"] or 0))
    return {"checkpoint": str(checkpoint), "configs": configs, "measurements": measurements}


def write_picked_repository(source: Path, target: Path, config: dict[str, Any]) -> None:
    """The pipeline repository with the picked configs: every model folder copied, the
    ensemble's and each composing model's ``config.pbtxt`` replaced by the one Model Analyzer
    measured."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    (target / ENSEMBLE / "config.pbtxt").write_text(config["ensemble_pbtxt"])
    for name, composing in config["composing"].items():
        (target / name / "config.pbtxt").write_text(composing["config_pbtxt"])


def summarize(
    run_dir: Path,
    cnn: str,
    pipeline: dict[str, Any],
    command: list[str],
    wall_s: float,
    code: int,
    interrupted: bool,
    bounds: dict[str, int],
) -> dict[str, Any]:
    data = read_ensemble_results(run_dir)
    measured = [m for m in data["measurements"] if m["throughput_infer_per_s"] is not None]

    def brief(m: dict[str, Any] | None) -> dict[str, Any] | None:
        if m is None:
            return None
        composing = data["configs"][m["config"]]["composing"]
        return {
            "config": m["config"],
            "composing": {
                n: {k: v for k, v in c.items() if k != "config_pbtxt"} for n, c in composing.items()
            },
            "concurrency": m["concurrency"],
            "throughput_infer_per_s": m["throughput_infer_per_s"],
            "p99_latency_us": m["p99_latency_us"],
        }

    best = max(measured, key=lambda m: m["throughput_infer_per_s"], default=None)
    within = [m for m in measured if (m["p99_latency_us"] or float("inf")) <= P99_BUDGET_US]
    best_within = max(within, key=lambda m: m["throughput_infer_per_s"], default=None)
    calls = mar.count_calls(run_dir)
    ok = code == 0 and best is not None and not interrupted
    return {
        "tool": "triton-model-analyzer",
        "tool_version": mar.MA_VERSION,
        "mode": "quick (ensemble)",
        "model": ENSEMBLE,
        "composing_models": list(COMPOSING),
        "pipeline": pipeline,
        "cnn": cnn,
        "search_bounds": bounds,
        "command": command,
        "wall_s": round(wall_s, 1),
        "exit_code": code,
        "interrupted": interrupted,
        "ok": ok,
        "decisive_log_lines": [] if ok else decisive_lines(run_dir / "model_analyzer.log"),
        "closing_log_lines": closing_lines(run_dir / "model_analyzer.log"),
        "perf_analyzer_flags": {**mar.PERF_ANALYZER_FLAGS, "protocol": "grpc", "batch_size": 1},
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


def run(
    out: Path,
    cnn: str,
    ma_venv: Path,
    tritonlab: Path,
    bounds: dict[str, int],
    repository: Path | None = None,
) -> dict[str, Any]:
    """One ensemble search; its ``result.json`` (written before returning). ``repository``: a
    pipeline repository written earlier (Model Analyzer only reads it); else one is written
    into the run folder."""
    ma_bin = ma_venv / "bin" / "model-analyzer"
    if not ma_bin.exists():
        raise SystemExit(f"{ma_bin} not found: run benchmarks/vs_model_analyzer/setup_ma.sh first")
    run_dir = (out / f"ensemble_{cnn}").resolve()
    if run_dir.exists():
        shutil.rmtree(run_dir)  # Model Analyzer resumes from a checkpoint it finds: start clean
    run_dir.mkdir(parents=True)
    wrappers = mar.write_wrappers(run_dir / "bin", run_dir, tritonlab)
    (run_dir / "wrappers.json").write_text(json.dumps(wrappers, indent=2) + "\n")
    if repository is None:
        repository = run_dir / "model_repository"
        pipeline = build_pipeline_repository(repository, cnn)
    else:
        repository = repository.resolve()
        pipeline = json.loads((repository / PIPELINE_MARKER).read_text())
    config = ma_ensemble_config(run_dir, repository, wrappers, **bounds)
    config_path = run_dir / "ma_config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    command = [str(ma_bin), "-v", "profile", "-f", str(config_path)]
    started = time.monotonic()
    code, interrupted = mar.run_model_analyzer(ma_bin, config_path, run_dir, wrappers)
    wall_s = time.monotonic() - started
    summary = summarize(run_dir, cnn, pipeline, command, wall_s, code, interrupted, bounds)
    if summary["best_throughput"] is not None:
        picked = run_dir / "picked_repository"
        write_picked_repository(
            repository, picked, summary["configs"][summary["best_throughput"]["config"]]
        )
        summary["picked_repository"] = str(picked)
    (run_dir / "result.json").write_text(json.dumps(summary, indent=2) + "\n")
    mar.log(
        f"ensemble ({cnn}): exit {code}, {wall_s:.0f} s, {summary['num_configs']} configs, "
        f"{summary['num_measurements']} measurements -> {run_dir / 'result.json'}"
    )
    for line in summary["decisive_log_lines"]:
        mar.log("  " + line)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cnn", choices=("tiny", "resnet18_cnn"), default="resnet18_cnn")
    parser.add_argument("--out", type=Path, required=True, help="results go to OUT/ensemble_CNN/")
    parser.add_argument("--ma-venv", type=Path, default=REPO / ".venv-ma")
    parser.add_argument("--tritonlab", type=Path, default=Path(sys.executable).parent / "tritonlab")
    parser.add_argument(
        "--repository",
        type=Path,
        help="a pipeline repository written earlier (default: write one into the run folder)",
    )
    parser.add_argument("--max-instances", type=int, default=MAX_INSTANCES)
    parser.add_argument("--max-batch", type=int, default=MAX_BATCH)
    parser.add_argument("--max-concurrency", type=int, default=MAX_CONCURRENCY)
    args = parser.parse_args(argv)
    bounds = {
        "max_instances": args.max_instances,
        "max_batch": args.max_batch,
        "max_concurrency": args.max_concurrency,
    }
    summary = run(args.out, args.cnn, args.ma_venv, args.tritonlab, bounds, args.repository)
    if summary["interrupted"]:
        return 130
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
