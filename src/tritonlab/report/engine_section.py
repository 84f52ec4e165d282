"""The experiment log's account of how it measured: the block engine's decisions, the stopping
rule, the A/A control's noise floor and the interference monitor's findings.

Every sentence is computed from the run's files (``engine.json``, ``stopping.json``, the cells'
``interference`` records and the control's cells); nothing is stated that the files do not show.
"""

from __future__ import annotations

import math
import statistics

from tritonlab.cpu_split import CpuSplit
from tritonlab.decisions.adaptive import TARGET_HALF_WIDTH_PCT, watched_intervals
from tritonlab.experiments.blocks import (
    REQUESTS_PER_WINDOW,
    WARMUP_WINDOW_MS,
    WINDOWS_PER_CELL,
    EngineRecord,
)
from tritonlab.experiments.interference import (
    DISTURBED_FOREIGN_CORES,
    DISTURBED_RETRIES,
    DISTURBED_STEAL_CORES,
    HL_BREAKDOWN,
    MAX_DISTURBED_SHARE,
    RETRY_CLEARS_SHARE,
    RETRY_PROBE_EVERY,
    RETRY_WINDOW,
    Interference,
    disturbed_share,
    too_disturbed,
)
from tritonlab.experiments.plan import LoadKey, is_open_loop_key
from tritonlab.experiments.rounds import StoppingRecord
from tritonlab.experiments.store import CellResult
from tritonlab.explanation.explain import Analysis
from tritonlab.report.conditions_text import blocks_words
from tritonlab.report.engine_parts import cell_windows, process_term_line
from tritonlab.report.still_open import reason_text
from tritonlab.stats.error_rates import (
    DETECTABLE_FACTOR,
    MeasuredRates,
    PlantedPower,
    detectable_change_pct,
    measured_rates,
)
from tritonlab.stats.noise_floor import NoiseFloor
from tritonlab.stats.process_term import pair_half_width_pct
from tritonlab.stats.run_trust import RunTrust
from tritonlab.stats.verdicts import Verdict, tenth_text


def _capped_text(engine: EngineRecord) -> str:
    """'' unless a load's window was capped at the plan's: then how many requests its slowest
    configuration's windows held (issue 36 audit: 2,000 ms windows were said to hold 100
    requests at 16.5 infer/s)."""
    held = []
    for key, ms in sorted(engine.windows_ms.items()):
        rates = (engine.warmup_infer_per_s or {}).get(key, {})
        if not rates:
            continue
        parsed = LoadKey.parse(key)
        batch = parsed.batch_size if parsed is not None else 1
        requests = min(rates.values()) / max(1, batch) * ms / 1000.0
        if requests < REQUESTS_PER_WINDOW:
            held.append(f"about {requests:.0f} requests at {key}")
    if not held:
        return ""
    return (
        f", capped at the plan's window, so the slowest configuration's windows held "
        f"{', '.join(held)}"
    )


def _widened_text(floor: NoiseFloor) -> str:
    """'' unless only the process term kept the control from reading a difference: then what
    the pairing alone read, and what that means for the run's other verdicts."""
    open_loop = is_open_loop_key(floor.load_key)  # both copies serve the offered rate there
    parts = [
        f"{'throughput' if v.figure == 'throughput' else 'p99'} {v.unwidened_word} "
        f"(CI {tenth_text(low)} to {tenth_text(high)})"
        for v in floor.widened_only
        if v.unwidened_pct is not None and not (open_loop and v.figure == "throughput")
        for low, high in [v.unwidened_pct]
    ]
    if not parts:
        return ""
    return (
        f"; the blocks paired alone read {' and '.join(parts)}: the two copies' own server "
        "processes ran at different speeds in this run, which the interval holds as each "
        "process's spread between runs (the method's process term), so only that term keeps "
        "this control from reading a difference"
    )


def _width(v: Verdict) -> str:
    width = v.half_width_pct
    return "no interval" if width is None else f"half-width ±{width:.1f}%"


def placement_line(cores: int, split: CpuSplit | None) -> str:
    """Where the server and perf_analyzer ran (``cpu_split.py``) on a machine of ``cores``."""
    if split is None:
        return (
            f"- Placement: perf_analyzer and the server share this machine's {cores} "
            "cores (this run predates the CPU split, which now puts them on disjoint CPUs)."
        )
    if not split.split:
        return f"- Placement: {split.describe()}."
    return (
        f"- Placement: {split.describe()}. Every configuration is compared on the server's "
        f"{len(split.server_cpus)} of {cores} CPUs (`--no-cpu-split` shares them all)."
    )


