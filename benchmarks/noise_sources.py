"""Where the block engine's noise comes from: co-loading, distance in time, or the machine.

Serves the demo MLP's baseline and an identical copy, and for the co-loaded conditions the
other configurations of the calibration set (``calibration.calibration_plan``), in one server
(explicit model control), and measures the baseline and its copy with cells as the block
engine measures them (three 200 ms windows, perf_analyzer's stability check off, gRPC, batch 1,
concurrency 8) in four conditions:

- **two loaded, back to back**: only the two loaded; each pair is the baseline and the copy one
  right after the other (which goes first alternates);
- **all loaded, back to back**: the same pairs with every configuration loaded;
- **all loaded, shuffled blocks of five**: the baseline, the copy and three other
  configurations in a shuffled order per block, as a demo block measures them;
- **the same, CPUs split**: as the one before, with the server (every thread of it and of its
  stubs) on the server's CPUs of ``tritonlab.cpu_split.decide_split`` and perf_analyzer on the
  others, as tritonlab measures by default; in the three before, both may run on every CPU.

The conditions run in segments of ``--pairs`` pairs in the order A B C D D C B A, so slow drift
of the machine falls on each condition alike. Per condition: the spread (standard deviation of the
log throughput) of a window within a cell, of a cell, and of the log-ratio of a pair, the
correlation of the pair's two cells, and the mean log-ratio (the copy against the baseline).
If co-loading added noise, B would be wider than A; if cells far apart in time share less of
the machine's state, C would be wider than B.

Writes ``OUT/noise_sources.json`` and ``.md``. Usage:
    python benchmarks/noise_sources.py --out benchmarks/results [--pairs 12]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARKER = ".tritonlab-noise-bench"
CONDITIONS = (
    "two loaded, back to back",
    "all loaded, back to back",
    "all loaded, blocks of 5",
    "all loaded, blocks of 5, CPUs split",
)
SEGMENTS = (0, 1, 2, 3, 3, 2, 1, 0)  # A B C D D C B A
SPLIT = 3
OTHERS_IN_BLOCK = 3
PASS_RE = re.compile(r"Pass \[\d+\] throughput: ([\d.]+) infer/sec")
TOTAL_RE = re.compile(r"Throughput: ([\d.]+) infer/sec")


def place(server: Any, cpus: tuple[int, ...]) -> None:
    """Every thread of the server and its stubs on ``cpus``."""
    for process in server.process_tree():
        for thread in process.threads():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(thread.id, set(cpus))


def cell(perf: Any, url: str, model: str, cpus: tuple[int, ...] = ()) -> dict[str, Any]:
    """One cell as the block engine measures it (perf_analyzer on ``cpus``; empty: any): its
    throughput and its windows'."""
    from tritonlab.cpu_split import pinned
    from tritonlab.procenv import child_environment

    command = [
        str(perf.binary),
        "-m",
        model,
        "-u",
        url,
        "-i",
        "grpc",
        "-b",
        "1",
        "--measurement-mode",
        "time_windows",
        "-s",
        "1000",
        "--max-trials",
        "3",
        "--measurement-interval",
        "200",
        "--concurrency-range",
        "8",
        "-v",
    ]
    done = subprocess.run(
        command,
        env=child_environment(perf.environment()),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        preexec_fn=pinned(cpus),
    )
    total = TOTAL_RE.search(done.stdout)
    if total is None:
        raise SystemExit(f"perf_analyzer printed no throughput:\n{done.stdout[-2000:]}")
    windows = [float(v) for v in PASS_RE.findall(done.stdout)][-3:]
    return {"model": model, "throughput_infer_per_s": float(total.group(1)), "windows": windows}


