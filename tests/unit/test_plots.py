"""report/plots.py: PNGs from stored results only; plots without their dimension are skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from tritonlab.decisions.recommend import recommend
from tritonlab.experiments.manifest import Manifest
from tritonlab.report.load_plots import (
    plot_concurrency_curves,
    plot_http_vs_grpc,
    plot_p99_vs_queue_delay,
    plot_throughput_vs_p99,
)
from tritonlab.report.plot_support import (
    MAX_ROWS,
    PlotData,
    context_line,
    load_text,
    per_configuration_rows,
    reference_load,
)
from tritonlab.report.plots import PLOTS, write_plots
from tritonlab.report.run_data import load_run
from tritonlab.report.server_plots import batch_bins
from tritonlab.stats.aggregate import VariantSummary

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SEED_PLOTS = {"throughput_vs_p99", "latency_breakdown", "p99_vs_queue_delay", "batch_sizes"}
SWEEP_RUN = Path(__file__).parent.parent / "fixtures" / "sweep_run"
needs_sweep = pytest.mark.skipif(
    not (SWEEP_RUN / "results" / "manifest.json").exists(),
    reason="the recorded sweep fixture tests/fixtures/sweep_run is not present",
)


def assert_real_png(path: Path) -> None:
    """A PNG with a plausible size and real content (not a blank canvas)."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    assert len(data) > 10_000, f"{path} is only {len(data)} bytes"
    with Image.open(path) as image:
        width, height = image.size
        assert 600 <= width <= 2500 and 250 <= height <= 2500, image.size
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50, "looks blank"


@pytest.fixture(scope="module")
def seed_written(
    seed_manifest: Manifest,
    seed_summaries: list[VariantSummary],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Path]:
    return write_plots(tmp_path_factory.mktemp("plots"), PlotData(seed_manifest, seed_summaries))


def test_seed_run_writes_the_plots_that_apply(seed_written: dict[str, Path]) -> None:
    # One load point, one protocol: no concurrency curve and no HTTP against gRPC; the two
    # batching delays (0 and 5000 µs at count=1) do make a queue-delay plot.
    assert set(seed_written) == SEED_PLOTS
    assert list(seed_written) == [name for name in PLOTS if name in SEED_PLOTS]
    for name, path in seed_written.items():
        assert path.name == f"{name}.png" and path.parent.name == "plots"
        assert_real_png(path)
    folder = next(iter(seed_written.values())).parent
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}.png" for n in SEED_PLOTS)


def test_plots_without_their_dimension_return_none(
    seed_manifest: Manifest, seed_summaries: list[VariantSummary], tmp_path: Path
) -> None:
    data = PlotData(seed_manifest, seed_summaries)
    for draw in (plot_concurrency_curves, plot_http_vs_grpc):
        path = tmp_path / f"{draw.__name__}.png"
        assert draw(data, path) is None
        assert not path.exists()
    # Without the 0 µs variant only one delay level is left: no queue-delay plot.
    one_level = [s for s in seed_summaries if s.variant.name != "batch_0ms_x1"]
    path = tmp_path / "delay.png"
    assert plot_p99_vs_queue_delay(PlotData(seed_manifest, one_level), path) is None
    assert not path.exists()


def test_no_summaries_gives_no_plots(seed_manifest: Manifest, tmp_path: Path) -> None:
    assert write_plots(tmp_path, PlotData(seed_manifest, [])) == {}
    assert not list((tmp_path).rglob("*.png"))


def test_stale_plots_are_removed(
    seed_manifest: Manifest, seed_summaries: list[VariantSummary], tmp_path: Path
) -> None:
    stale = tmp_path / "plots" / "concurrency_curves.png"
    stale.parent.mkdir()
    stale.write_bytes(PNG_SIGNATURE)
    written = write_plots(tmp_path, PlotData(seed_manifest, seed_summaries))
    assert "concurrency_curves" not in written
    assert not stale.exists()


