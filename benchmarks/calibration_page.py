"""The calibration benchmark's pages: ``calibration.md`` and the block ``docs/results.md`` quotes
(``readme_block``, through ``scripts/results_pages.py``), rendered from ``calibration.json``
alone (``calibration_report.py`` writes it from the raw files)."""

from __future__ import annotations

import math
from typing import Any


def _apart(gate: dict[str, Any], key: str = "aa_undecided_apart") -> str:
    """' (both read lower: ...)' for the undecided A/A checks whose interval excluded no change:
    identical copies read different, though not past the gate's threshold (``key``: the
    throughput's list, or p99's)."""
    apart = gate.get(key) or []
    if not apart:
        return ""
    listed = ", ".join(
        f"{a['change_pct']:+.1f}% (CI {a['ci95_change_pct'][0]:+.1f}% to "
        f"{a['ci95_change_pct'][1]:+.1f}%)"
        for a in apart
    )
    who = "both " if len(apart) == 2 else f"{len(apart)} of them " if len(apart) > 1 else ""
    return (
        f" ({who}with an interval that excludes no change, {listed}: identical copies read "
        "different, by less than the threshold could settle)"
    )


def _measured(when: dict[str, Any] | None, bare: bool = False) -> str:
    """'2026-12-06 16:10 to 16:57; 7560dbd, 88e6f66' (``bare``) or ' (measured ...)'; ''
    where not stored."""
    if not when or not when.get("measured_from"):
        return ""
    start, end = when["measured_from"], when["measured_to"]
    span = start if start == end else f"{start} to {end[11:] if end[:10] == start[:10] else end}"
    text = f"{span}; {', '.join(when['commits'])}"
    return text if bare else f" (measured {text})"


def _p99_misreads(gate: dict[str, Any]) -> str:
    """'; p99 called a regression in 0, undecided in 1 (...)': the gate's p99 reading of the
    same A/A checks; '' for a report from before it was summarised."""
    if "aa_p99_undecided" not in gate:
        return ""
    return (
        f"; p99 called a regression in {gate['aa_p99_regressions']}, undecided in "
        f"{gate['aa_p99_undecided']}{_apart(gate, 'aa_p99_undecided_apart')}"
    )


def _span(low: int, high: int) -> str:
    return f"{low}" if low == high else f"{low} to {high}"


def _alarms(k: int) -> str:
    return f"{k} false alarm" if k == 1 else f"{k} false alarms"


def _aa_lengths(report: dict[str, Any]) -> str:
    """'; ...': how many of the A/A comparisons rest on how many pairs, where some copies were
    measured in fewer blocks than their run (issue 24 audit: the run's length, quoted beside
    the false alarms, held for a few of them only); '' where every comparison had the run's
    length or the report is from before the breakdown."""
    by = report.get("aa_by_length")
    if not by or not by["short"]["comparisons"]:
        return ""
    short, full = by["short"], by["full"]
    copies = report["aa"].get("configurations", 0)
    pairs = _span(short["pairs_min"], short["pairs_max"])
    text = (
        f"; {_span(*by['short_copies_per_run'])} of the {copies} copies in each run were "
        f"measured in the {pairs} planned blocks only, so {short['comparisons']} of the "
        f"{short['comparisons'] + full['comparisons']} comparisons rest on {pairs} pairs, with "
        f"{_alarms(short['false_alarms'])} and their intervals held no change in "
        f"{short['covered']} of "
        f"{short['intervals']}"
    )
    if full["comparisons"]:
        text += (
            f"; the {full['comparisons']} at the run's full length, "
            f"{_span(full['pairs_min'], full['pairs_max'])} pairs, hold "
            f"{_alarms(full['false_alarms'])}, their intervals held no change in "
            f"{full['covered']} of "
            f"{full['intervals']}"
        )
    return text


