"""The calibration benchmark's reading of its stored runs and checks: false alarms, coverage and
power of the three readings, each round's and the live gate's outcomes, ``calibration.json`` (its
page: ``calibration_page.py``) and the summary tritonlab carries
(``src/tritonlab/stats/calibration_rates.json``).

Everything here reads the raw files (``benchmarks/results/calibration_runs/``) alone; measuring
is ``calibration.py``, whose docstring states the method.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RAW = RESULTS / "calibration_runs"
PACKAGED = ROOT / "src" / "tritonlab" / "stats" / "calibration_rates.json"
AA_NAMES = ("baseline", "baseline_aa", "aa_copy", "aa_copy2")  # identical configurations
# Earlier rounds: each round's files move into a folder of their own under ``calibration_runs/``
# when a later round changes what verdicts hold or what is planted; every round still counts
# towards the process term's estimate (``stats/process_term.py``), and the report lists them.
# What a held term's own round must show for it to ship as is (issue 34's targets): false alarms
# at most 5% and coverage from 93% to 97%. Then tritonlab carries the very term its quoted rates
# were measured with; otherwise it carries the pooled re-estimate, for the next round to judge.
MAX_FALSE_ALARMS = 0.05
COVERAGE_BOUNDS = (0.93, 0.97)
PREFIX_BLOCKS = (5, 10, 20, 30)  # power also read on each run's first blocks


def plant_name(effect: int) -> str:
    return f"plant_{effect}"


def _series(
    run: dict[str, Any], name: str, upto: int | None = None, figure: str = "throughput_infer_per_s"
) -> dict[int, float]:
    values = {int(b): c[figure] for b, c in run["cells"][name].items()}
    return {b: v for b, v in values.items() if upto is None or b <= upto}


def _term(run: dict[str, Any]) -> float:
    """The throughput process term (log units) the run's verdicts held when it was measured."""
    term = run.get("process_term")
    return float(term["throughput_sd_log"]) if term else 0.0


def aa_log_ratios(run: dict[str, Any], figure: str) -> list[list[float]]:
    """Every A/A pair of ``run``: the paired log-ratios of ``figure`` over their common blocks."""
    copies = [name for name in AA_NAMES if name in run["cells"]]
    found = []
    for ref, other in itertools.combinations(copies, 2):
        a, b = _series(run, ref, figure=figure), _series(run, other, figure=figure)
        found.append([math.log(b[k] / a[k]) for k in sorted(set(a) & set(b)) if a[k] > 0])
    return found


def block_spread_pct(runs: list[dict[str, Any]]) -> float:
    """The runs' noise, to compare rounds by: the median over runs of the standard deviation of
    one block's A/A log-ratio (every pair of identical copies pooled), in % (exp(sd) - 1)."""
    spreads = []
    for run in runs:
        ratios = [x for pair in aa_log_ratios(run, "throughput_infer_per_s") for x in pair]
        if len(ratios) > 1:
            spreads.append(statistics.stdev(ratios))
    return round(100.0 * math.expm1(statistics.median(spreads)), 2) if spreads else 0.0


