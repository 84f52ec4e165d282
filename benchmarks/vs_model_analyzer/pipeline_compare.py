#!/usr/bin/env python3
"""Model Analyzer's ensemble search and ``tritonlab tune`` on the built-in pipeline, side by
side, both picks re-measured by one tool (issue 23, item 6).

    .venv/bin/python benchmarks/vs_model_analyzer/pipeline_compare.py --out benchmarks/results

In order, each timed by its wall clock, on the same bundled tritonserver 2.51, the same
Python-based ``onnxruntime`` backend and the same perf_analyzer 2.51:
1. the pipeline repository (``write_pipeline_repository``: ``preprocess`` -> ``cnn`` (ResNet-18
   by default) -> ``postprocess``, the ensemble ``pipeline``), written once for both tools;
2. Model Analyzer 1.44.0's quick search on the ensemble, every composing model CPU-only
   (``ensemble_run.py``: bounded to a few configurations, 2000 ms windows, stability 25%);
3. ``tritonlab tune --repository REPO --model pipeline --time-budget S``; where it fails, the
   record says ``tritonlab tune failed: <first error line>`` and the benchmark goes on;
4. every pick re-measured by one tool (``remeasure.py``: the block engine on one server, every
   pick loaded at once under its own prefix): ``--rounds`` rounds, each pick over the
   protocol its tool chose, once at the concurrency its tool chose and once at a common
   concurrency, in a shuffled order (where the tools chose different protocols, the rows share
   the concurrency only, and the page says so).

Writes ``OUT/pipeline_vs_model_analyzer.json`` (every figure, every failure with its command,
exit status and decisive lines) and ``OUT/pipeline_vs_model_analyzer.md`` (rendered from the
JSON only, by ``pipeline_page.py``; ``--render`` rebuilds it). The working folders stay under
``--work``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "src"))  # tritonlab from this checkout, imported where used
sys.path.insert(0, str(HERE))

from pipeline_page import ENSEMBLE, markdown  # noqa: E402
from race_notes import tune_trust  # noqa: E402

RESULT_NAME = "pipeline_vs_model_analyzer"
COMMON_CONCURRENCY = 8
TUNE_TIME_BUDGET_S = 600.0
# Box-drawing characters typer frames its errors with.
_FRAME = "│╭╮╰╯─┃━┏┓┗┛"


def log(message: str) -> None:
    print(f"[pipeline-compare {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def first_error_line(output: str) -> str:
    """The line of a failed command's output that says what went wrong: the first line inside
    an error frame, else the first line naming an error, else the last non-empty line."""
    lines = [line.strip().strip(_FRAME).strip() for line in output.splitlines()]
    lines = [line for line in lines if line]
    for index, line in enumerate(lines):
        if re.fullmatch(r"Error", line) and index + 1 < len(lines):
            return lines[index + 1]
    for line in lines:
        if re.search(r"error|exception|failed|no such|not found", line, re.IGNORECASE):
            return line
    return lines[-1] if lines else "(no output)"


def run_logged(command: list[str], log_path: Path) -> tuple[int, float, str]:
    """Run ``command`` (an argument list, no shell), its output to ``log_path``; (exit status,
    wall seconds, output)."""
    log("running " + shlex.join(command[:6]) + (" ..." if len(command) > 6 else ""))
    started = time.monotonic()
    with open(log_path, "w") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.monotonic() - started
    log(f"exit {code} after {wall:.0f} s")
    return code, wall, log_path.read_text(errors="replace")


# --------------------------------------------------------------------------------------------
# The two searches
# --------------------------------------------------------------------------------------------


def write_repository(work: Path, cnn: str) -> tuple[Path, dict[str, Any]]:
    """The pipeline repository both tools read (neither writes into it), and what it holds."""
    from ensemble_run import build_pipeline_repository

    from tritonlab.models.pipeline_example import PIPELINE_CNNS

    root = work / "pipeline_repository"
    pipeline = build_pipeline_repository(root, cnn)
    pipeline["cnn_pixels"] = PIPELINE_CNNS[cnn].pixels
    return root, pipeline


def portable(value: Any, replacements: dict[str, str]) -> Any:
    """``value`` (JSON data) with every string's machine folders replaced, longest first
    (``{"/home/me/repo/": "", "/home/me": "$HOME"}``): a committed record names no folder of
    the machine that wrote it."""
    if isinstance(value, str):
        for old in sorted(replacements, key=len, reverse=True):
            value = value.replace(old, replacements[old])
        return value
    if isinstance(value, list):
        return [portable(v, replacements) for v in value]
    if isinstance(value, dict):
        return {k: portable(v, replacements) for k, v in value.items()}
    return value


def run_model_analyzer(work: Path, repository: Path, cnn: str, ma_args: list[str]) -> dict:
    """Model Analyzer's ensemble search (``ensemble_run.py``); its result.json, or a record of
    how it failed before writing one."""
    command = [
        sys.executable, str(HERE / "ensemble_run.py"), "--cnn", cnn, "--out", str(work),
        "--repository", str(repository), *ma_args,
    ]  # fmt: skip
    code, wall, output = run_logged(command, work / "ma_ensemble.log")
    result_path = work / f"ensemble_{cnn}" / "result.json"
    if result_path.exists():
        return dict(json.loads(result_path.read_text()))
    return {
        "ok": False,
        "command": command,
        "exit_code": code,
        "wall_s": round(wall, 1),
        "decisive_log_lines": [first_error_line(output)],
    }


def run_tune(work: Path, repository: Path, budget_s: float, tritonlab: Path) -> dict[str, Any]:
    """``tritonlab tune`` on the repository's ensemble; never raises: a failure is recorded
    as ``tritonlab tune failed: <first error line>``."""
    out = work / "tune"
    command = [
        str(tritonlab), "tune", "--repository", str(repository), "--model", ENSEMBLE,
        "--out", str(out), "--time-budget", f"{budget_s:g}", "--fresh",
    ]  # fmt: skip
    code, wall, output = run_logged(command, work / "tune.log")
    record: dict[str, Any] = {
        "command": [Path(command[0]).name, *command[1:]],
        "exit_code": code,
        "wall_s": round(wall, 1),
        "out": str(out),
    }
    if code != 0:
        record["ok"] = False
        record["error"] = f"tritonlab tune failed: {first_error_line(output)}"
        return record
    try:
        from tritonlab.decisions.tune_record import TuneRecord
        from tritonlab.result_files import load_record
        from tritonlab.run_layout import RunLayout

        tune = load_record(RunLayout(out).tune, TuneRecord)
    except Exception as exc:  # a record from a newer tune: say so, keep the benchmark going
        tune = None
        record["error"] = f"tritonlab tune's record could not be read: {exc}"
    if tune is None or tune.pick is None:
        record["ok"] = False
        record.setdefault("error", "tritonlab tune made no pick")
        return record
    pick = tune.pick
    record.update(
        {
            "ok": True,
            "stop_reason": tune.stop_reason,
            "race_rounds": len({s.repeat for s in tune.steps if s.phase == "race"}),
            "trust": tune_trust(out),  # whether an A/A control was measured, for the page
            "cells_measured": tune.cells_measured,
            "configurations": len({s.configuration for s in tune.steps if s.configuration}),
            "pick": {
                "knobs": pick.configuration.to_dict(),
                "description": pick.description,
                "concurrency": pick.concurrency,
                "protocol": pick.configuration.protocol,
                "throughput_infer_per_s": pick.throughput_infer_per_s.median,
                "p99_latency_us": pick.latency_p99_us.median,
            },
        }
    )
    return record


def tune_pick_repository(repository: Path, tune: dict[str, Any], target: Path) -> Path:
    """tune's pick as a repository: the whole pipeline tune wrote under its run folder's
    ``pick/`` (the step it tuned patched, the other steps and the ensemble as configured)."""
    import shutil

    from tritonlab.run_layout import RunLayout

    pick = RunLayout(Path(tune["out"])).pick
    if not (pick / ENSEMBLE / "config.pbtxt").is_file():
        raise FileNotFoundError(f"{pick}: tune wrote no pick of {ENSEMBLE}")
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(pick, target)
    return target


# --------------------------------------------------------------------------------------------
# Re-measuring both picks
# --------------------------------------------------------------------------------------------


def pick_models(repository: Path) -> tuple[str, ...]:
    """The ensemble and its steps: what one pick of the pipeline serves."""
    from tritonlab.repository.user_repo import read_user_model

    return (*read_user_model(repository, ENSEMBLE).steps, ENSEMBLE)


def one_frame_reference(repository: Path, target: Path) -> Path:
    """The pipeline's reference answer cut to its first frame: the check before re-measuring
    sends it, and a pick whose ensemble takes batches of one (Model Analyzer sets the ensemble's
    max_batch_size to its smallest step's) must accept it."""
    import numpy as np

    from tritonlab.models.pipeline_example import REFERENCE_FILE

    with np.load(repository / REFERENCE_FILE, allow_pickle=False) as data:
        arrays = {name: data[name][:1] for name in data.files}
    with open(target, "wb") as out:
        np.savez(out, **arrays)
    return target


def remeasure_picks(
    work: Path, repository: Path, picks: list[dict[str, Any]], rounds: int
) -> list[dict[str, Any]]:
    """Both picks on one server (each pick's models under its own prefix), by the block engine
    (``remeasure.py``); the first pick's answers are checked against the pipeline's reference
    (its first frame) before anything is measured."""
    from remeasure import PickToMeasure, copy_prefixed, fresh_run_dir, remeasure

    from tritonlab.models.inputs import derive_inputs
    from tritonlab.pipeline.project import load_repository_info
    from tritonlab.repository.config import read_config
    from tritonlab.repository.layout import RepositoryModel
    from tritonlab.repository.variants import ServingVariant
    from tritonlab.server.launch import ServerOptions

    run_dir = work / "remeasure"
    models_dir = fresh_run_dir(run_dir)
    reference = one_frame_reference(repository, work / "reference_one_frame.npz")
    info = load_repository_info(repository, ENSEMBLE, ServerOptions(), reference=reference)
    to_measure = []
    for pick in picks:
        pick_repo = Path(pick["repository"])
        names = pick_models(pick_repo)
        served = copy_prefixed(pick_repo, names, models_dir, pick["name"])
        batch = read_config(pick_repo / ENSEMBLE / "config.pbtxt").max_batch_size
        variant = ServingVariant(pick["name"], pick["tool"], max_batch_size=max(batch, 1))
        called = tuple((n, served[n]) for n in names if n != ENSEMBLE)
        model = RepositoryModel(served[ENSEMBLE], variant, models_dir / served[ENSEMBLE], called)
        to_measure.append(
            PickToMeasure(pick["name"], model, pick["protocol"], int(pick["concurrency"]))
        )
    rows = remeasure(
        run_dir, info, derive_inputs(info), ENSEMBLE, to_measure, COMMON_CONCURRENCY, rounds, log
    )
    return [row.to_dict() for row in rows]


# --------------------------------------------------------------------------------------------
# The record and its rendering
# --------------------------------------------------------------------------------------------


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions(ma_venv: Path, server_logs: list[Path]) -> dict[str, str | None]:
    """Every tool's version: Model Analyzer from its own venv, tritonserver from the first of
    ``server_logs`` that names it, the rest from this environment."""
    from tritonlab.perf.locate import locate_perf_analyzer

    ma = subprocess.run(
        [
            str(ma_venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('triton-model-analyzer'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    server = None
    for server_log in server_logs:
        if server is None and server_log.exists():
            text = server_log.read_text(errors="replace")
            found = re.search(r"server_version\s*\|\s*(\S+)", text)
            server = found.group(1) if found else None
    try:
        perf = locate_perf_analyzer().version
    except Exception:
        perf = None
    return {
        "triton-model-analyzer": ma or None,
        "tritonserver": server,
        "perf_analyzer": perf,
        "tritonlab": _version("tritonlab"),
        "nvidia-pytriton": _version("nvidia-pytriton"),
        "tritonclient": _version("tritonclient"),
        "onnxruntime": _version("onnxruntime"),
        "torch": _version("torch"),
    }


def ma_pick_configs(ma: dict[str, Any]) -> dict[str, Any]:
    """Model Analyzer's pick as served: each model's ``config.pbtxt`` (the ensemble's first)
    and the ensemble's max_batch_size."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    best = ma.get("best_throughput")
    if not best:
        return {}
    config = ma["configs"][best["config"]]
    ensemble = text_format.Parse(config["ensemble_pbtxt"], model_config_pb2.ModelConfig())
    return {
        "ensemble_max_batch_size": int(ensemble.max_batch_size),
        "config_pbtxt": {
            ENSEMBLE: config["ensemble_pbtxt"],
            **{name: c["config_pbtxt"] for name, c in config["composing"].items()},
        },
    }


def failures_of(ma: dict[str, Any], tune: dict[str, Any]) -> list[dict[str, Any]]:
    """What failed, each with its command, exit status, decisive lines and why."""
    out = []
    if not ma.get("ok"):
        out.append(
            {
                "what": "Model Analyzer's ensemble search",
                "command": ma.get("command", []),
                "exit_code": ma.get("exit_code"),
                "lines": ma.get("decisive_log_lines") or ["(no line names an error)"],
                "why": "Model Analyzer made no pick for the ensemble (see its log in the work "
                "folder, `ensemble_<cnn>/model_analyzer.log`).",
            }
        )
    if not tune.get("ok"):
        out.append(
            {
                "what": "tritonlab tune on the ensemble",
                "command": tune["command"],
                "exit_code": tune["exit_code"],
                "lines": [tune.get("error", "tritonlab tune failed")],
                "why": "`tritonlab tune --repository DIR --model NAME` is being built; until it "
                "lands the tune half records its failure and only Model Analyzer's pick is "
                "re-measured.",
            }
        )
    return out


def render(out: Path) -> None:
    data = json.loads((out / f"{RESULT_NAME}.json").read_text())
    (out / f"{RESULT_NAME}.md").write_text(markdown(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--work", type=Path, default=REPO / "runs" / "pipeline_vs_model_analyzer")
    parser.add_argument("--cnn", choices=("resnet18_cnn", "tiny"), default="resnet18_cnn")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tune-time-budget", type=float, default=TUNE_TIME_BUDGET_S)
    parser.add_argument("--ma-venv", type=Path, default=REPO / ".venv-ma")
    parser.add_argument("--tritonlab", type=Path, default=Path(sys.executable).parent / "tritonlab")
    parser.add_argument(
        "--ma-arg",
        action="append",
        default=[],
        help="passed on to ensemble_run.py (e.g. --ma-arg=--max-instances=3)",
    )
    parser.add_argument(
        "--remeasure-only",
        action="store_true",
        help="keep the searches stored in --work (searches.json) and only re-measure their picks",
    )
    parser.add_argument(
        "--render", action="store_true", help="measure nothing: rewrite the .md from the .json"
    )
    args = parser.parse_args(argv)
    if args.render:
        render(args.out)
        return 0
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    searches_file = work / "searches.json"
    if args.remeasure_only:
        stored = json.loads(searches_file.read_text())
        pipeline, ma, tune = stored["pipeline"], stored["model_analyzer"], stored["tune"]
        repository = Path(stored["repository"])
    else:
        subprocess.run(["bash", str(HERE / "setup_ma.sh"), str(args.ma_venv)], check=True)
        repository, pipeline = write_repository(work, args.cnn)
        ma_args = [
            "--ma-venv", str(args.ma_venv), "--tritonlab", str(args.tritonlab), *args.ma_arg
        ]  # fmt: skip
        ma = run_model_analyzer(work, repository, args.cnn, ma_args)
        tune = run_tune(work, repository, args.tune_time_budget, args.tritonlab)
        stored = {
            "repository": str(repository),
            "pipeline": pipeline,
            "model_analyzer": ma,
            "tune": tune,
        }
        searches_file.write_text(json.dumps(stored, indent=2) + "\n")

    picks: list[dict[str, Any]] = []
    if ma.get("best_throughput") and ma.get("picked_repository"):
        picks.append(
            {
                "name": "ma",
                "tool": "Model Analyzer quick (ensemble)",
                "repository": ma["picked_repository"],
                "concurrency": ma["best_throughput"]["concurrency"],
                "protocol": "grpc",
            }
        )
    notes = [
        "Model Analyzer's pick is its best throughput over every measurement its checkpoint "
        "holds (the quick search and the concurrency sweep after it), as Model Analyzer ranks "
        "its results for the default objective (throughput); `<model>_config_default` is the "
        "repository's own configuration, which Model Analyzer always measures too.",
        "Model Analyzer changes every composing model (instances, max_batch_size, dynamic "
        "batching on); tritonlab tune changes one step of the ensemble, the one its opening "
        "probe found binding (its log names the step and the probe's figures), and leaves the "
        "other steps as written.",
        "Client and server share the 2 cores: single figures are noisy; compare the "
        "re-measured medians and their ranges, not the figures each tool reported.",
    ]
    if tune.get("ok"):
        try:
            target = tune_pick_repository(repository, tune, work / "tune_pick_repository")
            picks.append(
                {
                    "name": "tune",
                    "tool": "tritonlab tune",
                    "repository": str(target),
                    "concurrency": tune["pick"]["concurrency"],
                    "protocol": tune["pick"]["protocol"],
                }
            )
        except Exception as exc:  # tune's record for a repository may change shape
            notes.append(f"tune's pick could not be served for re-measuring: {exc}")
    rows: list[dict[str, Any]] = []
    remeasure_note = ""
    if picks:
        try:
            rows = remeasure_picks(work, repository, picks, args.rounds)
        except Exception as exc:
            remeasure_note = f"re-measuring failed: {first_error_line(str(exc))}"
            log(remeasure_note)
    else:
        remeasure_note = "neither tool made a pick"

    from tritonlab.experiments.manifest import MachineInfo

    machine = MachineInfo.current().to_dict()
    from tritonlab.run_layout import RunLayout

    server_logs = [
        work / f"ensemble_{args.cnn}" / "tritonserver.log",
        RunLayout(work / "remeasure").server_log,
    ]
    data: dict[str, Any] = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": {
            "cpu": machine.get("cpu_model") or platform.processor(),
            "cores": machine.get("cpu_affinity_count"),
            "platform": platform.platform(),
        },
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip(),
        "versions": versions(args.ma_venv, server_logs),
        "pipeline": pipeline,
        "rounds": args.rounds,
        "common_concurrency": COMMON_CONCURRENCY,
        "tune_time_budget_s": args.tune_time_budget,
        "model_analyzer": {k: v for k, v in ma.items() if k not in ("configs", "measurements")},
        "model_analyzer_pick_configs": ma_pick_configs(ma),
        "model_analyzer_measurements": ma.get("measurements", []),
        "tune": tune,
        "picks": picks,
        "remeasured": rows,
        "remeasure_note": remeasure_note,
        "failures": failures_of(ma, tune),
        "notes": notes,
    }
    data = portable(
        data,
        {
            f"{work}/": "$WORK/",
            f"{REPO}/": "",
            f"{sys.prefix}/": "$VIRTUAL_ENV/",
            str(Path.home()): "$HOME",
        },
    )
    data["work"] = portable(str(work), {f"{REPO}/": "", str(Path.home()): "$HOME"})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{RESULT_NAME}.json").write_text(json.dumps(data, indent=2) + "\n")
    (args.out / f"{RESULT_NAME}.md").write_text(markdown(data))
    log(f"wrote {args.out / f'{RESULT_NAME}.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