def _rate(k: int, n: int) -> str:
    from tritonlab.stats.calibration import wilson_interval

    if n == 0:
        return "none"
    low, high = wilson_interval(k, n)
    # an end that whole percents would round onto a bound (96.9% as 97%), or onto 0% or 100%
    # (99.7% as 100%), keeps a decimal
    # (issue 36 audit: a coverage interval of 96.9-99.9% printed as 97-100%)
    ends = [100 * low, 100 * high]
    near = any(abs(e - round(e)) > 0 and round(e) in (0, 100, *_bounds_pct()) for e in ends)
    text = "-".join(f"{e:.1f}" if near else f"{e:.0f}" for e in ends)
    share = 100 * k / n
    # a share halfway between two whole percents keeps its decimal: rounding half to even
    # printed 2.5% as 2% (issue 36 audit)
    point = f"{share:.1f}" if abs(share - math.floor(share) - 0.5) < 1e-9 else f"{share:.0f}"
    return f"{k} of {n} ({point}%, 95% CI {text}%)"


def _bounds_pct() -> tuple[int, ...]:
    """The rates' bounds in whole percent (``calibration_report``'s false-alarm limit and
    coverage bounds)."""
    from calibration_report import COVERAGE_BOUNDS, MAX_FALSE_ALARMS

    return tuple(round(100 * b) for b in (MAX_FALSE_ALARMS, *COVERAGE_BOUNDS))


def _term_lines(report: dict[str, Any]) -> list[str]:
    """The process term: what the runs' verdicts held, what these runs estimate, and the
    false alarms each run gets with the term estimated from the others."""
    aa, term = report["aa"], report.get("process_term")
    if term is None:
        return []

    from tritonlab.stats.process_term import pair_half_width_pct

    def pct(log: float) -> str:  # a pair's 95% widening: two configurations' terms
        return f"±{pair_half_width_pct(log):.1f}%"

    lines = [
        f"- The process term (`stats/process_term.py`: each configuration's own server process, "
        f"which pairing by block cannot see) the runs' verdicts held: "
        f"{_held_term(aa['process_term_sd_log'])} on a comparison's 95% interval. Estimated "
        f"again from the A/A copies of {term['runs']} runs ({term['comparisons']} comparisons, "
        f"these and every earlier round's below): {pct(term['throughput_sd_log'])} for throughput"
        f"{_floored(report, 'throughput', 'throughput')}, "
        f"{pct(term['latency_p99_sd_log'])} for p99 latency"
        f"{_floored(report, 'latency_p99', 'p99')}."
    ]
    shipped = report["process_term_shipped"]
    low, high = shipped["coverage_bounds"]
    bounds = (
        f"false alarms at most {100 * shipped['max_false_alarms']:.0f}%, coverage "
        f"{100 * low:.0f}% to {100 * high:.0f}%"
    )
    lines.append(
        f"- tritonlab carries {pct(shipped['term']['throughput_sd_log'])}: "
        + (
            f"the term these runs held, whose rates above are within the bounds ({bounds}) by "
            "their estimates; their 95% intervals, beside each rate, reach past them, so a "
            "round this size shows the term is not far off, not that it meets the bounds."
            if shipped["from"] == "held"
            else f"the pooled estimate, since these runs' rates are not all within the bounds "
            f"({bounds}) or their verdicts did not all hold one term; a next round judges it."
        )
    )
    if "false_alarms_leave_one_out" in aa:
        lines.append(
            "- Each run with the term estimated from the other runs only: false alarms "
            f"{_rate(aa['false_alarms_leave_one_out'], aa['comparisons'])}."
        )
    return lines


def _floored(report: dict[str, Any], figure: str, words: str) -> str:
    """' (floored at zero: ...)' where the re-estimated term of ``figure`` was floored at zero
    (``calibration_report.term_parts``): the mean square of the A/A estimates is smaller than
    what the blocks' own noise gives (issue 36 audit: these mean squares called "spreads"), so
    ±0.0% says the offsets cannot be told from that noise, not that there are none (issue 34
    audit); '' otherwise or where the report predates the parts."""
    parts = (report.get("process_term_parts") or {}).get(figure)
    if not parts or not parts["floored"]:
        return ""
    spread, noise = _apart_figures(parts["mean_square_log"], parts["within_blocks_log"])
    return (
        f" (floored at zero: the mean square of the A/A estimates' log-ratios, {spread}, is "
        f"smaller than what the blocks' own noise gives, {noise} (mean squares in log units, "
        f"not spreads in %), so per-process offsets cannot be told from {words}'s noise)"
    )


