"""The log's "Measurement" and "Trust" conditions, computed from the stored cells.

A fixed sentence outlived the engine it described: block-engine logs said "stability threshold
25%, at most 8 windows, one configuration loaded at a time" where every cell ran with the check
off, 3 windows and every configuration co-loaded (issue 36). Here each part is read from the
cells (windows, stability, windows per cell, cells per configuration, blocks, sequences) and
from the plan only what the cells cannot carry (the engine, the retry rule).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tritonlab.experiments.plan import ExperimentPlan
from tritonlab.experiments.store import CellResult
from tritonlab.stats.run_trust import RunTrust

# perf_analyzer's stability check is off where the threshold lets every window pass.
STABILITY_OFF_PCT = 100.0


def _windows(cells: Sequence[CellResult]) -> str:
    counts = Counter(c.perf.settings.measurement_interval_ms for c in cells)
    (usual, _), *others = counts.most_common()
    text = f"{usual:,} ms time windows"
    if others:
        text += (
            " ("
            + ", ".join(f"{w:,} ms in {n} cell{'s' if n > 1 else ''}" for w, n in sorted(others))
            + ")"
        )
    return text


def _stability(cells: Sequence[CellResult]) -> str:
    thresholds = sorted({c.perf.settings.stability_percentage for c in cells})
    trials = sorted({c.perf.settings.max_trials for c in cells})
    span = str(trials[0]) if len(trials) == 1 else f"{trials[0]}-{trials[-1]}"
    if all(t >= STABILITY_OFF_PCT for t in thresholds):
        return f"the stability check off ({span} windows per cell, averaged)"
    shown = ", ".join(f"{t:g}%" for t in thresholds)
    return f"stability threshold {shown}, at most {span} windows per cell"


def _per_configuration(cells: Sequence[CellResult]) -> str:
    counts = sorted(Counter((c.variant.name, c.load_key) for c in cells).values())
    low, high = counts[0], counts[-1]
    span = str(low) if low == high else f"{low}-{high}"
    return f"{span} cell{'s' if high > 1 else ''} per configuration and load"


def blocks_words(cells: Sequence[CellResult], tune: bool = False) -> str:
    """How the block engine's cells were grouped, from the cells: full blocks (every
    configuration at every load once, shuffled) and extra rounds of some only; a tune's cells
    in its search's order (issue 36 audit: "28 blocks, every configuration ... once per
    block" where 18 held a few cells, and a tune called shuffled)."""
    if tune:
        return (
            "every configuration kept loaded in one server once the search reached it; cells "
            "measured in the order the search took them, its race's rounds measuring each "
            "contender once per round in that order (not shuffled, not whole blocks)"
        )
    pairs = {(c.variant.name, c.load_key) for c in cells}
    by_block: dict[int | str, set[tuple[str, str]]] = {}
    for c in cells:
        by_block.setdefault(c.block, set()).add((c.variant.name, c.load_key))
    full = sum(1 for held in by_block.values() if held == pairs)
    partial = len(by_block) - full
    text = (
        f"{full} block{'s' if full != 1 else ''}, every configuration co-loaded in one server "
        "and measured once per block in a shuffled order"
    )
    if partial:
        text += (
            f", then {partial} extra round{'s' if partial != 1 else ''} of only the "
            "configurations and loads a watched verdict needed"
        )
    return text


def measurement_line(plan: ExperimentPlan, cells: Sequence[CellResult], tune: bool = False) -> str:
    """``- Measurement: ...`` for the log's Conditions, from ``cells`` (and the plan's engine;
    ``tune``: a tune's search)."""
    if not cells:
        return "- Measurement: no cell was measured."
    parts = [f"perf_analyzer {_windows(cells)}", _stability(cells)]
    if plan.measurement.engine == "classic" and plan.measurement.retries_when_unstable:
        parts.append("an unstable cell is retried with a window twice as long")
    parts.append(_per_configuration(cells))
    if plan.measurement.engine == "blocks":
        parts.append(blocks_words(cells, tune))
    else:
        parts.append(
            "interleaved (every configuration once, then again), one configuration loaded at a time"
        )
    lengths = sorted({n for c in cells if (n := c.perf.settings.requests_per_sequence)})
    if lengths:
        parts.append(
            f"sequences of {', '.join(str(n) for n in lengths)} requests (concurrency counts "
            "the sequences open at a time)"
        )
    return "- Measurement: " + "; ".join(parts) + "."


def trust_line(trust: RunTrust) -> str:
    """The Conditions line that states the run's trust (``stats/run_trust.py``) once, with its
    figures; every page that quotes the run carries the same ``caveat``."""
    if not trust.trusted:
        return (
            f"- Trust: **{trust.state}**: {trust.caveat()}. The verdicts below carry this "
            "doubt, and the pages that quote this run say so."
        )
    if caveat := trust.caveat():
        return f"- Trust: {trust.state}: {caveat}; the pages that quote this run say so."
    checks = []
    if trust.controls:
        widened = "; ".join(
            f"{w.figure} at `{w.load_key}` {w.phrase}" for w in trust.controls_widened
        )
        checks.append(
            f"the A/A control{'s' if trust.controls > 1 else ''} told no identical copies apart"
            + (
                f" (but only once the process term widened an interval: {widened}; see the "
                "noise floor)"
                if widened
                else ""
            )
        )
    else:
        checks.append("no A/A control was measured (the interference monitor alone checked it)")
    if trust.cells_monitored:
        checks.append(
            f"{trust.cells_disturbed} of {trust.cells_monitored} monitored cells were stored "
            "disturbed"
        )
    return f"- Trust: quiet: {', and '.join(checks)}."


def uneven_repeats_note(repeat_counts: Sequence[int], why: str = "") -> str:
    """'' when every row at a load rests on as many repeats; else the short caution a page
    quoting the rows carries (issue 36 audit: pages dropped the log's note and set a median
    over 27 blocks beside one over 10 while the run drifted)."""
    counts = sorted(set(repeat_counts))
    if len(counts) < 2:
        return ""
    return (
        f"These rows rest on {counts[0]} to {counts[-1]} repeats{f' ({why})' if why else ''}, "
        "so their medians are over different blocks: compare them by the verdicts (paired by "
        "block), not by the medians."
    )
