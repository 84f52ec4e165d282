"""The log's Measurement condition is computed from the cells (issue 36, item 1): a block-engine
run states its own windows, the stability check off, its blocks and co-loading; a classic run
its stability threshold, retries and one configuration at a time; each from what the cells
carry, so a changed setting changes the sentence."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from tritonlab.experiments.store import load_cells, load_manifest
from tritonlab.report.conditions_text import measurement_line

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _line(example: str) -> str:
    run = EXAMPLES / example
    return measurement_line(load_manifest(run).plan, load_cells(run))


def test_a_block_engine_run_states_its_own_settings() -> None:
    line = _line("simple_mlp_cache")
    assert (
        "stability threshold 25%" not in line and "one configuration loaded at a time" not in line
    )
    assert "the stability check off (3 windows per cell, averaged)" in line
    assert "every configuration co-loaded in one server" in line
    cells = load_cells(EXAMPLES / "simple_mlp_cache")
    windows = Counter(c.perf.settings.measurement_interval_ms for c in cells)
    usual = windows.most_common(1)[0][0]
    assert line.startswith(f"- Measurement: perf_analyzer {usual:,} ms time windows")
    pairs = {(c.variant.name, c.load_key) for c in cells}
    held: dict[object, set[tuple[str, str]]] = {}
    for c in cells:
        held.setdefault(c.block, set()).add((c.variant.name, c.load_key))
    full = sum(1 for h in held.values() if h == pairs)
    assert f"{full} blocks, every configuration" in line
    assert f"then {len(held) - full} extra rounds of only the configurations" in line


def test_a_classic_run_states_its_threshold_and_retries() -> None:
    line = _line("simple_mlp")
    assert "stability threshold 25%, at most 8 windows per cell" in line
    assert "an unstable cell is retried with a window twice as long" in line
    counts = Counter((c.variant.name, c.load_key) for c in load_cells(EXAMPLES / "simple_mlp"))
    assert f"{max(counts.values())} cells per configuration and load" in line
    assert load_manifest(EXAMPLES / "simple_mlp").plan.repeats == 3  # the old sentence's figure
    assert "one configuration loaded at a time" in line and "sequences of" not in line


def test_the_sentence_follows_the_cells() -> None:
    run = EXAMPLES / "simple_mlp"
    cells = load_cells(run)
    longer = [
        dataclasses.replace(
            c,
            perf=dataclasses.replace(
                c.perf,
                settings=dataclasses.replace(
                    c.perf.settings, measurement_interval_ms=4000, requests_per_sequence=20
                ),
            ),
        )
        for c in cells[:2]
    ]
    line = measurement_line(load_manifest(run).plan, [*longer, *cells[2:]])
    assert "2,000 ms time windows (4,000 ms in 2 cells)" in line
    assert "sequences of 20 requests" in line
    assert measurement_line(load_manifest(run).plan, []) == "- Measurement: no cell was measured."


def test_an_a_a_control_that_cannot_tell_is_not_said_to_show_trust() -> None:
    """Issue 36 (minor): an open-loop control with no interval read "its verdicts can be
    trusted as far as this control can tell". A control without an interval says it tells
    nothing; an open-loop one with a p99 interval says only p99 could tell; a closed-loop one
    with intervals is the one that says "can be trusted"."""
    import dataclasses as dc

    from tritonlab.report.engine_section import noise_floor_lines
    from tritonlab.stats.noise_floor import NoiseFloor
    from tritonlab.stats.verdicts import Verdict, Word

    t = Verdict("throughput", Word.NO_CLEAR, 0.0, 1.0, 1.0, "paired", -3.0, 3.0, 20)
    p99 = dc.replace(t, figure="latency_p99")
    none = dc.replace(t, word=Word.NOT_COMPARABLE, low_pct=None, high_pct=None, change_pct=None)
    floors = [
        NoiseFloor("grpc_b1_p80", "baseline_aa", none, dc.replace(none, figure="latency_p99")),
        NoiseFloor("grpc_b1_p50", "baseline_aa", t, p99),
        NoiseFloor("grpc_b1_c16", "baseline_aa", t, p99),
    ]
    lines = noise_floor_lines(floors, blocks=True)
    p80, p50, c16 = (
        next(ln for ln in lines if ln.startswith(f"- {k}"))
        for k in ("grpc_b1_p80", "grpc_b1_p50", "grpc_b1_c16")
    )
    assert "this control tells nothing at this load" in p80 and "can be trusted" not in p80
    assert "this control shows only that p99 did not separate them" in p50
    assert "can be trusted" not in p50
    assert "can be trusted as far as this control can tell" in c16


def test_open_loop_keys_are_told_from_closed_loop_ones() -> None:
    from tritonlab.experiments.plan import is_open_loop_key

    assert all(map(is_open_loop_key, ["grpc_b1_r200", "grpc_b1_k50", "http_b1_p70", "grpc_b1_tx"]))
    assert not any(map(is_open_loop_key, ["grpc_b1_c8", "grpc_b4_c16_s128", "not a key"]))


def test_a_wide_control_says_how_little_it_tells() -> None:
    """Issue 36: logs said their verdicts "can be trusted" on A/A half-widths of ±16-42%. Above
    ``WIDE_CONTROL_PCT`` the line says the control only tells to its own width; below, not."""
    import dataclasses as dc

    from tritonlab.report.engine_section import WIDE_CONTROL_PCT, noise_floor_lines
    from tritonlab.stats.noise_floor import NoiseFloor
    from tritonlab.stats.verdicts import Verdict, Word

    def floor(half: float) -> NoiseFloor:
        t = Verdict("throughput", Word.NO_CLEAR, 0.0, 1.0, 1.0, "paired", -half, half, 10)
        return NoiseFloor("grpc_b1_c8", "baseline_aa", t, dc.replace(t, figure="latency_p99"))

    wide = noise_floor_lines([floor(2 * WIDE_CONTROL_PCT)])[2]
    assert "which is only to about ±" in wide and "the control's own interval" in wide
    narrow = noise_floor_lines([floor(WIDE_CONTROL_PCT / 3)])[2]
    assert "can be trusted as far as this control can tell" in narrow
    assert "which is only to about" not in narrow


def test_a_control_that_only_the_process_term_keeps_apart_says_so() -> None:
    """Issue 36 audit: an A/A interval that excluded zero before the process term widened it
    was stated without that; the line now says what the paired blocks alone read. A control
    whose pairing alone read no difference says nothing of the kind."""
    import dataclasses as dc

    from tritonlab.report.engine_section import noise_floor_lines
    from tritonlab.stats.noise_floor import NoiseFloor
    from tritonlab.stats.verdicts import Verdict, Word

    t = Verdict("throughput", Word.NO_CLEAR, 2.0, 1.0, 1.0, "paired", -0.5, 4.2, 30)
    p99 = dc.replace(t, figure="latency_p99", low_pct=-8.0, high_pct=2.0)
    widened = dc.replace(t, unwidened_word=Word.HIGHER, unwidened_pct=(0.4, 3.6))
    line = noise_floor_lines([NoiseFloor("grpc_b1_c16", "baseline_aa", widened, p99)])[2]
    assert "the blocks paired alone read throughput higher (CI +0.4% to +3.6%)" in line
    assert "only that term keeps this control from reading a difference" in line
    same = dc.replace(t, unwidened_word=Word.NO_CLEAR, unwidened_pct=(-0.2, 3.9))
    plain = noise_floor_lines([NoiseFloor("grpc_b1_c16", "baseline_aa", same, p99)])[2]
    assert "paired alone" not in plain


def test_a_quiet_control_in_a_doubtful_run_carries_the_runs_doubt() -> None:
    """The noise-floor line reads the run's trust (``RunTrust``), not a rule of its own: a
    control that reads no difference in a run with too many disturbed cells is not called
    trusted; in a quiet run it is."""
    import dataclasses as dc

    from tritonlab.report.engine_section import noise_floor_lines
    from tritonlab.stats.noise_floor import NoiseFloor
    from tritonlab.stats.run_trust import RunTrust
    from tritonlab.stats.verdicts import Verdict, Word

    t = Verdict("throughput", Word.NO_CLEAR, 0.0, 1.0, 1.0, "paired", -3.0, 3.0, 20)
    floor = NoiseFloor("grpc_b1_c8", "baseline_aa", t, dc.replace(t, figure="latency_p99"))
    quiet = RunTrust(100, 100, 2, 0.4, 0.0, 1, (), None)
    disturbed = dc.replace(quiet, cells_disturbed=40)
    assert "can be trusted as far" in noise_floor_lines([floor], quiet)[2]
    doubtful = noise_floor_lines([floor], disturbed)[2]
    assert "**but this run's verdicts are not to be trusted: 40 of 100 cells" in doubtful
    assert "can be trusted as far" not in doubtful


def test_a_sweeps_stopping_rule_names_the_intervals_it_watched() -> None:
    """Issue 36 audit (wrong): the sweep's log said its extra rounds ran while any headline
    interval (every configuration against the baseline, ...) was wider than ±3%; a sweep's rule
    watches its picks only (``undecided_sweep``), and 39 other intervals were wider when it
    stopped. The rule's words come from the run kind; a run's say the headline intervals."""
    from tritonlab.report.engine_section import engine_lines
    from tritonlab.report.method_section import run_stopping_note
    from tritonlab.report.run_data import load_run

    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    assert run.manifest.sweep is not None and run.stopping is not None
    text = "\n".join(engine_lines(run.engine, run.stopping, run.cells, None, sweep=True))
    assert "a throughput interval behind a pick (each pick against the baseline" in text
    assert "each configuration against the baseline" not in text
    assert "behind a pick" in run_stopping_note(run)
    project = "\n".join(engine_lines(run.engine, run.stopping, run.cells, None, sweep=False))
    assert "a headline throughput interval (each configuration against the baseline" in project


def test_open_loop_rows_offered_different_rates_have_no_throughput_verdict() -> None:
    """Issue 36 audit: `batch_5000us` at grpc_b1_p50 read "tput higher (+2%, CI +0.2% to +3%)"
    where it was offered 1,181 req/s against the baseline's 1,163: at an open-loop load the
    throughput is the rate offered. Rows offered different rates have no throughput verdict
    and no p99 verdict either: they were offered different loads; equal rates do."""
    import dataclasses as dc

    from tritonlab.report.run_data import load_run
    from tritonlab.stats.aggregate import compare_figure

    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    at = {(s.variant.name, s.load_key): s for s in run.summaries}
    base, batch = at[("baseline", "grpc_b1_p50")], at[("batch_5000us", "grpc_b1_p50")]
    assert base.settings.request_rate_per_s != batch.settings.request_rate_per_s
    tput = compare_figure("throughput", "throughput", base, batch)
    assert tput.word == "not comparable" and "offered load" in tput.method
    # nor p99: the rows were offered different loads (a p99 "+140%" was read across them)
    assert compare_figure("latency_p99", "latency_p99", base, batch).word == "not comparable"
    same = dc.replace(batch, settings=base.settings)
    assert compare_figure("throughput", "throughput", base, same).word != "not comparable"


def test_a_frontier_point_on_it_by_a_hair_is_said_to_be() -> None:
    """Issue 36 audit: two frontier points printed p99 "5,854" each, one on the frontier by a
    0.5 µs median margin. The table says which points are on it by a margin under 0.1%."""
    from tritonlab.report.recommend_section import _frontier_lines
    from tritonlab.report.run_data import load_run

    run = load_run(EXAMPLES / "simple_mlp_cache_fresh")
    assert run.recommendations is not None
    recs = run.recommendations
    a, b = recs.frontier[:2]
    hair = dataclasses.replace(b, latency_p99_us=a.latency_p99_us * 1.0005)
    text = "\n".join(_frontier_lines(dataclasses.replace(recs, frontier=[a, hair])))
    assert "Points on the frontier by a median margin under a tenth of a percent" in text
    assert "a margin, not a difference" in text
    apart = dataclasses.replace(b, latency_p99_us=a.latency_p99_us * 1.002)
    assert "by a median margin" not in "\n".join(
        _frontier_lines(dataclasses.replace(recs, frontier=[a, apart]))
    )
    demo = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    assert demo.recommendations is not None
    assert "by a median margin" not in "\n".join(_frontier_lines(demo.recommendations))


def test_the_sweeps_blocks_and_its_latency_pick_are_said_as_they_were() -> None:
    """Issue 36 audit: "28 blocks, every configuration ... once per block" where 18 were extra
    rounds of a few cells; "p99 740 µs while carrying 2,234 infer/s" for a closed loop at
    concurrency 1 whose Poisson arrivals at 1,860 req/s gave a p99 of 5,571 µs."""
    from tritonlab.report.conditions_text import measurement_line
    from tritonlab.report.recommend_summary_text import summary_line
    from tritonlab.report.run_data import load_run

    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    line = measurement_line(run.manifest.plan, run.cells)
    assert "10 blocks, every configuration co-loaded" in line
    assert "then 18 extra rounds of only the configurations and loads" in line
    assert run.recommendations is not None
    summary = summary_line(run.recommendations)
    assert "that is closed loop at concurrency 1: the same configuration under Poisson" in summary
    assert "the median over the 10 blocks every point has, out of its 27 repeats, and 4 of " in (
        summary
    )
    assert "were under the target (the lowest 1,180)" in summary
    tune = load_run(EXAMPLES / "resnet18_pipeline_tune")
    assert "in the order the search took them" in measurement_line(
        tune.manifest.plan, tune.cells, tune=True
    )


def test_a_knee_says_what_the_next_level_gave() -> None:
    """Issue 36 audit: the baseline's knee "1" read as "nothing above concurrency 1 helps"
    while concurrency 4 was higher (+18%), under the knee's 10% per doubling. The table gives
    the next level's verdict and its paired gain per doubling."""
    from tritonlab.decisions.recommend_records import KNEE_GAIN_PER_DOUBLING_PCT
    from tritonlab.report.recommend_section import _knees_lines
    from tritonlab.report.run_data import load_run

    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    assert run.recommendations is not None
    lines = _knees_lines(run.recommendations, run.summaries)
    row = next(ln for ln in lines if ln.startswith("| baseline/grpc/b1 | 1 |"))
    assert "concurrency 4: throughput higher (+18%" in row
    per = float(row.split("), ", 1)[1].split("% per doubling")[0])
    assert 0 < per < KNEE_GAIN_PER_DOUBLING_PCT