def engine_lines(
    engine: EngineRecord | None,
    stopping: StoppingRecord | None,
    cells: list[CellResult],
    split: CpuSplit | None = None,
    sweep: bool = False,
    tune: bool = False,
    open_verdicts: list[str] | None = None,
) -> list[str]:
    """How the cells were measured (block engine), where the server and perf_analyzer ran,
    and why the rounds stopped (``sweep``: a sweep's rule, which watches its picks;
    ``open_verdicts``: the verdicts it left open, named, ``report/still_open.py``)."""
    lines: list[str] = []
    if engine is not None:
        windows = cell_windows(cells) or ", ".join(
            f"{ms} ms " + ("at every load" if key == "*" else f"at {key}")
            for key, ms in sorted(engine.windows_ms.items())
        )
        lines += [
            "## How it was measured",
            "",
            f"- Engine: blocks. {engine.coload.reason if engine.coload else ''}"
            + (
                f", loaded in a shuffled order ({', '.join(engine.load_order)})"
                if engine.load_order
                else ""
            )
            + ".",
            (
                f"- The search's cells: {blocks_words(cells, tune=True)}"
                if tune
                else f"- Cells: {blocks_words(cells)} (seed {engine.seed})"
            )
            + f"; a cell is {WINDOWS_PER_CELL} perf_analyzer windows of {windows} ("
            + (
                "the search's window, `--window-ms`"
                if tune
                else f"the shortest window that holds {REQUESTS_PER_WINDOW} requests at the "
                f"slowest configuration's warm-up throughput{_capped_text(engine)}, "
                f"{WARMUP_WINDOW_MS} ms warm-up cells first, discarded"
            )
            + "). Verdicts pair the cells "
            + (
                "by repeat number: a tune's rounds are not time blocks (each contender's rounds "
                "are its own, so the two cells of a pair may be minutes apart, not measured "
                "together)."
                if tune
                else "measured in the same block or round."
            ),
            placement_line(engine.cores, split),
            *reload_lines(engine),
            *process_term_line(engine),
        ]
    elif split is not None:  # the classic engine, in a run that recorded its placement
        cores = len({*split.server_cpus, *split.client_cpus})  # the split covers every CPU
        lines += [
            "## How it was measured",
            "",
            "- Engine: classic (one configuration loaded at a time, each cell perf_analyzer's "
            "stable windows).",
            placement_line(cores, split),
        ]
    if stopping is not None:
        rule = (
            f"while {watched_intervals(sweep)} is "
            f"wider than ±{TARGET_HALF_WIDTH_PCT:g}%, whatever its word (a rule on width, not on "
            "where the interval lies, keeps its coverage); p99 intervals have no target"
            if stopping.precision
            else "while a headline verdict is undecided"
        )
        budget = stopping.budget_s
        lines += [
            f"- Stopping rule: after the planned rounds, one more round at a time {rule}, up to "
            f"{stopping.max_rounds} repeats of each configuration"
            + (f" and {budget:.0f} s of extra rounds" if budget is not None else "")
            + (
                f" and {stopping.measuring_budget_s:.0f} s of measuring in all (the planned "
                "rounds, cells measured again and warm-ups included)"
                if stopping.measuring_budget_s is not None
                else ""
            )
            + f"; it stopped because {reason_text(stopping.reason, open_verdicts or [])}. "
            "Extra rounds took "
            f"{stopping.extra_s:.0f} s; a cell took {stopping.cell_cost_s:.2f} s (median, "
            f"the budget check's estimate); all cells of this session together took "
            f"{stopping.cells_wall_s:.0f} s"
            + (
                f"; the run measured {stopping.measured_s:.0f} s in all."
                if stopping.measured_s is not None
                else "."
            ),
        ]
    return [*lines, ""] if lines else []