def test_rebuilding_writes_identical_bytes(
    seed_manifest: Manifest,
    seed_summaries: list[VariantSummary],
    seed_written: dict[str, Path],
    tmp_path: Path,
) -> None:
    again = write_plots(tmp_path, PlotData(seed_manifest, seed_summaries))
    for name, path in seed_written.items():
        assert again[name].read_bytes() == path.read_bytes(), name


def test_recommendations_are_drawn_on_throughput_vs_p99(
    seed_manifest: Manifest,
    seed_summaries: list[VariantSummary],
    seed_written: dict[str, Path],
    tmp_path: Path,
) -> None:
    recs = recommend(seed_summaries, latency_budget_p99_us=8000, target_load_infer_per_s=2000)
    assert recs.throughput_pick is not None and recs.latency_pick is not None
    written = write_plots(tmp_path, PlotData(seed_manifest, seed_summaries, recs))
    assert set(written) == SEED_PLOTS
    assert_real_png(written["throughput_vs_p99"])
    # Frontier, budget line and pick markers change the picture; the other plots do not.
    plain = seed_written["throughput_vs_p99"].read_bytes()
    assert written["throughput_vs_p99"].read_bytes() != plain
    assert written["batch_sizes"].read_bytes() == seed_written["batch_sizes"].read_bytes()


def test_titles_carry_model_load_machine_and_date(
    seed_manifest: Manifest, seed_summaries: list[VariantSummary]
) -> None:
    line = context_line(seed_manifest, seed_summaries)
    assert line == "simple_mlp · gRPC, batch 1, concurrency 8 · AMD EPYC, 2 cores · 2026-11-30"
    assert load_text([]) == "no load"


def test_batch_bins_cover_every_size() -> None:
    assert batch_bins(1) == [(1, 1)]
    assert batch_bins(8) == [(1, 1), (2, 2), (3, 4), (5, 8)]
    bins = batch_bins(50)
    assert bins[-1] == (33, 64)
    covered = [size for lo, hi in bins for size in range(lo, hi + 1)]
    assert covered == list(range(1, 65))


@pytest.fixture(scope="module")
def sweep_data() -> PlotData:
    return PlotData.of(load_run(SWEEP_RUN))


@needs_sweep
def test_sweep_run_draws_every_plot(sweep_data: PlotData, tmp_path: Path) -> None:
    # Several concurrencies, HTTP and gRPC at the same load, three delay levels at count=1.
    levels = {s.settings.concurrency for s in sweep_data.summaries}
    assert {s.settings.protocol for s in sweep_data.summaries} == {"grpc", "http"}
    assert len(levels - {None}) > 1
    assert sweep_data.recommendations is not None
    written = write_plots(tmp_path, sweep_data)
    # the recorded sweep predates the machine ceilings, so it has no roofline (tested apart)
    assert list(written) == [name for name in PLOTS if name != "roofline"]
    for path in written.values():
        assert_real_png(path)
    again = write_plots(tmp_path / "again", sweep_data)
    assert {n: p.read_bytes() for n, p in again.items()} == {
        n: p.read_bytes() for n, p in written.items()
    }


@needs_sweep
def test_sweep_knees_and_picks_change_the_pictures(sweep_data: PlotData, tmp_path: Path) -> None:
    bare = PlotData(sweep_data.manifest, sweep_data.summaries)
    for draw in (plot_throughput_vs_p99, plot_concurrency_curves):
        with_recs = draw(sweep_data, tmp_path / f"{draw.__name__}_recs.png")
        without = draw(bare, tmp_path / f"{draw.__name__}.png")
        assert with_recs is not None and without is not None
        assert with_recs.read_bytes() != without.read_bytes(), draw.__name__


@needs_sweep
def test_sweep_per_configuration_plots_cap_their_rows(sweep_data: PlotData) -> None:
    # 42 (variant, load) summaries are too many bars: the reference load's rows are drawn.
    assert len(sweep_data.summaries) > MAX_ROWS
    rows = per_configuration_rows(sweep_data, lambda s: True)
    assert {s.load_key for s in rows} == {reference_load(sweep_data)}
    assert [s.variant.name for s in rows] == list(
        dict.fromkeys(s.variant.name for s in sweep_data.summaries)
    )