def test_fifth_audit_statements_follow_the_data() -> None:
    """Issue 36, fifth audit: the control count names the loads that have an interval (10 at
    5 loads, not "at 7"); a tune's uneven repeats are its race's, not a watched verdict's;
    excluded open-loop rates are not read as failing the budget; two instances at concurrency
    1 never ran side by side; the cost model's split where it misses a term is its own."""
    from tritonlab.report.engine_section import noise_floor_lines
    from tritonlab.report.page_tables import blocks_note as _blocks_note
    from tritonlab.report.recommend_section import _open_loop_lines
    from tritonlab.report.run_data import load_run

    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    floors = "\n".join(noise_floor_lines(run.noise_floors, run.trust, True))
    assert "of the 10 control intervals (throughput and p99 at the 5 load points where" in floors
    assert run.recommendations is not None
    rates = "\n".join(_open_loop_lines(run.recommendations))
    assert "| batch_0us/grpc/b1 | none to read: every rate measured was excluded" in rates
    findings = {
        (r.summary.variant.name, a.load_key): " ".join(f.text for f in r.findings)
        for a in run.analyses
        for r in a.reports
    }
    x2 = findings[("batch_0us_x2", "grpc_b1_c1")]
    assert "contend for the cores" not in x2 and "with one request in flight" in x2
    assert "take the parts as its, not as measured" in findings[("batch_0us", "grpc_b1_c16")]
    tune = load_run(EXAMPLES / "resnet18_pipeline_tune")
    notes = [_blocks_note(a, tune=True) for a in tune.analyses]
    assert any("the search's race measured its contenders more" in n for n in notes)
    assert not any("a watched verdict" in n for n in notes)


