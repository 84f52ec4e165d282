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
sys.path.insert(0, str(HERE))

from operating_points import own_loads, points_text  # noqa: E402
from race_notes import noise_check_note, race_rounds, tune_pick_notes, tune_trust  # noqa: E402
from remeasure import median_range_text  # noqa: E402

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
    from tritonlab.result_files import read_result

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
    tritonlab's block engine on one server (``remeasure.py``); the cells stay in ``work``."""
    from remeasure import PickToMeasure, fresh_run_dir
    from remeasure import remeasure as remeasure_picks

    from tritonlab.models.inputs import derive_inputs
    from tritonlab.models.zoo import export_builtin
    from tritonlab.pipeline.project import load_model_info
    from tritonlab.repository.layout import add_model
    from tritonlab.repository.variants import ServingVariant

    run_dir = work / "remeasure"
    models_dir = fresh_run_dir(run_dir)  # never reuse cells of an earlier benchmark run
    onnx = export_builtin("simple_mlp", run_dir / "simple_mlp.onnx").onnx_path
    info = load_model_info(onnx)
    to_measure = []
    for pick in picks:
        fields = dict(pick["serving"])
        fields["preferred_batch_sizes"] = tuple(fields.get("preferred_batch_sizes") or ())
        variant = ServingVariant(
            pick["name"], f"{pick['tool']} ({', '.join(pick['goals'])})", **fields
        )
        model = add_model(models_dir, info, "simple_mlp", variant)
        to_measure.append(
            PickToMeasure(pick["name"], model, pick["protocol"], int(pick["concurrency"]))
        )
    rows = remeasure_picks(
        run_dir, info, derive_inputs(info), "simple_mlp", to_measure, COMMON_CONCURRENCY, rounds,
        log,
    )  # fmt: skip
    return [row.to_dict() for row in rows]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def verdicts(rows: list[dict[str, Any]], picks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """tune's picks against each Model Analyzer pick for the same goal, paired by round."""
    from tritonlab.stats.summary import Summary
    from tritonlab.stats.verdicts import compare

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


def placement_note(data: dict[str, Any]) -> str:
    """Where the re-measurement predates the CPU split and the process term, that it does."""
    from tritonlab.stats.process_term import predates_note

    return predates_note(data, "This re-measurement")


def markdown(data: dict[str, Any]) -> str:
    m = data["machine"]
    lines = [
        "# tritonlab tune against Triton Model Analyzer 1.44.0",
        "",
        f"Measured {data['date_utc']} on {m['cpu']} ({m['cores']} cores, no GPU)"
        + (f" at commit {data['commit']}" if data.get("commit") else "")
        + ": tritonserver 2.51.0 and perf_analyzer 2.51.0 for both tools; the demo MLP "
        "(256 -> 1024 -> 10), gRPC, batch 1. Model Analyzer: 2000 ms windows, stability 25%; "
        "tune: its default block engine (short cells, the window set from a warm-up). Command: "
        "`make ma-bench` (`benchmarks/vs_model_analyzer/compare.py`)." + placement_note(data),
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
    if notes := tune_pick_notes(data):
        lines += ["", "Why each tune search stopped:", "", *(f"- {note}" for note in notes)]
    lines += [
        "",
        f"## Every pick re-measured by the same tool (the block engine, {data['rounds']} "
        "shuffled rounds)",
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
            f"{median_range_text(row['throughput_infer_per_s'])} | "
            f"{median_range_text(row['p99_us'], 1000, 2)} | {'yes' if meets else 'no'} |"
        )
    twins = same_points(data)
    lines += [
        "",
        *(
            f"{a} and {b} are the same configuration at the same load ({load}): the two "
            "tools picked one point, so their rows are two copies of it measured side by side, "
            "and what differs between them (the p99-every-round column included) is noise, not "
            "a difference between the tools."
            for a, b, load in twins
        ),
        *([note] if (note := noise_check_note(data, twins)) else []),
    ]
    lines += [
        "",
        "## Verdicts (throughput at each pick's own load, paired by round; where the loads "
        "differ, also at the common load)",
        "",
    ]
    same = {frozenset((a, b)) for a, b, _ in twins}
    for v in data["verdicts"]:
        aa = (
            " (the same configuration at the same load: an A/A comparison)"
            if frozenset((v["tune"], v["against"])) in same
            else ""
        )
        at, at_ref = own_loads(data, v["against"], v["tune"])
        points = points_text(data, v["against"], v["tune"])
        lines.append(
            f"- {v['tune']}'s throughput{at} relative to {v['against']}'s{at_ref} "
            f"({v['goal']}): {v['phrase']}{aa}" + (f": {points}" if points else "")
        )
    lines += ["", "## Against the targets", ""]
    lines += [f"- {line}" for line in data["targets"]]
    lines.append("")
    return "\n".join(lines)


def same_points(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(pick, pick, load) for every two picks of different tools with the same configuration
    re-measured at the same own load: one point picked twice."""
    serving = {p["name"]: p for p in data["picks"]}
    own = [r for r in data["remeasured"] if r["own_load"]]
    found = []
    for i, a in enumerate(own):
        for b in own[i + 1 :]:
            pa, pb = serving[a["pick"]], serving[b["pick"]]
            if (
                pa["tool"] != pb["tool"]
                and pa["serving"] == pb["serving"]
                and a["concurrency"] == b["concurrency"]
            ):
                found.append((a["pick"], b["pick"], f"c{a['concurrency']}"))
    return found


def _within_budget(row: dict[str, Any]) -> bool:
    """A re-measured pick keeps the p99 budget: its median p99 over the rounds is within it."""
    median = _median(row["p99_us"])
    return median is not None and median <= P99_BUDGET_US


def targets(data: dict[str, Any]) -> list[str]:
    """Issue 19's targets, stated with the re-measured figures: tune's wall time at most 0.5x the
    faster Model Analyzer mode's, and its pick not clearly below the best Model Analyzer pick
    for the same goal (the paired interval's lower bound >= -5%; under the p99 budget, among the
    picks whose re-measured median p99 kept it)."""
    own = {r["pick"]: r for r in data["remeasured"] if r["own_load"]}
    walls = {s["name"]: s["wall_s"] for s in data["searches"]}
    faster = min(walls[k] for k in walls if k.startswith("Model Analyzer"))
    out = []
    for goal, tune_name in (("throughput", "tune_thr"), ("p99<=10ms", "tune_p99")):
        tune_wall = walls[f"tritonlab tune ({goal})"]
        ratio_wall = tune_wall / faster
        time_text = (
            f"tune's wall time {tune_wall:.0f} s is {ratio_wall:.2f}x the faster Model Analyzer "
            f"mode's ({faster:.0f} s): target <= 0.5 {'met' if ratio_wall <= 0.5 else 'missed'}"
        )
        if tune_name not in own:
            out.append(f"{goal}: tune made no pick; {time_text}")
            continue
        ma_names = [
            p["name"] for p in data["picks"] if p["tool"] != "tritonlab tune" and goal in p["goals"]
        ]
        if goal != "throughput":
            ma_names = [n for n in ma_names if _within_budget(own[n])]
        best_ma = max(
            ma_names, key=lambda n: _median(own[n]["throughput_infer_per_s"]) or 0.0, default=None
        )
        budget = ""
        if goal != "throughput":
            median_p99 = (_median(own[tune_name]["p99_us"]) or float("nan")) / 1000
            budget = (
                f" (median p99 {median_p99:.2f} ms, "
                + ("within" if _within_budget(own[tune_name]) else "over")
                + " the budget)"
            )
        verdict = next(
            (v for v in data["verdicts"] if v["tune"] == tune_name and v["against"] == best_ma),
            None,
        )
        if best_ma is None or verdict is None:
            out.append(f"{goal}: no Model Analyzer pick to compare with; {time_text}")
            continue
        low = (verdict["verdict"].get("ci95_change_pct") or [None, None])[0]
        met = low is not None and low >= -5.0
        twin = any({a, b} == {tune_name, best_ma} for a, b, _ in same_points(data))
        same = ", the same configuration at the same load: both tools picked it" if twin else ""
        at, at_ref = own_loads(data, best_ma, tune_name)
        loads = f" at their own loads ({at[4:]} against {at_ref[4:]})" if at else ""
        points = points_text(data, best_ma, tune_name)
        out.append(
            f"{goal}: tune's pick{budget} against the best Model Analyzer pick ({best_ma}{same}), "
            f"paired over the re-measured rounds{loads}: {verdict['phrase']}; lower bound >= -5% "
            f"{'met' if met else 'missed'}" + (f" ({points})" if points else "") + f"; {time_text}"
        )
    return out


README_BEGIN = "<!-- ma-bench: generated by benchmarks/vs_model_analyzer/compare.py --render -->"
README_END = "<!-- ma-bench: end -->"


def readme_block(data: dict[str, Any]) -> str:
    """The README's figures of this benchmark: the searches, why each tune search stopped,
    what checked the re-measurement's noise, and the targets."""
    md = markdown(data).splitlines()
    notes = (
        "\n".join(f"- {note}" for note in tune_pick_notes(data)),
        noise_check_note(data, same_points(data)),
    )
    start = md.index("## The searches") + 2
    end = md.index("", start)
    return "\n".join(
        [
            README_BEGIN,
            f"Measured {data['date_utc']} UTC on {data['machine']['cpu']} "
            f"({data['machine']['cores']} cores)"
            + (f", commit {data['commit']}" if data.get("commit") else "")
            + "; picks re-measured by the block engine in "
            f"{data['rounds']} shuffled rounds ([benchmarks/results/vs_model_analyzer.md]"
            "(benchmarks/results/vs_model_analyzer.md))." + placement_note(data),
            "",
            *md[start:end],
            "",
            *(line for part in notes if part for line in (part, "")),
            *[f"- {line}" for line in data["targets"]],
            README_END,
        ]
    )


def render(out: Path) -> None:
    """Rewrite the targets, vs_model_analyzer.md and docs/results.md from the stored JSON."""
    path = out / "vs_model_analyzer.json"
    data = json.loads(path.read_text())
    data["targets"] = targets(data)
    path.write_text(json.dumps(data, indent=2) + "\n")
    (out / "vs_model_analyzer.md").write_text(markdown(data))
    if out.resolve() != (REPO / "benchmarks" / "results").resolve():
        print(f"docs/results.md quotes benchmarks/results, not {out}: left as it is")
        return
    subprocess.run([sys.executable, str(REPO / "scripts" / "results_pages.py")], check=True)


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
    parser.add_argument(
        "--render",
        action="store_true",
        help="measure nothing: rewrite the targets, OUT/vs_model_analyzer.md and the README's "
        "figures from OUT/vs_model_analyzer.json",
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
                "race_rounds": race_rounds(record["steps"]),
                "trust": tune_trust(work / name),
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
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip(),
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