def summarise(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """The spreads of one condition's pairs (log units)."""
    base = [math.log(a["throughput_infer_per_s"]) for a, _ in pairs]
    copy = [math.log(b["throughput_infer_per_s"]) for _, b in pairs]
    within = [
        statistics.variance([math.log(w) for w in c["windows"]])
        for pair in pairs
        for c in pair
        if len(c["windows"]) == 3
    ]
    ratios = [b - a for a, b in zip(base, copy, strict=True)]
    return {
        "pairs": len(pairs),
        "window_sd": math.sqrt(statistics.fmean(within)),
        "cell_sd": statistics.fmean([statistics.stdev(base), statistics.stdev(copy)]),
        "log_ratio_sd": statistics.stdev(ratios),
        "log_ratio_mean": statistics.fmean(ratios),
        "pair_correlation": statistics.correlation(base, copy),
    }


def copy_vs_baseline(s: dict[str, Any]) -> str:
    """'-3.3% (95% CI -10.0% to +3.8%)': the mean log-ratio of the A/A pairs with its Student-t
    interval (issue 36 audit: a bare mean to a tenth read as a measured offset where none of
    the four conditions differed from no change)."""
    from scipy import stats

    n, mean, sd = s["pairs"], s["log_ratio_mean"], s["log_ratio_sd"]
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    pct = [100 * math.expm1(x) for x in (mean, mean - half, mean + half)]
    return f"{pct[0]:+.1f}% (95% CI {pct[1]:+.1f}% to {pct[2]:+.1f}%)"


def render_md(report: dict[str, Any]) -> str:
    lines = [
        "# Where the block engine's noise comes from",
        "",
        f"Measured {report['date_utc']} UTC on {report['machine']} ({report['cores']} cores), "
        f"commit {report['commit']}, `python benchmarks/noise_sources.py` (its docstring "
        "states the method). Spreads are standard deviations of log throughput (0.10 is about "
        "10%).",
        "",
        "| condition | pairs | window | cell | log-ratio of a pair | pair correlation | "
        "copy vs baseline (mean, 95% t-interval over the pairs) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in CONDITIONS:
        s = report["conditions"][name]
        lines.append(
            f"| {name} | {s['pairs']} | {s['window_sd']:.3f} | {s['cell_sd']:.3f} | "
            f"{s['log_ratio_sd']:.3f} | {s['pair_correlation']:+.2f} | "
            f"{copy_vs_baseline(s)} |"
        )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--pairs", type=int, default=12, help="pairs per segment")
    parser.add_argument("--work", type=Path, default=ROOT / "noise-bench-work")
    parser.add_argument(
        "--render", action="store_true", help="only write the .md again from the stored .json"
    )
    args = parser.parse_args()
    if args.render:
        stored = json.loads((args.out / "noise_sources.json").read_text())
        (args.out / "noise_sources.md").write_text(render_md(stored))
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_common import fresh_folder, report_header
    from calibration import calibration_plan

    from tritonlab import gateway
    from tritonlab.cpu_split import available_cpus, decide_split
    from tritonlab.models.demo import export_simple_mlp
    from tritonlab.models.inspect import inspect_onnx
    from tritonlab.perf.locate import locate_perf_analyzer
    from tritonlab.repository.layout import add_model
    from tritonlab.server.locate import prepare_bundled_server
    from tritonlab.server.process import TritonServer

    fresh_folder(args.work, MARKER, "benchmarks/noise_sources.py")
    gateway.open_root(args.work)
    onnx = args.work / "simple_mlp.onnx"
    export_simple_mlp(onnx)
    info = inspect_onnx(onnx)
    models = {
        v.name: add_model(args.work / "models", info, "simple_mlp", v).model_name
        for v in calibration_plan(1).variants
    }
    pair = (models["baseline"], models["baseline_aa"])
    others = [m for name, m in models.items() if name not in ("baseline", "baseline_aa")]
    perf = locate_perf_analyzer()
    split = decide_split(True, starts_server=True)
    if not split.split:
        raise SystemExit(f"the CPU split needs two CPUs or more: {split.reason}")
    every = available_cpus()
    rng = random.Random(34)
    collected: dict[str, list[Any]] = {name: [] for name in CONDITIONS}
    server = TritonServer(
        prepare_bundled_server(),
        args.work / "models",
        args.work / "tritonserver.log",
        explicit_model_control=True,
    )
    with server:
        url = server.url("grpc")
        for model in pair:
            server.load_model(model)
        loaded_others = False
        for index, condition in enumerate(SEGMENTS):
            wanted = condition > 0
            if wanted != loaded_others:
                for model in others:
                    (server.load_model if wanted else server.unload_model)(model)
                loaded_others = wanted
            place(server, split.server_cpus if condition == SPLIT else every)
            client = split.client_cpus if condition == SPLIT else ()
            for model in (*pair, *(others if wanted else ())):  # a discarded warm-up cell each
                cell(perf, url, model, client)
            for k in range(args.pairs):
                if condition < 2:
                    first = (index + k) % 2
                    a = cell(perf, url, pair[first], client)
                    b = cell(perf, url, pair[1 - first], client)
                    measured = {a["model"]: a, b["model"]: b}
                else:
                    order = [*pair, *rng.sample(others, OTHERS_IN_BLOCK)]
                    rng.shuffle(order)
                    measured = {m: cell(perf, url, m, client) for m in order}
                collected[CONDITIONS[condition]].append((measured[pair[0]], measured[pair[1]]))
            print(f"segment {index + 1} of {len(SEGMENTS)}: {CONDITIONS[condition]}", flush=True)
    report = {
        **report_header(),
        "pairs_per_segment": args.pairs,
        "conditions": {name: summarise(pairs) for name, pairs in collected.items()},
        "cells": {name: pairs for name, pairs in collected.items()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "noise_sources.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "noise_sources.md").write_text(render_md(report))


if __name__ == "__main__":
    main()