def test_sixth_audit_statements_follow_the_data() -> None:
    """Issue 36, sixth audit: a fit's worst miss of 10.4% read "within 10%" (a bound is
    rounded up); the Poisson p99 quoted for the latency pick's configuration gives its worst
    repeat and the budget it passed; a frontier and pages quoting rows with different repeat
    counts say their medians are over different blocks."""
    from tritonlab.explanation.operators import _bound_pct
    from tritonlab.report.conditions_text import uneven_repeats_note
    from tritonlab.report.recommend_section import _frontier_lines
    from tritonlab.report.recommend_summary_text import summary_line
    from tritonlab.report.run_data import load_run

    assert _bound_pct(0.104) == "11" and _bound_pct(0.10) == "10" and _bound_pct(0.0122) == "2"
    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    assert run.recommendations is not None
    summary = summary_line(run.recommendations)
    assert "had a median p99 of 5,571 µs (worst repeat 25,972 µs, over the 10,000 µs budget)" in (
        summary
    )
    frontier = "\n".join(_frontier_lines(run.recommendations))
    assert "The points rest on 10 to 28 repeats" in frontier
    assert uneven_repeats_note([10, 10]) == ""
    assert "rest on 10 to 28 repeats" in uneven_repeats_note([10, 28, 27])
    readme = (EXAMPLES / "simple_mlp_sweep_blocks" / "README.md").read_text()
    assert "so their medians are over different blocks" in readme
