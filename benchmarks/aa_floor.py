"""A/A benchmark: how often the block engine tells identical configurations apart.

Serves the demo MLP's baseline (no batching, 1 instance) and ``COPIES`` copies of it under other
names, all co-loaded in one server, and measures them with the block engine at the demo's load
(gRPC, batch 1, concurrency 8) for a fixed number of blocks; ``RUNS`` times, each a fresh
server from an empty folder (fresh stub processes and, since the seed carries a random part,
fresh orders). Every pair of the served names is then compared exactly as the verdicts
compare configurations (``stats/verdicts.compare``, paired by block). Nothing differs
between them but the name, so each interval should cover zero; at 95% about 1 in 20 will
not by chance. (The pairs of one run share their cells, so they are not independent trials:
the count is a check, not a precise rate.) The copies against the plain-named baseline are
also reported apart, since the baseline alone keeps the model's own name.

With ``--compare-reloads`` the runs alternate between the engine with co-loaded configurations
reloaded (new stub processes) every ``TRIAL_RELOAD_EVERY_BLOCKS`` blocks and the engine as
released, and each mode is summarised apart: the side-by-side that shows what reloads change.

Writes ``OUT/aa_floor.json`` and ``OUT/aa_floor.md`` (rewritten after every run). Usage:
    python benchmarks/aa_floor.py --out benchmarks/results [--runs 4] [--blocks 30]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tritonlab.stats.process_term import predates_note
from tritonlab.stats.robust import HALF_WIDTH_MEANING

ROOT = Path(__file__).resolve().parent.parent
MARKER = ".tritonlab-aa-bench"  # only folders holding it are ever removed
COPIES = 3
TRIAL_RELOAD_EVERY_BLOCKS = 10
FIGURES = (("throughput", "throughput_infer_per_s"), ("latency_p99", "latency_p99_us"))


def measure(run_dir: Path, onnx: Path, blocks: int, run: int, reloads: bool) -> float:
    """One fresh run of the baseline and its copies; its measuring wall time in seconds."""
    from tritonlab.experiments import blocks as engine
    from tritonlab.experiments.blocks import ENGINE_BLOCKS
    from tritonlab.experiments.plan import (
        MeasurementSettings,
        PlanBasics,
        seed_comparison_plan,
    )
    from tritonlab.pipeline.project import run_project
    from tritonlab.server.launch import ServerOptions

    plan = seed_comparison_plan(
        PlanBasics("simple_mlp", blocks, measurement=MeasurementSettings(engine=ENGINE_BLOCKS))
    )
    base = plan.variants[0]
    copies = [
        replace(base, name=f"copy{i}", description=f"A/A copy {i} (run {run})", control=True)
        for i in range(1, COPIES + 1)
    ]
    plan = replace(plan, variants=(base, *copies))
    released = engine.RELOAD_EVERY_BLOCKS
    engine.RELOAD_EVERY_BLOCKS = TRIAL_RELOAD_EVERY_BLOCKS if reloads else released
    try:
        started = time.monotonic()
        run_project(onnx, run_dir, plan, ServerOptions())
        return time.monotonic() - started
    finally:
        engine.RELOAD_EVERY_BLOCKS = released


def compare_pairs(run_dir: Path) -> list[dict[str, Any]]:
    """Every pair of served names, each figure, as the verdicts compare them."""
    from tritonlab.experiments.store import load_cells
    from tritonlab.stats.summary import Summary
    from tritonlab.stats.verdicts import compare

    by_name: dict[str, dict[int, Any]] = {}
    for cell in load_cells(run_dir):
        by_name.setdefault(cell.variant.name, {})[cell.repeat] = cell.perf.measurement
    names = ["baseline", *sorted(n for n in by_name if n != "baseline")]
    pairs = []
    for ref, other in itertools.combinations(names, 2):
        row: dict[str, Any] = {"reference": ref, "other": other}
        for figure, field in FIGURES:
            blocks = sorted(set(by_name[ref]) & set(by_name[other]))
            v = compare(
                figure,
                Summary.of([getattr(by_name[ref][b], field) for b in blocks], blocks),
                Summary.of([getattr(by_name[other][b], field) for b in blocks], blocks),
            )
            row[figure] = {
                "word": v.word.value,
                "change_pct": v.change_pct,
                "ci95_pct": [v.low_pct, v.high_pct] if v.has_interval else None,
                "half_width_pct": v.half_width_pct,
                "pairs": v.pairs,
                "excludes_zero": v.word.value in ("higher", "lower"),
            }
        pairs.append(row)
    return pairs


def summarise_modes(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each mode's summary (``reloads`` and, with --compare-reloads, ``no reloads``)."""
    modes = dict.fromkeys(r["mode"] for r in runs)
    return {m: summarise([r for r in runs if r["mode"] == m]) for m in modes}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": len(runs)}
    for figure, _ in FIGURES:
        rows = [p[figure] for r in runs for p in r["pairs"]]
        vs_base = [p[figure] for r in runs for p in r["pairs"] if p["reference"] == "baseline"]
        among = [p[figure] for r in runs for p in r["pairs"] if p["reference"] != "baseline"]
        out[figure] = {
            "intervals": len(rows),
            "excluding_zero": sum(1 for p in rows if p["excludes_zero"]),
            "half_width_pct_median": statistics.median(p["half_width_pct"] for p in rows),
            "change_pct_range": [
                min(p["change_pct"] for p in rows),
                max(p["change_pct"] for p in rows),
            ],
            # copy against the plain-named baseline: change of the copy (negative: copy lower)
            "copies_vs_baseline_change_pct_median": statistics.median(
                p["change_pct"] for p in vs_base
            ),
            "copies_vs_baseline_excluding_zero": sum(1 for p in vs_base if p["excludes_zero"]),
            "among_copies_change_pct_median": statistics.median(p["change_pct"] for p in among),
            "among_copies_excluding_zero": sum(1 for p in among if p["excludes_zero"]),
        }
    return out


