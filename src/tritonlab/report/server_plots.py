"""Plots of what happens inside the server: the latency breakdown per request, the batch
sizes Triton formed, and the roofline of the hot operators (registered in ``plots.PLOTS``).
Each returns the PNG path written, or ``None`` when the run has no such data."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tritonlab.report.plot_support import (
    PALETTE,
    PlotData,
    new_figure,
    per_configuration_rows,
    row_label,
    save_png,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from tritonlab.explanation.roofline import RooflinePoint
    from tritonlab.perf.machine import MachineCeilings
    from tritonlab.perf.operator_profile import OperatorsRecord

ROOFLINE_NAMED = 6  # operators named in the roofline's legend
ROOFLINE_MARKERS = {1: "o", 8: "s", 64: "^"}  # operator markers by batch
BREAKDOWN_PARTS = (
    ("queue_us", "queue", "#d62728"),
    ("compute_input_us", "compute input", "#9467bd"),
    ("compute_infer_us", "compute infer", "#1f77b4"),
    ("compute_output_us", "compute output", "#17becf"),
    ("overhead_us", "overhead", "#7f7f7f"),
)


def plot_latency_breakdown(data: PlotData, path: Path) -> Path | None:
    """Where a request's time goes in the server: stacked medians per configuration."""
    rows = per_configuration_rows(data, lambda s: s.queue_us.median is not None)
    if not rows:
        return None
    with new_figure(10.0, 1.8 + 0.45 * len(rows)) as fig:
        ax = fig.add_subplot()
        ys = list(range(len(rows)))[::-1]
        left = [0.0] * len(rows)
        for attr, label, colour in BREAKDOWN_PARTS:
            widths = [(getattr(s, attr).median or 0.0) / 1000 for s in rows]
            ax.barh(ys, widths, left=left, color=colour, label=label, height=0.6)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.plot(
            [(s.latency_avg.median or 0.0) / 1000 for s in rows],
            ys,
            marker="|",
            markersize=18,
            markeredgewidth=2.5,
            color="black",
            linestyle="none",
            label="client avg latency",
        )
        ax.set_yticks(ys, [row_label(s, rows) for s in rows])
        ax.set_xlabel("time per request (ms; server statistics, median over repeats)")
        ax.set_xlim(left=0)
        ax.grid(axis="y", visible=False)
        fig.legend(loc="outside lower center", ncols=6)
        return save_png(fig, path, "Latency breakdown in the server", data, rows)


def batch_bins(largest: int) -> list[tuple[int, int]]:
    """Power-of-two bins covering 1..largest: (1,1), (2,2), (3,4), (5,8), ..."""
    bins = [(1, 1)]
    high = 1
    while high < largest:
        bins.append((high + 1, high * 2))
        high *= 2
    return bins


def plot_batch_sizes(data: PlotData, path: Path) -> Path | None:
    """Which batch sizes Triton executed, as shares of executions per configuration."""
    rows = per_configuration_rows(data, lambda s: bool(s.batch_distribution))
    if not any(len(s.batch_distribution) > 1 for s in rows):
        return None
    bins = batch_bins(max(max(s.batch_distribution) for s in rows))
    shares = [
        [
            100.0
            * sum(n for size, n in s.batch_distribution.items() if lo <= size <= hi)
            / sum(s.batch_distribution.values())
            for lo, hi in bins
        ]
        for s in rows
    ]
    labels = [f"{row_label(s, rows)} (mean {s.mean_batch.median or 0:.1f})" for s in rows]
    lines = sum(label.count("\n") + 1 for label in labels)
    with new_figure(max(8.0, 4.5 + 0.7 * len(bins)), 1.8 + 0.45 * max(len(rows), lines)) as fig:
        ax = fig.add_subplot()
        image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=100, aspect="auto")
        for r, row in enumerate(shares):
            for c, value in enumerate(row):
                if value >= 0.5:
                    colour = "white" if value > 60 else "black"
                    ax.text(c, r, f"{value:.0f}%", ha="center", va="center", color=colour)
        ax.set_xticks(range(len(bins)), [str(lo) if lo == hi else f"{lo}–{hi}" for lo, hi in bins])
        ax.set_yticks(range(len(rows)), labels)
        ax.set_xlabel("batch size Triton executed (inferences per execution)")
        ax.grid(visible=False)
        fig.colorbar(image, ax=ax, label="share of executions (%)", shrink=0.9)
        return save_png(fig, path, "Batch sizes formed by Triton", data, rows)