def _apart_figures(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with 4 decimals, or more until the two read different (up to 10)."""
    for decimals in range(4, 11):
        shown = f"{a:.{decimals}f}", f"{b:.{decimals}f}"
        if shown[0] != shown[1]:
            break
    return shown


def _held_term(held: dict[str, float]) -> str:
    """The process term a round's verdicts held (its runs' least and greatest, in log units),
    as a pair's 95% widening."""
    from tritonlab.stats.process_term import pair_half_width_pct

    low, high = (pair_half_width_pct(held[k]) for k in ("min", "max"))
    if held["max"] == 0:
        return "none (the runs predate it)"
    return f"±{low:.1f}%" if low == high else f"±{low:.1f}% to ±{high:.1f}%"


def _spread(aa: dict[str, Any]) -> str:
    spread = aa.get("block_spread_pct_median")
    return "not stored" if spread is None else f"±{spread:.1f}%"


def _drop(effect_pct: float | None) -> str:
    return "size not measured" if effect_pct is None else f"-{effect_pct:.1f}%"


def render_md(report: dict[str, Any]) -> str:
    """calibration.md: a header, then ``readme_block``."""
    return "\n".join(
        [
            "# Calibration: how often the verdicts are wrong",
            "",
            f"Written {report['date_utc']} UTC on {report['machine']} ({report['cores']} "
            f"cores), commit {report['commit']}, from the raw files in `{report['raw']}/` "
            "(`benchmarks/calibration.py`; its docstring states the method).",
            "",
            readme_block(report),
        ]
    )


def readme_block(report: dict[str, Any]) -> str:
    """The figures docs/results.md quotes (``scripts/results_pages.py``)."""
    lines: list[str] = []
    if "aa" in report:
        m, power, b = report["measured"], report["power"], report["blocks"]
        blocks = f"{b['min']}" if b["min"] == b["max"] else f"{b['min']} to {b['max']}"
        split = (
            "the server and perf_analyzer on disjoint CPUs"
            if b["cpu_split_runs"] == report["aa"]["runs"]
            else f"{b['cpu_split_runs']} with the CPU split"
        )
        copies = report["aa"].get("configurations", 0)
        lines += [
            f"## Run verdicts ({report['aa']['runs']} fresh runs, {blocks} blocks each, "
            f"{split}, measured {m['runs_from']} to {m['runs_to']} UTC)",
            "",
            f"- A/A comparisons ({copies} identical configurations per run, every pair of "
            f"them, throughput): false alarms "
            f"{_rate(report['aa']['false_alarms'], report['aa']['comparisons'])}"
            f"{_aa_lengths(report)}.",
            f"- The runs' noise: one block's A/A throughput ratio varied by "
            f"{_spread(report['aa'])} (standard deviation, the median run), the figure to "
            "compare rounds by (the power below is at this noise).",
            *_term_lines(report),
            f"- Coverage of the 95% intervals (A/A against 0, plants against their reference): "
            f"{_rate(report['coverage']['covered'], report['coverage']['intervals'])}.",
            f"- Cells the interference monitor stored as disturbed: "
            f"{report['disturbed_cells']['disturbed']} of {report['disturbed_cells']['cells']}.",
            "",
            "| planted | reference change (95% CI) | blocks | measuring (median) | detected |",
            "|---|---|---|---|---|",
        ]
        for p in power:
            low, high = p["reference_ci95_pct"]
            ref = f"{p['reference_change_pct']:+.1f}% ({low:+.1f}% to {high:+.1f}%)"
            rows: list[tuple[object, float, int]] = [
                (b["blocks"], b["measuring_s_median"], b["detected"]) for b in p["by_blocks"]
            ]
            # the stopping point varies by run: its median with the range (issue 36 audit)
            stopped = f"{p['blocks']} (median; runs stopped at {b['min']}-{b['max']})"
            rows.append((stopped, p["measuring_s_median"], p["detected"]))
            for blocks, seconds, detected in rows:
                lines.append(
                    f"| {p['plant']} ({p['iterations']:,} turns) | {ref} | {blocks} | "
                    f"{seconds:.0f} s | {_rate(detected, p['trials'])} |"
                )
        lines += [
            "",
            "Measuring: the wall time of a run's cells up to that block, every configuration "
            f"of the run ({b['configurations']}, where a demo has five); the last row of each "
            "plant is the run as the stopping rule ended it.",
            "",
            "### Side by side, on the same cells",
            "",
            "| reading | A/A: false alarms | plants: coverage | "
            + " | ".join(f"{p['plant']} (-{p['effect_pct']:.1f}%): detected" for p in power)
            + " |",
            "|---|---|---|" + "---|" * len(power),
        ]
        readings = report["readings"]
        for reading in ("blocks", "independent runs", "one window"):
            aa = readings[f"{reading} | aa"]
            planted = [readings[f"{reading} | {p['plant']}"] for p in power]
            intervals = sum(t["intervals"] for t in planted)
            covered = sum(t["covered"] for t in planted)
            cover = _rate(covered, intervals) if intervals else "no interval"
            lines.append(
                f"| {reading} | {_rate(aa['calls'], aa['comparisons'])} | {cover} | "
                + " | ".join(_rate(t["detected"], t["comparisons"]) for t in planted)
                + " |"
            )
        lines += [
            "",
            "- blocks: tritonlab's paired verdict over every block of a run.",
            "- independent runs (AIPerf's multi-run reading): each configuration's cells cut "
            "into 5 runs; a difference when the two 95% t-intervals do not overlap.",
            "- one window (perf_analyzer's reading): one cell each, a difference beyond "
            "perf_analyzer's ±10% stability band; every block is one such reading.",
            "",
        ]
    if "gate" in report:
        g = report["gate"]
        lines += [
            "## The live gate (`tritonlab check --max-regression 5%`)",
            "",
            "Each check as a user runs it, against the first run of the latest round measured "
            "before it, with `--repeats 10 --max-repeats 40` (more rounds while an interval is "
            "wider than half its threshold). A plant's size is the reference change of its "
            "loop turns from the latest round that planted them (above, or an earlier round "
            "below).",
            "",
            f"- A/A checks (the same model again): throughput called a regression in "
            f"{_rate(g['false_regressions'], g['aa_checks'])}; throughput undecided in "
            f"{g['aa_undecided']}{_apart(g)}{_p99_misreads(g)}; passed (exit 0) in "
            f"{_rate(g['aa_passed'], g['aa_checks'])}, "
            f"so the others failed their CI job without a regression; median "
            f"{g['aa_decision_s_median'] or 0:.0f} s per check{_measured(g.get('aa_measured'))}.",
            "",
            "| planted | trials | not passed (detected) | called a regression | median time | "
            "measured (UTC; commit) |",
            "|---|---|---|---|---|---|",
        ]
        for p in g["planted"]:
            lines.append(
                f"| {p['plant']} ({p['iterations']:,} turns, {_drop(p['effect_pct'])}) | "
                f"{p['trials']} | {_rate(p['detected'], p['trials'])} | "
                f"{p['called_regression']} | {p['decision_s_median']:.0f} s | "
                f"{_measured(p, bare=True) or 'not stored'} |"
            )
        lines += [
            "",
            "A row's median time is its own checks': rows measured at other times or commits "
            "(the last column) are not a comparison of the gate's speed.",
            "",
        ]
    lines += _earlier_rounds(report.get("earlier_rounds", []))
    return "\n".join(lines)