def reload_lines(engine: EngineRecord) -> list[str]:
    """The reloads: when, how long they took, and why the engine makes them."""
    if engine.reload_every_blocks <= 0:
        return []
    why = (
        "a stub process has a speed of its own for its lifetime, so each configuration is "
        "spread over several processes"
    )
    if not engine.reloads:
        return [
            f"- Reloads: every configuration is loaded again (new processes) before every "
            f"{engine.reload_every_blocks} blocks ({why}); none was due in this run."
        ]
    numbers = [str(r.before_block + 1) for r in engine.reloads]
    before = (
        f"block {numbers[0]}"
        if len(numbers) == 1
        else f"blocks {', '.join(numbers[:-1])} and {numbers[-1]}"
    )
    return [
        f"- Reloads: every configuration was loaded again (new processes, a shuffled order, "
        f"one discarded warm-up cell each) before {before} ({why}); "
        f"{len(engine.reloads)} reload{'s' if len(engine.reloads) != 1 else ''} took "
        f"{sum(r.seconds for r in engine.reloads):.0f} s in all."
    ]


def verdict_blocks(analyses: list[Analysis]) -> int | None:
    """How many blocks most of the log's throughput verdicts against the baseline pair (their
    median), None without any."""
    pairs = sorted(
        v.pairs
        for a in analyses
        for r in a.reports[1:]
        if (v := r.verdicts.get("throughput")) is not None and v.has_interval
    )
    return pairs[len(pairs) // 2] if pairs else None


def floor_reached(analyses: list[Analysis]) -> dict[str, list[str]]:
    """Per load, the rows whose throughput or p99 change (against the baseline or the row they
    are explained from) the A/A control's interval reaches (``VariantReport.floor_reached``)."""
    out: dict[str, list[str]] = {}
    for analysis in analyses:
        for r in analysis.reports:
            if r.floor_reached:
                out.setdefault(analysis.load_key, []).append(f"'{r.summary.variant.description}'")
    return out


# A control whose throughput interval is wider than this (half-width, %) is said to tell little.
WIDE_CONTROL_PCT = 10.0


def noise_floor_lines(
    floors: list[NoiseFloor],
    trust: RunTrust | None = None,
    blocks: bool = False,
    reached: dict[str, list[str]] | None = None,
    run_blocks: int | None = None,
) -> list[str]:
    """The A/A control's verdicts, and what they mean for the run's other verdicts; for the
    block engine (``blocks``), the smallest change its noise lets a verdict find and the error
    rates the calibration benchmark measured. Whether the run is trusted is ``trust``'s to say
    (``stats/run_trust.py``): a control that reads no difference does not make a disturbed run
    trusted."""
    if not floors:
        return []
    lines = ["## Noise floor (A/A control)", ""]
    for f in floors:
        if not f.trusted and (trust is None or trust.state == "control flagged"):
            verdict = (
                "**the two copies of one configuration differ: this run's verdicts are not to "
                "be trusted**"
            )
        elif not f.trusted:
            verdict = (
                "the two copies read different here; with the run's other control intervals, "
                "no more of them did than noise alone gives in one run in ten (the count is "
                "below), so this one flag does not make the run untrusted, but a verdict near "
                "this noise floor may be noise"
            )
        elif trust is not None and not trust.trusted:
            verdict = f"**but {trust.caveat()}**"
        elif not (f.throughput.has_interval or f.latency_p99.has_interval):
            verdict = "this control tells nothing at this load (neither figure has an interval)"
        elif is_open_loop_key(f.load_key):
            verdict = (
                "at an open-loop load both copies serve the rate offered, so throughput cannot "
                "tell them apart and this control shows only that p99 did not separate them"
            )
        else:
            shown = f.throughput.half_width_pct
            verdict = "its verdicts can be trusted as far as this control can tell" + (
                f", which is only to about ±{shown:.0f}%: the control's own interval"
                if shown is not None and shown > WIDE_CONTROL_PCT
                else ""
            )
            if rows := (reached or {}).get(f.load_key):
                # issue 36 audit: "trusted" beside rows the same log said the control reaches
                verdict += (
                    f", except where its interval reaches a row's change: "
                    f"{'; '.join(rows)} (said in those rows: they may be noise)"
                )
        verdict += _widened_text(f)
        width = f.throughput.half_width_pct
        found = (
            f" At this noise a throughput change of about ±{detectable_change_pct(width):.0f}% "
            f"is found 9 times in 10 ({DETECTABLE_FACTOR:.2f} times the control's half-width, "
            "a normal approximation; smaller changes are often missed)."
            if blocks and width is not None
            else ""
        )
        lines.append(
            f"- {f.load_key}: the baseline served again as `{f.control}` reads throughput "
            f"{f.throughput.phrase()} ({_width(f.throughput)}), p99 {f.latency_p99.phrase()} "
            f"({_width(f.latency_p99)}): {verdict}.{found}"
        )
    if blocks and (rates := measured_rates()) is not None:
        lines.append(measured_rates_line(rates, run_blocks))
    intervals = [v for f in floors for v in (f.throughput, f.latency_p99) if v.has_interval]
    if len(intervals) > 1:
        told = sum(1 for v in intervals if v.clear)
        chance = 100 * (1 - 0.95 ** len(intervals))
        loads = sum(1 for f in floors if f.throughput.has_interval or f.latency_p99.has_interval)
        lines.append(
            f"- In all, {told} of the {len(intervals)} control intervals (throughput and p99 at "
            f"the {loads} load point{'s' if loads != 1 else ''} where the control has one) read "
            "a difference; "
            f"with {len(intervals)} intervals at 95% and nothing but noise between the copies, "
            f"at least one would {chance:.0f}% of the time."
        )
    return [*lines, ""]


def _planted(p: PlantedPower) -> str:
    """'a planted drop of 3.5% was found in 17 of 20 runs (at their stopping point, median 19
    blocks; with 10 blocks in 13, with 5 in 12)'."""
    fewer = "; ".join(
        f"with {b.blocks} blocks in {b.detected}"
        for b in sorted(p.by_blocks, key=lambda b: -b.blocks)
    )
    where = (
        f" (at their stopping point, median {p.blocks} blocks"
        + (f"; {fewer}" if fewer else "")
        + ")"
        if p.blocks is not None
        else ""
    )
    return (
        f"a planted drop of {-p.reference_change_pct:.1f}% was found in {p.detected} of "
        f"{p.trials} runs{where}"
    )


def measured_rates_line(rates: MeasuredRates, run_blocks: int | None = None) -> str:
    """What the calibration benchmark measured, as that machine's rates; with ``run_blocks``
    (how many blocks this log's verdicts mostly rest on), that its power is the rate at about
    that many blocks, not at the calibration's stopping point (issue 36 audit)."""
    planted = "; ".join(_planted(p) for p in rates.power)
    fewer = (
        f"; most of this log's verdicts rest on {run_blocks} blocks, so their power is the "
        "rate at about that many blocks, not at the stopping point"
        if run_blocks is not None and any(p.blocks for p in rates.power)
        else ""
    )
    if rates.block_spread_pct > 0:
        planted += (
            f" (there one block's throughput varied by ±{rates.block_spread_pct:.1f}% between "
            "identical copies; a noisier run finds less)"
        )
    planted += fewer
    term = rates.process_term
    held = ""
    if term is not None:
        then = rates.process_term_held_sd_log
        if math.isclose(then, term.throughput_sd_log):
            measured_with = "with that same term"
        elif then > 0:
            measured_with = f"while verdicts held ±{pair_half_width_pct(then):.1f}%"
        else:
            measured_with = "before verdicts held it"
        held = (
            " Verdicts between two configurations of a co-loaded run hold the process term "
            f"that benchmark estimated, ±{term.pair_half_width_pct():.1f}% on a throughput "
            'interval (docs/measuring.md, "Each configuration\'s own process"); '
            f"the rates above were measured {measured_with}."
        )
    return (
        f"- Measured error rates of these verdicts (`make calibration-bench`, "
        f"benchmarks/results/calibration.md: {rates.runs} fresh runs of up to {rates.blocks} "
        f"blocks on {rates.machine}, {rates.cores} cores, {rates.date_utc} UTC"
        + (", the server and perf_analyzer on disjoint CPUs" if rates.cpu_split else "")
        + "): identical "
        f"configurations were called different in {rates.false_alarms} of "
        f"{rates.aa_comparisons} comparisons, and the 95% intervals held the true change in "
        f"{rates.covered} of {rates.intervals}; {planted}. Those are that machine's rates at "
        "the demo's load with that placement; another machine, load or placement has its own."
        + held
    )


def interference_lines(cells: list[CellResult]) -> list[str]:
    """What the interference monitor saw, which cells it had measured again, which stayed
    disturbed, and the idle co-loaded models' CPU."""
    records = [(c.cell_id, c.interference) for c in cells if c.interference is not None]
    if not records:
        return []
    foreign = [r.foreign_cores for _, r in records]
    steal = [r.steal_cores for _, r in records]
    idle = [r.idle_models_cores for _, r in records]
    retried = [cell for cell, r in records if r.attempts > 1]
    disturbed = [cell for cell, r in records if r.disturbed]
    kept = [cell for cell, r in records if r.disturbed and r.attempts < 1 + DISTURBED_RETRIES]
    retries = sum(max(r.attempts - 1, 0) for _, r in records)
    cleared = sum(1 for _, r in records if r.attempts > 1 and not r.disturbed)
    kept_lines = (
        [
            f"- Kept disturbed without all retries: {len(kept)} cell(s){_first_eight(kept)}. "
            f"Retries were not clearing cells then (fewer than {RETRY_CLEARS_SHARE:.0%} of the "
            f"last {RETRY_WINDOW} came back undisturbed: a steady load, which a retry measures "
            f"again), so these were kept as measured; one in {RETRY_PROBE_EVERY} was still "
            "retried, to notice the load ending."
        ]
        if kept
        else []
    )
    return [
        "## Interference",
        "",
        f"- Foreign CPU (used by processes other than the server, its stubs, perf_analyzer and "
        f"tritonlab) per cell: median {statistics.median(foreign):.2f} cores, max "
        f"{max(foreign):.2f}; steal time median {statistics.median(steal):.2f}, max "
        f"{max(steal):.2f} cores ({len(records)} cells). A cell above "
        f"{DISTURBED_FOREIGN_CORES:g} foreign or {DISTURBED_STEAL_CORES:g} steal cores is "
        f"disturbed and measured again, at most {DISTURBED_RETRIES} more times.",
        f"- Re-measured because disturbed: {len(retried)} cell(s){_first_eight(retried)}; "
        f"{retries} retries in all, {cleared} of the cells came back undisturbed.",
        *kept_lines,
        f"- Stored as disturbed (every try made was): {len(disturbed)}{_first_eight(disturbed)}"
        + _disturbed_verdict([r for _, r in records])
        + _disturbed_cause([r for _, r in records if r.disturbed])
        + ".",
        f"- Idle co-loaded models (the other configurations' backend stubs) used median "
        f"{statistics.median(idle):.3f}, max {max(idle):.3f} cores while another was measured.",
        "",
    ]


def _disturbed_cause(records: list[Interference]) -> str:
    """What made the stored-disturbed cells so: how many were over the foreign-CPU limit and
    how many over the steal limit, with the medians over them ('' for none)."""
    if not records:
        return ""
    foreign = sum(r.foreign_cores > DISTURBED_FOREIGN_CORES for r in records)
    steal = sum(r.steal_cores > DISTURBED_STEAL_CORES for r in records)
    return (
        f"; what disturbed them: foreign CPU over {DISTURBED_FOREIGN_CORES:g} cores in "
        f"{foreign}, steal time over {DISTURBED_STEAL_CORES:g} cores in {steal} (median "
        f"{statistics.median(r.foreign_cores for r in records):.2f} foreign and "
        f"{statistics.median(r.steal_cores for r in records):.2f} steal cores over them)"
    )


def _disturbed_verdict(records: list[Interference]) -> str:
    """What the share of disturbed cells means for the run's verdicts."""
    share = disturbed_share(records)
    if not share:
        return ""
    limit = f"{100 * MAX_DISTURBED_SHARE:.0f}%"
    shown = f"{100 * share:.0f}% of {len(records)}"
    if not too_disturbed(share):
        return f" ({shown}, within the {limit} a run's verdicts may rest on)"
    return (
        f" ({shown}): **more than {limit}, so this run's verdicts are not to be trusted**: a "
        f"verdict's Hodges-Lehmann estimate withstands about {100 * HL_BREAKDOWN:.0f}% of its "
        f"pairs wrong, and a share above {limit} of disturbed cells touches more pairs than that"
    )


def _first_eight(cells: list[str]) -> str:
    """': a, b, c' naming the first eight cells and how many more; '' for none."""
    more = f" and {len(cells) - 8} more" if len(cells) > 8 else ""
    return ": " + ", ".join(cells[:8]) + more if cells else ""
