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
    assert f"{len({c.block for c in cells})} blocks" in line


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
    trusted as far as this control can tell"."""
    from tritonlab.report.engine_section import noise_floor_lines
    from tritonlab.report.run_data import load_run

    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    lines = noise_floor_lines(run.noise_floors, blocks=True)
    open_loop = [ln for ln in lines if ln.startswith(("- grpc_b1_p80", "- grpc_b1_p50"))]
    assert len(open_loop) == 2
    assert all("this control tells nothing at this load" in ln for ln in open_loop)
    assert not any("can be trusted" in ln for ln in open_loop)
    closed = next(ln for ln in lines if ln.startswith("- grpc_b1_c16"))
    assert "can be trusted as far as this control can tell" in closed


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