def _interval(figure: dict[str, Any]) -> str:
    """A stored verdict's 95% interval in %, or 'no interval'."""
    ci = figure["ci95_pct"]
    return f"CI {ci[0]:+.1f}% to {ci[1]:+.1f}%" if ci else "no interval"


def _placement_note(report: dict[str, Any]) -> str:
    """Where the stored runs predate the CPU split and the process term, that they do, so
    their half-widths are not the shipped engine's (issue 36 audit: the page quoted as the
    floor of today's engine), with where the shipped engine's error rates are."""
    note = predates_note(report, "These runs")
    return (
        note
        and f"{note} The shipped engine's measured error rates: [calibration.md](calibration.md)."
    )


def render_md(report: dict[str, Any]) -> str:
    lines = [
        "# A/A: identical configurations compared by the block engine",
        "",
        f"Measured {report['date_utc']} UTC on {report['machine']} ({report['cores']} cores), "
        f"commit {report['commit']}. The demo MLP's baseline and {COPIES} copies under other "
        f"names, co-loaded, {report['blocks']} blocks at gRPC batch 1 concurrency 8, "
        f"{len(report['runs'])} fresh runs. Command: `make aa-bench` "
        "(`benchmarks/aa_floor.py`)."
        + _placement_note(report)
        + f" {HALF_WIDTH_MEANING[0].upper()}{HALF_WIDTH_MEANING[1:]}.",
        "",
        "| engine | runs | figure | intervals | excluding 0 | median half-width | "
        "changes seen | copy vs baseline (median) | among copies (median) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, summary in report["summary"].items():
        lines += _summary_rows(mode, summary)
    lines += [
        "",
        "At 95%, about 1 interval in 20 excludes zero by chance; the pairs of one run share "
        "cells, so the count is a check, not a precise rate.",
        "",
    ]
    for run in report["runs"]:
        lines.append(f"## Run {run['run']}: {run['mode']} ({run['wall_s']:.0f} s)")
        lines.append("")
        for p in run["pairs"]:
            t, q = p["throughput"], p["latency_p99"]
            lines.append(
                f"- {p['other']} against {p['reference']}: throughput {t['word']} "
                f"({t['change_pct']:+.1f}%, {_interval(t)}, {t['pairs']} blocks); p99 "
                f"{q['word']} ({q['change_pct']:+.1f}%, {_interval(q)})"
            )
        lines.append("")
    return "\n".join(lines)


def _summary_rows(mode: str, summary: dict[str, Any]) -> list[str]:
    rows = []
    for figure, _ in FIGURES:
        s = summary[figure]
        lo, hi = s["change_pct_range"]
        rows.append(
            f"| {mode} | {summary['runs']} | {figure} | {s['intervals']} | "
            f"{s['excluding_zero']} | ±{s['half_width_pct_median']:.1f}% | "
            f"{lo:+.1f}% to {hi:+.1f}% | "
            f"{s['copies_vs_baseline_change_pct_median']:+.1f}% "
            f"({s['copies_vs_baseline_excluding_zero']} excl. 0) | "
            f"{s['among_copies_change_pct_median']:+.1f}% "
            f"({s['among_copies_excluding_zero']} excl. 0) |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--work", type=Path, default=ROOT / "aa-bench-work")
    parser.add_argument(
        "--compare-reloads",
        action="store_true",
        help="alternate runs with reloads every 10 blocks (odd runs) and none (even runs)",
    )
    args = parser.parse_args()
    from bench_common import fresh_folder, report_header  # beside this script

    from tritonlab import gateway
    from tritonlab.models.demo import export_simple_mlp

    report: dict[str, Any] = {
        **report_header(),
        "blocks": args.blocks,
        "runs": [],
        "summary": {},
    }
    args.work.mkdir(parents=True, exist_ok=True)
    gateway.open_root(args.work)  # tritonlab writes only inside a folder opened for it
    onnx = args.work / "simple_mlp.onnx"
    if not onnx.exists():
        export_simple_mlp(onnx)
    args.out.mkdir(parents=True, exist_ok=True)
    for run in range(1, args.runs + 1):
        folder = args.work / f"run{run}"
        fresh_folder(folder, MARKER, "benchmarks/aa_floor.py")
        reloads = args.compare_reloads and run % 2 == 1
        wall = measure(folder, onnx, args.blocks, run, reloads)
        pairs = compare_pairs(folder)
        # the placement the run measured with (a page quotes its rates with it: issue 36)
        manifest = json.loads((folder / "results" / "manifest.json").read_text())
        report["cpu_split"] = manifest.get("cpu_split")
        mode = f"reloads every {TRIAL_RELOAD_EVERY_BLOCKS} blocks" if reloads else "no reloads"
        report["runs"].append({"run": run, "mode": mode, "wall_s": round(wall, 1), "pairs": pairs})
        report["summary"] = summarise_modes(report["runs"])
        (args.out / "aa_floor.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.out / "aa_floor.md").write_text(render_md(report))
        print(f"run {run}: {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()