def _earlier_rounds(rounds: list[dict[str, Any]]) -> list[str]:
    """One row per earlier round (each in a folder of its own): what it held and measured."""
    if not rounds:
        return []
    lines = [
        "## Earlier rounds",
        "",
        "Each set aside when a later round changed what verdicts hold (the process term) or "
        "what is planted; their files stay in `calibration_runs/<folder>/`, and each counts "
        "towards the process term's estimate.",
        "",
        "| folder | runs (measured, UTC) | noise (one block) | term held | A/A: false alarms | "
        "coverage | plants: detected (measuring, median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for past in rounds:
        aa, m = past["aa"], past["measured"]
        plants = "; ".join(
            f"-{p['effect_pct']:.1f}% ({p['iterations']:,} turns): "
            f"{p['detected']} of {p['trials']} ({p['measuring_s_median']:.0f} s)"
            for p in past["power"]
        )
        lines.append(
            f"| `{past['folder']}/` | {aa['runs']} ({m['runs_from']} to {m['runs_to']}) | "
            f"{_spread(aa)} | {_held_term(aa['process_term_sd_log'])} | "
            f"{_rate(aa['false_alarms'], aa['comparisons'])} | "
            f"{_rate(past['coverage']['covered'], past['coverage']['intervals'])} | {plants} |"
        )
    lines.append("")
    return lines