def process_term(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The process term (``stats/process_term.estimate_sd_log``) from ``runs``' A/A copies."""
    from tritonlab.stats.process_term import ProcessTerm, estimate_sd_log

    tput = [x for r in runs for x in aa_log_ratios(r, "throughput_infer_per_s")]
    p99 = [x for r in runs for x in aa_log_ratios(r, "latency_p99_us")]
    return ProcessTerm(estimate_sd_log(tput), estimate_sd_log(p99), len(tput), len(runs)).to_dict()


def term_parts(series: list[list[float]]) -> dict[str, Any]:
    """The two parts ``stats/process_term.estimate_sd_log`` takes apart, from the same A/A
    comparisons: the mean squared mean log-ratio and the part of it the blocks' own noise
    explains (the mean ``s^2/n``), and whether the estimate was floored at zero (the first is
    smaller: per-process offsets cannot be told from the figure's block noise, so its ``±0.0%``
    is no measured absence of them; issue 34 audit). Raises ``ValueError`` where the parts do
    not give ``estimate_sd_log``'s estimate."""
    from tritonlab.stats.process_term import estimate_sd_log

    usable = [x for x in series if len(x) >= 2]
    squares = statistics.fmean(statistics.fmean(x) ** 2 for x in usable)
    within = statistics.fmean(statistics.variance(x) / len(x) for x in usable)
    if not math.isclose(math.sqrt(max(0.0, squares - within) / 2.0), estimate_sd_log(series)):
        raise ValueError("the parts do not give stats/process_term.estimate_sd_log's estimate")
    return {"mean_square_log": squares, "within_blocks_log": within, "floored": squares < within}


def process_term_parts(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """``term_parts`` of each figure ``process_term`` estimates, from the same A/A copies."""
    figures = {"throughput": "throughput_infer_per_s", "latency_p99": "latency_p99_us"}
    return {
        name: term_parts([x for r in runs for x in aa_log_ratios(r, figure)])
        for name, figure in figures.items()
    }


def leave_one_out_false_alarms(runs: list[dict[str, Any]]) -> int:
    """A/A false alarms when each run's verdicts hold the term estimated from the other runs
    (a check of the term on runs it was not estimated from)."""
    from tritonlab.stats.calibration import block_reading

    alarms = 0
    for i, run in enumerate(runs):
        term = process_term(runs[:i] + runs[i + 1 :])["throughput_sd_log"]
        copies = [name for name in AA_NAMES if name in run["cells"]]
        for ref, other in itertools.combinations(copies, 2):
            reading = block_reading(_series(run, ref), _series(run, other), term)
            alarms += reading.calls_difference
    return alarms


def _ordered(series: dict[int, float]) -> list[float]:
    return [series[b] for b in sorted(series)]


def planted_effects(runs: list[dict[str, Any]]) -> dict[int, int]:
    """Each plant (by its nominal size) and the loop turns every stored run planted."""
    sizes = {json.dumps(r["plants_iterations"], sort_keys=True) for r in runs}
    if len(sizes) > 1:
        raise SystemExit(f"the stored runs planted different amounts of work: {sorted(sizes)}")
    return dict(sorted((int(k), v) for k, v in runs[0]["plants_iterations"].items()))


def _aa_configurations(runs: list[dict[str, Any]]) -> int:
    return max(sum(name in r["cells"] for name in AA_NAMES) for r in runs)


def analyse_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """False alarms, coverage and power of the three readings over the stored runs."""
    from tritonlab.stats.calibration import (
        Tally,
        block_reading,
        independent_runs_reading,
        leave_one_out,
        one_window_reading,
        pooled_change_pct,
    )

    planted_turns = planted_effects(runs)
    tallies = {
        (reading, kind): Tally()
        for reading in ("blocks", "independent runs", "one window")
        for kind in ("aa", *map(plant_name, planted_turns))
    }

    def read(
        kind: str, ref: dict[int, float], var: dict[int, float], truth: float, term: float
    ) -> Any:
        """One comparison read three ways into ``tallies``; the block reading (``term``: the
        process term its run's verdicts held)."""
        readings = {
            "blocks": [block_reading(ref, var, term)],
            "independent runs": [independent_runs_reading(_ordered(ref), _ordered(var))],
            "one window": [one_window_reading(ref[b], var[b]) for b in sorted(set(ref) & set(var))],
        }
        for name, found in readings.items():
            for reading in found:
                tallies[name, kind] = tallies[name, kind].add(reading, truth)
        return readings["blocks"][0]

    aa_rows: list[dict[str, Any]] = []
    aa_lengths: list[dict[str, Any]] = []  # each A/A comparison's pairs (``aa_by_length``)
    for run in runs:
        copies = [name for name in AA_NAMES if name in run["cells"]]
        for ref, other in itertools.combinations(copies, 2):
            a, b = _series(run, ref), _series(run, other)
            reading = read("aa", a, b, 0.0, _term(run))
            aa_rows.append({"run": run["run"], "pair": f"{other} vs {ref}", **reading.to_dict()})
            aa_lengths.append(
                {
                    "pairs": len(set(a) & set(b)),
                    "full": len(set(a) & set(b)) == run["blocks"],
                    "call": reading.calls_difference,
                    "covers": reading.covers(0.0),
                }
            )
    plants: list[dict[str, Any]] = []
    for effect in planted_turns:
        name = plant_name(effect)
        readings = [block_reading(_series(r, "baseline"), _series(r, name), _term(r)) for r in runs]
        logs = [math.log1p(r.change_pct / 100.0) for r in readings]
        truths = [100.0 * math.expm1(t) for t in leave_one_out(logs)] if len(runs) > 1 else []
        estimate, low, high = pooled_change_pct(logs)
        shortest = min(r["blocks"] for r in runs)
        detected_at = {upto: 0 for upto in PREFIX_BLOCKS if upto < shortest}
        for run, truth in zip(runs, truths, strict=False):
            read(name, _series(run, "baseline"), _series(run, name), truth, _term(run))
            for upto in detected_at:
                early = block_reading(
                    _series(run, "baseline", upto), _series(run, name, upto), _term(run)
                )
                detected_at[upto] += early.detects(truth)
        plants.append(
            {
                "plant": name,
                "iterations": planted_turns[effect],
                "reference_change_pct": estimate,
                "reference_ci95_pct": [low, high],
                "detected_by_prefix": {str(k): v for k, v in detected_at.items()},
            }
        )
    short = [
        sum(len(run["cells"][n]) < run["blocks"] for n in AA_NAMES if n in run["cells"])
        for run in runs
    ]
    return {
        "tallies": tallies,
        "aa_rows": aa_rows,
        "aa_by_length": aa_by_length(aa_lengths, short),
        "plants": plants,
    }


def aa_by_length(lengths: list[dict[str, Any]], short_copies: list[int]) -> dict[str, Any]:
    """How many of the A/A comparisons rest on how many pairs (issue 24 audit: most of them on
    the copies measured in the planned blocks only, not the run's full length): the comparisons
    shorter than their run (``short``) and those at its full length (``full``), each with its
    pairs (fewest, most), false alarms and coverage of 0; ``short_copies``: each run's A/A copies
    measured in fewer blocks than the run (fewest, most over the runs)."""

    def part(rows: list[dict[str, Any]]) -> dict[str, Any]:
        pairs = [r["pairs"] for r in rows]
        return {
            "comparisons": len(rows),
            "pairs_min": min(pairs, default=0),
            "pairs_max": max(pairs, default=0),
            "false_alarms": sum(bool(r["call"]) for r in rows),
            "intervals": sum(r["covers"] is not None for r in rows),
            "covered": sum(bool(r["covers"]) for r in rows),
        }

    return {
        "short_copies_per_run": [min(short_copies, default=0), max(short_copies, default=0)],
        "short": part([r for r in lengths if not r["full"]]),
        "full": part([r for r in lengths if r["full"]]),
    }


def measuring_s(run: dict[str, Any], upto: int | None = None) -> float:
    """The wall seconds of ``run``'s cells (up to block ``upto``): its measuring, every
    configuration of it (more than a demo's five)."""
    return sum(
        c["wall_s"]
        for cells in run["cells"].values()
        for block, c in cells.items()
        if upto is None or int(block) <= upto
    )


def median_measuring_s(runs: list[dict[str, Any]], upto: int | None = None) -> float:
    """The median over ``runs`` of ``measuring_s``."""
    return statistics.median(measuring_s(r, upto) for r in runs)


def _when(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The span of ``checks``' start times (UTC) and the commits they ran at."""
    dates = sorted(c["date_utc"] for c in checks if c.get("date_utc"))
    return {
        "measured_from": dates[0] if dates else None,
        "measured_to": dates[-1] if dates else None,
        "commits": sorted({c["commit"] for c in checks if c.get("commit")}),
    }


def summarise_gate(checks: list[dict[str, Any]], drops: dict[int, float]) -> dict[str, Any]:
    """The live checks' outcomes; ``drops``: the true drop in % of each amount of planted loop
    turns (from the runs that planted it)."""
    aa = [c for c in checks if c["effect_pct"] == 0]  # a check's record names its plant
    planted = []
    for effect, turns in sorted({(c["effect_pct"], c["iterations"]) for c in checks} - {(0, 0)}):
        trials = [c for c in checks if (c["effect_pct"], c["iterations"]) == (effect, turns)]
        planted.append(
            {
                "plant": plant_name(effect),
                "iterations": turns,
                "effect_pct": drops.get(turns),
                "trials": len(trials),
                "detected": sum(c["throughput_outcome"] != "pass" for c in trials),
                "called_regression": sum(c["throughput_outcome"] == "regression" for c in trials),
                "decision_s_median": statistics.median(c["wall_s"] for c in trials),
                # when and by which code the row's checks ran: rows measured apart say so
                # (issue 36 audit: the time column mixed checks of two rounds and commits)
                **_when(trials),
            }
        )
    return {
        "aa_checks": len(aa),
        "false_regressions": sum(c["throughput_outcome"] == "regression" for c in aa),
        "aa_undecided": sum(c["throughput_outcome"] == "undecided" for c in aa),
        # undecided checks whose interval still excluded no change: identical copies read
        # different (issue 36 audit: called merely "undecided")
        "aa_undecided_apart": [
            {"check": c.get("check"), "change_pct": v["change_pct"], "ci95_change_pct": ci}
            for c in aa
            if c["throughput_outcome"] == "undecided"
            for r in c.get("verdicts", [])
            if r["figure"] == "throughput"
            and (v := r["verdict"])
            and (ci := v.get("ci95_change_pct"))
            and (ci[0] > 0 or ci[1] < 0)
        ],
        # the gate judges p99 too: its A/A misreads are quoted beside throughput's (issue 36
        # audit: an A/A p99 interval of +0.3% to +10.3% went unmentioned)
        "aa_p99_regressions": sum(c.get("latency_p99_outcome") == "regression" for c in aa),
        "aa_p99_undecided": sum(c.get("latency_p99_outcome") == "undecided" for c in aa),
        "aa_p99_undecided_apart": [
            {"check": c.get("check"), "change_pct": v["change_pct"], "ci95_change_pct": ci}
            for c in aa
            if c.get("latency_p99_outcome") == "undecided"
            for r in c.get("verdicts", [])
            if r["figure"] == "latency_p99"
            and (v := r["verdict"])
            and (ci := v.get("ci95_change_pct"))
            and (ci[0] > 0 or ci[1] < 0)
        ],
        "aa_passed": sum(c["exit_status"] == 0 for c in aa),
        "aa_exit_nonzero": sum(c["exit_status"] != 0 for c in aa),
        "aa_decision_s_median": statistics.median(c["wall_s"] for c in aa) if aa else None,
        "aa_measured": _when(aa) if aa else None,
        "planted": planted,
    }


def summarise_round(runs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One round's headline figures (when, A/A false alarms, coverage, power) and the analysis
    they come from (``analyse_runs``)."""
    analysis = analyse_runs(runs)
    tallies = analysis["tallies"]
    blocks = round(statistics.median(r["blocks"] for r in runs))
    aa = tallies["blocks", "aa"]
    intervals = [tallies[key] for key in tallies if key[0] == "blocks"]
    terms = [_term(r) for r in runs]
    summary = {
        "measured": {
            "runs_from": min(r["date_utc"] for r in runs),
            "runs_to": max(r["date_utc"] for r in runs),
            "commits": sorted({r["commit"] for r in runs}),
        },
        "aa": {
            "runs": len(runs),
            "comparisons": aa.comparisons,
            "false_alarms": aa.calls,
            "configurations": _aa_configurations(runs),
            "process_term_sd_log": {"min": min(terms), "max": max(terms)},
            "block_spread_pct_median": block_spread_pct(runs),
        },
        "coverage": {
            "intervals": sum(t.intervals for t in intervals),
            "covered": sum(t.covered for t in intervals),
        },
        "power": [
            {
                "plant": p["plant"],
                # the true drop, from the reference: the throughput lost, in %
                "effect_pct": round(-p["reference_change_pct"], 1),
                "iterations": p["iterations"],
                "reference_change_pct": p["reference_change_pct"],
                "reference_ci95_pct": p["reference_ci95_pct"],
                "trials": tallies["blocks", p["plant"]].comparisons,
                "detected": tallies["blocks", p["plant"]].detected,
                "blocks": blocks,
                "measuring_s_median": median_measuring_s(runs),
                "by_blocks": [
                    {
                        "blocks": upto,
                        "measuring_s_median": median_measuring_s(runs, upto),
                        "detected": p["detected_by_prefix"][str(upto)],
                    }
                    for upto in map(int, p["detected_by_prefix"])
                ],
            }
            for p in analysis["plants"]
        ],
    }
    return summary, analysis


def _load(paths: list[Path]) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(paths)]


def earlier_rounds(raw_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Each earlier round's runs (a folder of its own under ``raw_dir``), by folder."""
    folders = sorted(p for p in raw_dir.iterdir() if p.is_dir())
    return {f.name: runs for f in folders if (runs := _load(list(f.glob("run*.json"))))}


def build_report(raw_dir: Path = RAW) -> dict[str, Any]:
    """calibration.json's content, from the raw files alone."""
    from bench_common import report_header

    runs = _load(list(raw_dir.glob("run*.json")))
    rounds = earlier_rounds(raw_dir)
    # earlier rounds count towards the process term's estimate
    earlier = [run for past_runs in rounds.values() for run in past_runs]
    checks = _load(list(raw_dir.glob("gate*.json")))
    raw = raw_dir.resolve()
    shown = raw.relative_to(ROOT) if raw.is_relative_to(ROOT) else raw.name
    report: dict[str, Any] = {**report_header(), "raw": str(shown)}
    summaries = [{"folder": name, **summarise_round(r)[0]} for name, r in rounds.items()]
    past = sorted(summaries, key=lambda r: r["measured"]["runs_from"])  # oldest first
    if runs:
        summary, analysis = summarise_round(runs)
        report.update(summary)
        if len(runs) > 2:
            report["aa"]["false_alarms_leave_one_out"] = leave_one_out_false_alarms(runs)
        report["process_term"] = process_term(runs + earlier)
        report["process_term_parts"] = process_term_parts(runs + earlier)
        held_terms = [r.get("process_term") for r in runs]
        if held_terms[0] is not None and all(t == held_terms[0] for t in held_terms):
            report["process_term_held"] = held_terms[0]
        which, term = shipped_term(report)
        report["process_term_shipped"] = {
            "from": which,
            "term": term,
            "max_false_alarms": MAX_FALSE_ALARMS,
            "coverage_bounds": list(COVERAGE_BOUNDS),
        }
        report["blocks"] = {
            "min": min(r["blocks"] for r in runs),
            "max": max(r["blocks"] for r in runs),
            "cpu_split_runs": sum(bool(r.get("cpu_split")) for r in runs),
            "configurations": max(len(r["cells"]) for r in runs),
        }
        report["readings"] = {
            f"{reading} | {kind}": tally.to_dict()
            for (reading, kind), tally in analysis["tallies"].items()
        }
        cells = [c for r in runs for cs in r["cells"].values() for c in cs.values()]
        report["disturbed_cells"] = {
            "cells": len(cells),
            "disturbed": sum(c["disturbed"] for c in cells),
        }
        report["aa_comparisons"] = analysis["aa_rows"]
        report["aa_by_length"] = analysis["aa_by_length"]
    if past:
        report["earlier_rounds"] = past
    if checks:
        # each amount of loop turns sized by the latest round that planted it
        sized = [p for r in [*past, report] for p in r.get("power", [])]
        drops = {p["iterations"]: p["effect_pct"] for p in sized}
        report["gate"] = summarise_gate(checks, drops)
    return report


def shipped_term(report: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Which process term tritonlab carries, ``held`` or ``pooled``, and the term itself: the one
    the runs held when their rates are within ``MAX_FALSE_ALARMS`` and ``COVERAGE_BOUNDS``
    (so the rates quoted are that term's own), else the pooled re-estimate."""
    held = report.get("process_term_held")
    aa, coverage = report["aa"], report["coverage"]
    alarms = aa["false_alarms"] / max(aa["comparisons"], 1)
    covered = coverage["covered"] / max(coverage["intervals"], 1)
    low, high = COVERAGE_BOUNDS
    if held is not None and alarms <= MAX_FALSE_ALARMS and low <= covered <= high:
        return "held", held
    return "pooled", report["process_term"]


def packaged_rates(report: dict[str, Any]) -> dict[str, Any]:
    """The summary tritonlab carries (``stats/error_rates.MeasuredRates``) and quotes in every
    block-engine log."""
    return {
        "date_utc": report["measured"]["runs_to"],
        "machine": report["machine"],
        "cores": report["cores"],
        "commit": ", ".join(report["measured"]["commits"]),  # what the runs measured with
        "runs": report["aa"]["runs"],
        "blocks": report["blocks"]["max"],
        "cpu_split": report["blocks"]["cpu_split_runs"] == report["aa"]["runs"],
        "aa_comparisons": report["aa"]["comparisons"],
        "false_alarms": report["aa"]["false_alarms"],
        "intervals": report["coverage"]["intervals"],
        "covered": report["coverage"]["covered"],
        "power": [
            {
                **{k: p[k] for k in ("reference_change_pct", "trials", "detected", "blocks")},
                "by_blocks": [
                    {"blocks": b["blocks"], "detected": b["detected"]} for b in p["by_blocks"]
                ],
            }
            for p in report["power"]
        ],
        "process_term": report["process_term_shipped"]["term"],
        "process_term_held_sd_log": report["aa"]["process_term_sd_log"]["min"],
        "block_spread_pct": report["aa"]["block_spread_pct_median"],
    }


def write_report(raw_dir: Path = RAW, out: Path = RESULTS, package: bool = False) -> dict[str, Any]:
    """calibration.{json,md} in ``out``; with ``package``, also the summary tritonlab carries."""
    from calibration_page import render_md

    report = build_report(raw_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "calibration.md").write_text(render_md(report))
    if package and "aa" in report:
        PACKAGED.write_text(json.dumps(packaged_rates(report), indent=2) + "\n")
    return report
