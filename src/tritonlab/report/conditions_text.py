"""The log's "Data sent", "Load", "Measurement" and "Trust" conditions, computed from the
stored cells and manifest.

A fixed sentence outlived the engine it described: block-engine logs said "stability threshold
25%, at most 8 windows, one configuration loaded at a time" where every cell ran with the check
off, 3 windows and every configuration co-loaded (issue 36). Here each part is read from the
cells (windows, stability, windows per cell, cells per configuration, blocks, sequences) and
from the plan only what the cells cannot carry (the engine, the retry rule).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.plan import ExperimentPlan, sequence_length_of
from tritonlab.experiments.store import CellResult
from tritonlab.perf.settings import PerfSettings
from tritonlab.report.plot_support import PROTOCOL_NAMES
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


def per_configuration(cells: Sequence[CellResult]) -> str:
    """ "38 cells per configuration and load" (a span where they differ), from the cells."""
    counts = sorted(Counter((c.variant.name, c.load_key) for c in cells).values())
    low, high = counts[0], counts[-1]
    span = str(low) if low == high else f"{low}-{high}"
    return f"{span} cell{'s' if high > 1 else ''} per configuration and load"


# How a tune's race orders its cells (``decisions.race.race_step``): the contenders are re-drawn
# after every cell and the one with the fewest race cells goes next, so its rounds are per
# contender, not shared time blocks (issue 36 audit: "each contender once per round, in that
# order" where one contender's round 3 came after two others' round 4).
RACE_ORDER = (
    "its race's cells one at a time, the contender with the fewest race cells next and the "
    "contenders re-drawn after each cell (so one contender's k-th race cell may come after "
    "another's k+1-th)"
)


def blocks_words(cells: Sequence[CellResult], tune: bool = False) -> str:
    """How the block engine's cells were grouped, from the cells: full blocks (every
    configuration at every load once, shuffled) and extra rounds of some only; a tune's cells
    in its search's order (issue 36 audit: "28 blocks, every configuration ... once per
    block" where 18 held a few cells, and a tune called shuffled)."""
    if tune:
        return (
            "every configuration kept loaded in one server once the search reached it; cells "
            f"measured in the order the search took them, {RACE_ORDER} (not shuffled, not "
            "whole blocks)"
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
    parts.append(per_configuration(cells))
    if plan.measurement.engine == "blocks":
        parts.append(blocks_words(cells, tune))
    elif tune:
        # a classic tune's search cells run one after another, only its race's rounds
        # interleave (issue 36 audit: "interleaved" said of a tune whose 17 of 20 cells were
        # single search-phase cells)
        parts.append(
            "one configuration loaded at a time; cells measured in the order the search took "
            f"them, one after another, {RACE_ORDER}"
        )
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


def uneven_repeats_note(repeat_counts: Sequence[int], why: str = "", tune: bool = False) -> str:
    """'' when every row at a load rests on as many repeats; else the short caution a page
    quoting the rows carries (issue 36 audit: pages dropped the log's note and set a median
    over 27 blocks beside one over 10 while the run drifted). A tune's rows pair by repeat
    number, its first repeat a search-phase cell (issue 36 audit: "paired by block")."""
    counts = sorted(set(repeat_counts))
    if len(counts) < 2:
        return ""
    paired = (
        "paired by repeat number, each configuration's first repeat included: a search-phase "
        "cell taken at its own time, not in a shared round, so these verdicts are not the "
        "race's alone"
        if tune
        else "paired by block"
    )
    return (
        f"These rows rest on {counts[0]} to {counts[-1]} repeats{f' ({why})' if why else ''}, "
        f"so their medians are over different {'repeats' if tune else 'blocks'}: compare them "
        f"by the verdicts ({paired}), not by the medians."
    )


def load_line(settings: list[PerfSettings], load_points: int, lengths: Sequence[int] = ()) -> str:
    """One load point in full; several as the values each dimension took (``lengths``: the
    sequence lengths the load points sent)."""
    if load_points == 1:
        s = settings[0]
        load = (
            f"concurrency {s.concurrency}"
            if s.concurrency
            else "a replayed trace (see Replayed traces)"
            if s.request_intervals is not None
            else s.load_label()
        )
        mode = "async" if s.async_mode else "sync"
        return (
            f"- Load: {PROTOCOL_NAMES[s.protocol]}, client batch size {s.batch_size}, {load}, "
            f"{mode} requests from perf_analyzer on the same machine."
        )
    protocols = sorted({PROTOCOL_NAMES[s.protocol] for s in settings})
    batches = sorted({s.batch_size for s in settings})
    levels = sorted({s.concurrency for s in settings if s.concurrency})
    rates = sorted({s.request_rate_per_s for s in settings if s.request_rate_per_s})
    parts = [
        f"{load_points} load points: {' and '.join(protocols)}",
        f"client batch size {', '.join(str(b) for b in batches)}",
    ]
    if levels:
        parts.append(f"concurrency {', '.join(str(c) for c in levels)} (sync requests)")
    if rates:
        parts.append(
            f"open-loop Poisson rates from {rates[0]:,.0f} to {rates[-1]:,.0f} req/s "
            "(async requests, a fraction of each configuration's own peak)"
        )
    if any(s.request_intervals is not None for s in settings):
        parts.append("replayed traces (async requests; see Replayed traces)")
    if len(lengths) > 1:
        parts.append(f"sequence length {', '.join(str(n) for n in lengths)}")
    return "- Load: " + "; ".join(parts) + "; perf_analyzer on the same machine."


def sequence_lengths(load_keys: Sequence[str]) -> list[int]:
    """The sequence lengths the load keys name (``_s128``), ascending."""
    return sorted({n for k in load_keys if (n := sequence_length_of(k)) is not None})


def sent_lines(manifest: Manifest, load_keys: Sequence[str] = ()) -> list[str]:
    """What every request carried: shape and values per input, and where the dims came from;
    with load points at several sequence lengths, that these shapes are the reference length's
    (issue 36 audit: "[batch, 128]" stated for a run whose loads also sent 32 and 512)."""
    if (sent := manifest.inputs) is None:
        return []
    lengths = sequence_lengths(load_keys)
    lines = ["- Data sent (the correctness check, in-process timing and perf_analyzer alike):"]
    lines += [f"  - {line}" for line in sent.describe()]
    if sent.dims_note:
        lines.append(f"  - Shapes: {sent.dims_note}.")
    if len(lengths) > 1:
        lines.append(
            "  - Sequence lengths: the load points sent "
            f"{', '.join(str(n) for n in lengths)} in the dynamic dims (each load key's `_s` "
            "part); the shapes above are the reference length's, the others the same values "
            "at their length."
        )
    if not sent.batched:
        lines.append(
            "  - The model has no batch axis, so it is served with `max_batch_size: 0` and "
            "every request carries exactly these shapes."
        )
    return lines