def _draw_ceiling(ax: Axes, machine: MachineCeilings, low: float, high: float) -> None:
    xs = [low, machine.ridge_flop_per_byte, high]
    ys = [machine.attainable_flop_per_s(x) / 1e9 for x in xs]
    ax.plot(xs, ys, color="black", linewidth=2, label="ceiling (this machine, 1 thread)")
    bandwidth = (low * 1.3, machine.attainable_flop_per_s(low * 1.3) / 1e9)
    gemm = (machine.ridge_flop_per_byte, machine.gemm_flop_per_s / 1e9)
    for text, xy, offset in (
        (f"{machine.bandwidth_bytes_per_s / 1e9:.1f} GB/s", bandwidth, (0, 6)),
        (f"GEMM {machine.gemm_flop_per_s / 1e9:.1f} GFLOP/s", gemm, (4, 6)),
    ):
        ax.annotate(text, xy, textcoords="offset points", xytext=offset, fontsize=8)


def _draw_operators(ax: Axes, ops: list[RooflinePoint], operators: OperatorsRecord) -> None:
    """Draw each operator's points over batch, joined by a line."""
    names = list(dict.fromkeys(p.name for p in ops))
    # Named in the legend: the hottest operators and the one with the lowest intensity (the
    # first to be bandwidth-bound); the rest are drawn in grey as one entry.
    hot = {o.name for o in operators.profile.hottest(ROOFLINE_NAMED - 1)}
    if ops:
        hot.add(min(ops, key=lambda p: p.intensity_flop_per_byte).name)
    named = [n for n in names if n in hot]
    for name in names:
        mine = [p for p in ops if p.name == name]
        first_grey = name not in hot and name == next(n for n in names if n not in hot)
        colour = PALETTE[named.index(name) % len(PALETTE)] if name in hot else "#b0b0b0"
        label = (
            f"{mine[0].kind} {name}"
            if name in hot
            else (f"other heavy operators ({len(names) - len(named)})" if first_grey else None)
        )
        ax.plot(
            [p.intensity_flop_per_byte for p in mine],
            [p.achieved_flop_per_s / 1e9 for p in mine],
            color=colour,
            linewidth=0.8,
            alpha=0.5,
            label=label,
        )
        for p in mine:
            ax.scatter(
                p.intensity_flop_per_byte,
                p.achieved_flop_per_s / 1e9,
                color=colour,
                marker=ROOFLINE_MARKERS.get(int(p.batch), "D"),
                s=28,
                zorder=3,
            )


def plot_roofline(data: PlotData, path: Path) -> Path | None:
    """The hot operators at batch 1 / 8 / 64 and the served executions against the machine's
    measured bandwidth and GEMM ceilings (log-log)."""
    from tritonlab.explanation.roofline import ceilings_of, operator_points, served_points

    machine = ceilings_of(data.operators)
    if data.operators is None or machine is None:
        return None
    ops = operator_points(data.operators)
    served = served_points(data.operators, data.summaries)
    if not ops and not served:
        return None
    intensities = [p.intensity_flop_per_byte for p in [*ops, *served]]
    low = min([*intensities, machine.ridge_flop_per_byte]) / 4
    high = max([*intensities, machine.ridge_flop_per_byte]) * 4
    with new_figure(9.0, 5.6) as fig:
        ax = fig.add_subplot()
        _draw_ceiling(ax, machine, low, high)
        _draw_operators(ax, ops, data.operators)
        for p in served:  # a star named by its variant and batch
            slug = next(s.variant.name for s in data.summaries if s.variant.description == p.name)
            ax.scatter(
                p.intensity_flop_per_byte,
                p.achieved_flop_per_s / 1e9,
                marker="*",
                s=120,
                color=data.colour(slug),
                edgecolor="black",
                zorder=4,
            )
            ax.annotate(
                f"{slug} (b={p.batch:.1f})",
                (p.intensity_flop_per_byte, p.achieved_flop_per_s / 1e9),
                textcoords="offset points",
                xytext=(6, -3),
                fontsize=7,
            )
        # empty grey markers, so that the legend explains the batch and served shapes
        for batch, marker in ROOFLINE_MARKERS.items():
            ax.scatter([], [], marker=marker, color="grey", label=f"operator at batch {batch}")
        ax.scatter(
            [],
            [],
            marker="*",
            color="grey",
            edgecolor="black",
            s=120,
            label="served execution (whole model, Triton compute time)",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(low, high)
        ax.set_xlabel("arithmetic intensity (FLOP per byte moved; graph arithmetic)")
        ax.set_ylabel("achieved GFLOP/s")
        fig.legend(loc="outside lower center", ncols=3, fontsize=8)
        return save_png(
            fig, path, "Roofline: hot operators and served executions", data, data.summaries
        )
