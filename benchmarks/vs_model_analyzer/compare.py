#!/usr/bin/env python3
"""tritonlab tune against Triton Model Analyzer 1.44.0, side by side, in one run on one machine.

    .venv/bin/python benchmarks/vs_model_analyzer/compare.py --out benchmarks/results

In order, each timed by its wall clock:
1. Model Analyzer's brute search and its quick search on the demo MLP (``model_analyzer_run.py``:
   the same tritonserver and perf_analyzer, gRPC, batch 1, 2000 ms windows, stability 25%);
2. ``tritonlab tune simple_mlp`` (goal throughput, no latency budget) and
   ``tritonlab tune simple_mlp --p99-budget-ms 10``, with the same perf_analyzer settings;
3. every pick re-measured by the same tool (tritonlab's block engine, one server, every pick
   loaded at once): ``--rounds`` rounds (default 20), each round every pick once at the
   concurrency its tool chose and once at a common concurrency, in a shuffled order.

Writes ``OUT/vs_model_analyzer.json`` (every figure) and ``OUT/vs_model_analyzer.md`` (the
tables quoted in the README); the working folders (MA's checkpoints and logs, the tune runs,
the re-measured cells) stay under ``--work``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
P99_BUDGET_US = 10_000.0
sys.path.insert(0, str(REPO / "src"))  # tritonlab from this checkout, imported where used
COMMON_CONCURRENCY = 16  # inside Model Analyzer's brute grid, so every pick has a figure there
SERVING_KEYS = (
    "dynamic_batching",
    "max_queue_delay_us",
    "preferred_batch_sizes",
    "max_batch_size",
    "instance_count",
    "intra_op_threads",
)


def log(message: str) -> None:
    print(f"[compare {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def timed(command: list[str], log_path: Path) -> float:
    """Run ``command`` (an argument list, no shell), its output to ``log_path``; wall seconds."""
    log("running " + " ".join(command[:4]) + " ...")
    started = time.monotonic()
    with open(log_path, "w") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"{command[:3]} failed with exit code {code}; see {log_path}")
    log(f"done in {wall:.0f} s")
    return wall


def run_model_analyzer(mode: str, work: Path) -> dict[str, Any]:
    timed(
        [sys.executable, str(HERE / "model_analyzer_run.py"), "--mode", mode, "--out", str(work)],
        work / f"ma_{mode}.log",
    )
    return dict(json.loads((work / mode / "result.json").read_text()))


def run_tune(work: Path, name: str, extra: list[str], tritonlab: Path) -> dict[str, Any]:
    out = work / name
    wall = timed(
        [str(tritonlab), "tune", "simple_mlp", "--out", str(out), "--fresh", *extra],
        work / f"{name}.log",
    )
    from tritonlab.experiments.store import read_result

    record = dict(read_result(out / "results" / "tune.json"))
    record["wall_s"] = round(wall, 1)
    return record


def _ma_variant(entry: dict[str, Any]) -> dict[str, Any]:
    serving = entry["serving"]
    return {k: serving.get(k) for k in SERVING_KEYS if k in serving}


def _tune_variant(entry: dict[str, Any]) -> dict[str, Any]:
    c = entry["configuration"]
    return {
        "dynamic_batching": c["batching"],
        "max_queue_delay_us": 0,
        "preferred_batch_sizes": [],
        "max_batch_size": c["max_batch"],
        "instance_count": c["instances"],
        "intra_op_threads": c["threads"],
    }


def picks_of(ma: dict[str, dict[str, Any]], tunes: dict[str, dict[str, Any]]) -> list[dict]:
    """One entry per pick: who picked it, for which goals, the serving fields and the load
    (a tool's same configuration at the same load for both goals is one pick)."""
    picks: list[dict[str, Any]] = []
    for mode, result in ma.items():
        for goal, key in (
            ("throughput", "best_throughput"),
            ("p99<=10ms", "best_within_p99_budget"),
        ):
            entry = result.get(key)
            if not entry:
                continue
            tool = f"Model Analyzer {mode}"
            same = [
                p
                for p in picks
                if p["tool"] == tool
                and p["serving"] == _ma_variant(entry)
                and p["concurrency"] == int(entry["concurrency"])
            ]
            if same:
                same[0]["goals"].append(goal)
                continue
            picks.append(
                {
                    "name": f"ma_{mode}_{'thr' if goal == 'throughput' else 'p99'}",
                    "tool": tool,
                    "goals": [goal],
                    "serving": _ma_variant(entry),
                    "concurrency": int(entry["concurrency"]),
                    "protocol": "grpc",
                    "reported_throughput_infer_per_s": entry["throughput_infer_per_s"],
                    "reported_p99_us": entry["p99_latency_us"],
                }
            )
    for name, record in tunes.items():
        entry = record.get("pick")
        if entry:
            picks.append(
                {
                    "name": name,
                    "tool": "tritonlab tune",
                    "goals": ["throughput" if name == "tune_thr" else "p99<=10ms"],
                    "serving": _tune_variant(entry),
                    "concurrency": int(entry["concurrency"]),
                    "protocol": entry["configuration"]["protocol"],
                    "reported_throughput_infer_per_s": entry["throughput_infer_per_s"]["median"],
                    "reported_p99_us": entry["latency_p99_us"]["median"],
                }
            )
    return picks


def remeasure(picks: list[dict[str, Any]], work: Path, rounds: int) -> list[dict[str, Any]]:
    """Every pick at its own load and at the common one, ``rounds`` interleaved rounds, by
    tritonlab's cell runner on one server; the cells stay in ``work/remeasure``."""
    from tritonlab.experiments.blocks import ENGINE_BLOCKS, BlockSession
    from tritonlab.experiments.manifest import available_cores
    from tritonlab.experiments.plan import ExperimentPlan, LoadPoint, MeasurementSettings
    from tritonlab.experiments.runner import open_session
    from tritonlab.experiments.session import cell_id
    from tritonlab.experiments.store import cell_path, read_cell
    from tritonlab.models.inputs import derive_inputs
    from tritonlab.models.zoo import export_builtin
    from tritonlab.perf.locate import locate_perf_analyzer
    from tritonlab.pipeline.project import load_model_info
    from tritonlab.repository.layout import add_model
    from tritonlab.repository.variants import ServingVariant
    from tritonlab.server.launch import ServerOptions

    run_dir = work / "remeasure"
    shutil.rmtree(run_dir, ignore_errors=True)  # never reuse cells of an earlier benchmark run
    onnx = export_builtin("simple_mlp", work / "simple_mlp.onnx").onnx_path
    info = load_model_info(onnx)
    inputs = derive_inputs(info)
    variants = []
    for pick in picks:
        fields = dict(pick["serving"])
        fields["preferred_batch_sizes"] = tuple(fields.get("preferred_batch_sizes") or ())
        variants.append(
            ServingVariant(pick["name"], f"{pick['tool']} ({', '.join(pick['goals'])})", **fields)
        )
    models = [add_model(run_dir / "models", info, "simple_mlp", v) for v in variants]
    loads = {pick["name"]: sorted({pick["concurrency"], COMMON_CONCURRENCY}) for pick in picks}
    every_load = sorted(
        {LoadPoint(p["protocol"], 1, c) for p in picks for c in loads[p["name"]]},
        key=lambda ld: ld.key,
    )
    plan = ExperimentPlan(
        "simple_mlp",
        tuple(variants),
        (LoadPoint(),),
        rounds,
        MeasurementSettings(engine=ENGINE_BLOCKS),
    )
    perf = locate_perf_analyzer()
    with open_session(
        ServerOptions(), run_dir, info, inputs, plan, "remeasure", perf, models[0]
    ) as session:
        # The block engine: every pick loaded at once, warmed up, short cells in a shuffled
        # order per round, the interference monitor on (experiments/blocks.py).
        session.engine = BlockSession.start(
            session, models, every_load, info.file_size_bytes, "remeasure", available_cores()
        )
        session.total = rounds * sum(len(v) for v in loads.values())
        ids: list[str] = []
        for repeat in range(rounds):
            log(f"round {repeat + 1} of {rounds}")
            round_ = [
                (model, [(LoadPoint(pick["protocol"], 1, c), repeat) for c in loads[pick["name"]]])
                for pick, model in zip(picks, models, strict=True)
            ]
            session.measure_rounds([round_], ids)
    rows = []
    for pick, model in zip(picks, models, strict=True):
        for c in loads[pick["name"]]:
            cells = []
            for repeat in range(rounds):
                path = cell_path(
                    run_dir, cell_id(model.variant.name, LoadPoint(pick["protocol"], 1, c), repeat)
                )
                if path.exists():
                    cells.append(read_cell(path))
            thr = [x.perf.measurement.throughput_infer_per_s for x in cells if x.perf.measurement]
            p99 = [x.perf.measurement.latency_p99_us for x in cells if x.perf.measurement]
            rows.append(
                {
                    "pick": pick["name"],
                    "concurrency": c,
                    "own_load": c == pick["concurrency"],
                    "rounds": len(thr),
                    "throughput_infer_per_s": thr,
                    "p99_us": p99,
                }
            )
    return rows


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def verdicts(rows: list[dict[str, Any]], picks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """tune's picks against each Model Analyzer pick for the same goal, paired by round."""
    from tritonlab.analysis.summary import Summary
    from tritonlab.analysis.verdicts import compare

    own = {r["pick"]: r for r in rows if r["own_load"]}
    out = []
    for tune in (p for p in picks if p["tool"] == "tritonlab tune"):
        goal = tune["goals"][0]
        for ma in (p for p in picks if p["tool"] != "tritonlab tune" and goal in p["goals"]):
            a, b = own[ma["name"]], own[tune["name"]]
            verdict = compare(
                "throughput",
                Summary.of(a["throughput_infer_per_s"]),
                Summary.of(b["throughput_infer_per_s"]),
            )
            out.append(
                {
                    "tune": tune["name"],
                    "against": ma["name"],
                    "goal": goal,
                    "verdict": verdict.to_dict(),
                    "phrase": verdict.phrase(),
                }
            )
    return out


def _fmt_range(values: list[float], scale: float = 1.0, digits: int = 0) -> str:
    if not values:
        return "n/a"
    med = statistics.median(values) / scale
    lo, hi = min(values) / scale, max(values) / scale
    return f"{med:,.{digits}f} ({lo:,.{digits}f}–{hi:,.{digits}f})"


def _serving_text(serving: dict[str, Any]) -> str:
    batching = "batching" if serving.get("dynamic_batching") else "no batching"
    delay = serving.get("max_queue_delay_us") or 0
    if serving.get("dynamic_batching") and delay:
        batching += f" {delay} µs"
    threads = serving.get("intra_op_threads")
    return (
        f"{serving.get('instance_count')} inst, {batching}, max batch "
        f"{serving.get('max_batch_size')}, threads {threads if threads else 'default'}"
    )


def markdown(data: dict[str, Any]) -> str:
    m = data["machine"]
    lines = [
        "# tritonlab tune against Triton Model Analyzer 1.44.0",
        "",
        f"Measured {data['date_utc']} on {m['cpu']} ({m['cores']} cores, no GPU): tritonserver "
        "2.51.0 and perf_analyzer 2.51.0 for both tools; the demo MLP (256 -> 1024 -> 10), "
        "gRPC, batch 1, 2000 ms windows, stability 25%. Command: "
        "`make ma-bench` (`benchmarks/vs_model_analyzer/compare.py`).",
        "",
        "## The searches",
        "",
        "| search | wall s | perf_analyzer runs / cells | configurations | its pick (throughput) "
        "| as it reported | its pick under p99 10 ms | as it reported |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for search in data["searches"]:
        lines.append(
            f"| {search['name']} | {search['wall_s']:.0f} | {search['measurements']} | "
            f"{search['configurations']} | {search['pick_thr']} | {search['reported_thr']} | "
            f"{search['pick_p99']} | {search['reported_p99']} |"
        )
    lines += [
        "",
        f"## Every pick re-measured by the same tool ({data['rounds']} interleaved rounds)",
        "",
        'Median (min–max) over the rounds; p99 in ms. "own load" is the concurrency the tool '
        f"chose; the common load is concurrency {COMMON_CONCURRENCY}.",
        "",
        "| pick | configuration | load | infer/s | p99 ms | p99 <= 10 ms every round |",
        "|---|---|---|---|---|---|",
    ]
    serving = {p["name"]: p for p in data["picks"]}
    for row in data["remeasured"]:
        pick = serving[row["pick"]]
        load = f"c{row['concurrency']}" + (" (own)" if row["own_load"] else "")
        meets = bool(row["p99_us"]) and max(row["p99_us"]) <= P99_BUDGET_US
        lines.append(
            f"| {row['pick']} | {_serving_text(pick['serving'])} | {load} | "
            f"{_fmt_range(row['throughput_infer_per_s'])} | "
            f"{_fmt_range(row['p99_us'], 1000, 2)} | {'yes' if meets else 'no'} |"
        )
    lines += ["", "## Verdicts (throughput at each pick's own load, paired by round)", ""]
    for v in data["verdicts"]:
        lines.append(
            f"- {v['tune']}'s throughput relative to {v['against']}'s ({v['goal']}): {v['phrase']}"
        )
    lines += ["", "## Against the targets", ""]
    lines += [f"- {line}" for line in data["targets"]]
    lines.append("")
    return "\n".join(lines)


def targets(data: dict[str, Any]) -> list[str]:
    """The issue's targets, stated with the re-measured figures and the wall-time ratios."""
    own = {r["pick"]: r for r in data["remeasured"] if r["own_load"]}
    walls = {s["name"]: s["wall_s"] for s in data["searches"]}
    out = []
    for goal, tune_name in (("throughput", "tune_thr"), ("p99<=10ms", "tune_p99")):
        if tune_name not in own:
            out.append(f"{goal}: tune made no pick")
            continue
        tune_rate = _median(own[tune_name]["throughput_infer_per_s"]) or 0.0
        ma_names = [
            p["name"] for p in data["picks"] if p["tool"] != "tritonlab tune" and goal in p["goals"]
        ]
        if goal != "throughput":  # only picks that kept the budget in every round count
            ma_names = [
                n for n in ma_names if own[n]["p99_us"] and max(own[n]["p99_us"]) <= P99_BUDGET_US
            ]
        best_ma = max(
            ma_names, key=lambda n: _median(own[n]["throughput_infer_per_s"]) or 0.0, default=None
        )
        best_rate = _median(own[best_ma]["throughput_infer_per_s"]) if best_ma else None
        mode_walls = {n: walls[f"Model Analyzer {n.split('_')[1]}"] for n in ma_names}
        if goal == "throughput" and best_ma:
            ref_wall = mode_walls[best_ma]
            ref_text = f"the wall time of the mode that found it ({best_ma}: {ref_wall:.0f} s)"
        else:
            ref_wall = min(walls[k] for k in walls if k.startswith("Model Analyzer"))
            ref_text = f"the faster Model Analyzer mode's wall time ({ref_wall:.0f} s)"
        tune_p99s = own[tune_name]["p99_us"]
        kept = ""
        if goal != "throughput":
            worst = max(tune_p99s) / 1000 if tune_p99s else float("nan")
            held = bool(tune_p99s) and max(tune_p99s) <= P99_BUDGET_US
            kept = (
                f" (its p99 held the budget in every re-measured round, worst {worst:.2f} ms)"
                if held
                else f" (its p99 broke the budget when re-measured: worst {worst:.2f} ms)"
            )
        ratio_rate = tune_rate / best_rate if best_rate else float("nan")
        ratio_wall = walls[f"tritonlab tune ({goal})"] / ref_wall
        verdict = next(
            (v for v in data["verdicts"] if v["tune"] == tune_name and v["against"] == best_ma),
            None,
        )
        paired = f"; paired by round: {verdict['phrase']}" if verdict else ""
        out.append(
            f"{goal}: tune's pick re-measured at {tune_rate:,.0f} infer/s{kept} against the best "
            f"Model Analyzer pick's {best_rate or 0:,.0f} ({best_ma}): ratio of medians "
            f"{ratio_rate:.2f}{paired} "
            f"(target >= 1); tune's wall time {walls[f'tritonlab tune ({goal})']:.0f} s is "
            f"{ratio_wall:.2f}x {ref_text} (target <= 0.5)"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--work", type=Path, default=REPO / "runs" / "vs_model_analyzer")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--remeasure-only",
        action="store_true",
        help="keep the searches in --work (searches.json) and only re-measure their picks",
    )
    parser.add_argument("--tritonlab", type=Path, default=Path(sys.executable).parent / "tritonlab")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    searches_file = work / "searches.json"
    if args.remeasure_only:
        stored = json.loads(searches_file.read_text())
        ma, tunes = stored["model_analyzer"], stored["tune"]
    else:
        subprocess.run(["bash", str(HERE / "setup_ma.sh")], check=True)
        ma = {mode: run_model_analyzer(mode, work) for mode in ("brute", "quick")}
        tunes = {
            "tune_thr": run_tune(work, "tune_thr", ["--keep-protocol"], args.tritonlab),
            "tune_p99": run_tune(
                work, "tune_p99", ["--keep-protocol", "--p99-budget-ms", "10"], args.tritonlab
            ),
        }
        searches_file.write_text(json.dumps({"model_analyzer": ma, "tune": tunes}, indent=2) + "\n")
    picks = picks_of(ma, tunes)
    rows = remeasure(picks, work / "remeasured", args.rounds)

    def pick_text(tool: str, goal: str) -> tuple[str, str]:
        pick = next((p for p in picks if p["tool"] == tool and goal in p["goals"]), None)
        if pick is None:
            return "none", "n/a"
        reported = (
            f"{pick['reported_throughput_infer_per_s']:,.0f} infer/s, p99 "
            f"{(pick['reported_p99_us'] or 0) / 1000:.2f} ms"
        )
        return f"{_serving_text(pick['serving'])}, c{pick['concurrency']}", reported

    searches = []
    for mode, result in ma.items():
        thr, thr_rep = pick_text(f"Model Analyzer {mode}", "throughput")
        p99, p99_rep = pick_text(f"Model Analyzer {mode}", "p99<=10ms")
        searches.append(
            {
                "name": f"Model Analyzer {mode}",
                "wall_s": result["wall_s"],
                "measurements": result["num_perf_analyzer_runs"],
                "configurations": result["num_configs"],
                "pick_thr": thr,
                "reported_thr": thr_rep,
                "pick_p99": p99,
                "reported_p99": p99_rep,
            }
        )
    for name, record in tunes.items():
        goal = "throughput" if name == "tune_thr" else "p99<=10ms"
        text, reported = pick_text("tritonlab tune", goal)
        configurations = len(
            {
                json.dumps(s["configuration"], sort_keys=True)
                for s in record["steps"]
                if s.get("configuration")
            }
        )
        searches.append(
            {
                "name": f"tritonlab tune ({goal})",
                "wall_s": record["wall_s"],
                "measurements": record["cells_measured"],
                "configurations": configurations,
                "pick_thr": text if goal == "throughput" else "—",
                "reported_thr": reported if goal == "throughput" else "—",
                "pick_p99": text if goal != "throughput" else "—",
                "reported_p99": reported if goal != "throughput" else "—",
                "stop_reason": record["stop_reason"],
            }
        )
    from tritonlab.experiments.manifest import MachineInfo

    machine = MachineInfo.current().to_dict()
    data: dict[str, Any] = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": {
            "cpu": machine.get("cpu_model") or platform.processor(),
            "cores": machine.get("cpu_affinity_count"),
            "platform": platform.platform(),
        },
        "rounds": args.rounds,
        "common_concurrency": COMMON_CONCURRENCY,
        "searches": searches,
        "picks": picks,
        "remeasured": rows,
        "verdicts": verdicts(rows, picks),
    }
    data["targets"] = targets(data)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "vs_model_analyzer.json").write_text(json.dumps(data, indent=2) + "\n")
    (args.out / "vs_model_analyzer.md").write_text(markdown(data))
    log(f"wrote {args.out / 'vs_model_analyzer.md'}")
    print(markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
