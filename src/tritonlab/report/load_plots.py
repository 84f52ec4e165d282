"""Plots of the load against what it bought: throughput against p99, the concurrency curves,
p99 against the batcher's queue delay, and HTTP against gRPC (registered in ``plots.PLOTS``).
Each returns the PNG path written, or ``None`` when the run has no such dimension."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritonlab.report.plot_support import (
    PALETTE,
    PROTOCOL_LINES,
    PROTOCOL_MARKERS,
    PROTOCOL_NAMES,
    PlotData,
    annotate_points,
    curves,
    error_bars,
    fade_error_bars,
    has_figures,
    limits_from_medians,
    load_order,
    load_short,
    new_figure,
    save_png,
    variant_legend,
)
from tritonlab.repository.knobs import BATCHER_FIELDS, KNOBS
from tritonlab.stats.aggregate import VariantSummary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tritonlab.decisions.recommend_records import Recommendations

LOG_X_SPAN = 20.0  # p99 spanning more than this factor is drawn on a log axis


def _tputs(members: list[VariantSummary]) -> list[float]:
    return [m.throughput.median or 0.0 for m in members]


def _p99s_ms(members: list[VariantSummary]) -> list[float]:
    return [(m.latency_p99.median or 0.0) / 1000 for m in members]


def _errorbar_pair(
    ax_tput: Axes,
    ax_p99: Axes,
    xs: list[int],
    members: list[VariantSummary],
    style: dict[str, Any],
    labels: tuple[str | None, str | None],
) -> None:
    """Throughput and p99 of ``members`` against ``xs`` with the repeats' range, labelled
    ``labels`` (throughput's, p99's)."""
    for ax, ys, figures, scale, label in (
        (ax_tput, _tputs(members), [m.throughput for m in members], 1.0, labels[0]),
        (ax_p99, _p99s_ms(members), [m.latency_p99 for m in members], 1e-3, labels[1]),
    ):
        fade_error_bars(ax.errorbar(xs, ys, yerr=error_bars(figures, scale), label=label, **style))


def _finish_pair(ax_tput: Axes, ax_p99: Axes, shown: list[VariantSummary], knee: str = "") -> None:
    """Fit both panels to the medians of ``shown``; name their axes and titles."""
    limits_from_medians(ax_tput, None, _tputs(shown))
    limits_from_medians(ax_p99, None, _p99s_ms(shown))
    ax_tput.set_ylabel("throughput (inferences/s)")
    ax_p99.set_ylabel("p99 latency, client side (ms)")
    ax_tput.set_title("throughput" + knee)
    ax_p99.set_title("p99 latency")


def plot_throughput_vs_p99(data: PlotData, path: Path) -> Path | None:
    """Throughput against p99 per configuration, with the frontier and the picks if known."""
    points = sorted((s for s in data.summaries if has_figures(s)), key=load_order(data))
    if not points:
        return None
    p99_ms = _p99s_ms(points)
    log_x = min(p99_ms) > 0 and max(p99_ms) / min(p99_ms) > LOG_X_SPAN
    recs = data.recommendations
    on_frontier = {(p.variant, p.load_key) for p in recs.frontier} if recs else set()
    label_variants = len(points) <= 8 and len({s.load_key for s in points}) == 1
    with new_figure(12.0, 6.5) as fig:
        ax = fig.add_subplot()
        labelled: list[tuple[float, float, str]] = []
        for (key, open_loop), members in curves(points).items():
            name, protocol = key.variant, key.protocol
            xs, ys = _p99s_ms(members), _tputs(members)
            bars = ax.errorbar(
                xs,
                ys,
                xerr=error_bars([m.latency_p99 for m in members], 1e-3),
                yerr=error_bars([m.throughput for m in members]),
                color=data.colour(name),
                marker=PROTOCOL_MARKERS[protocol],
                linestyle=PROTOCOL_LINES[protocol] if len(members) > 1 else "none",
                fillstyle="none" if open_loop else "full",
                markersize=7,
                capsize=2,
                linewidth=1.2,
                elinewidth=0.8,
            )
            fade_error_bars(bars, 0.4 if len(points) <= 16 else 0.2)
            for m, x, y in zip(members, xs, ys, strict=True):
                # A sweep has too many points to name them all: name the frontier's.
                if label_variants:
                    labelled.append((x, y, m.variant.description))
                elif len(points) <= 16 or (m.variant.name, m.load_key) in on_frontier:
                    labelled.append((x, y, load_short(m)))
        annotate_points(ax, labelled, 7 if label_variants else 6, log_x)
        variant_legend(fig, data, points)
        mark_recommendations(fig, ax, recs)
        if log_x:
            from matplotlib.ticker import LogLocator

            ax.set_xscale("log")
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter("{x:g}")
            ax.set_xlabel("p99 latency, client side (ms, log scale)")
        else:
            ax.set_xlabel("p99 latency, client side (ms)")
        ax.set_ylabel("throughput (inferences/s)")
        # Room on the right for the names of the rightmost points.
        limits_from_medians(ax, p99_ms, _tputs(points), log_x, 1.35 if label_variants else 1.12)
        return save_png(fig, path, "Throughput against p99 latency", data, points)


def mark_recommendations(fig: Figure, ax: Axes, recs: Recommendations | None) -> None:
    """The Pareto frontier, the budget and target lines, and the two picks, in a 2nd legend."""
    if recs is None:
        return
    extra: list[Any] = []
    frontier = sorted(recs.frontier, key=lambda p: p.latency_p99_us)
    if frontier:
        (line,) = ax.plot(
            [p.latency_p99_us / 1000 for p in frontier],
            [p.throughput_infer_per_s for p in frontier],
            color="black",
            linestyle=":",
            linewidth=1.5,
            marker="o",
            markersize=13,
            markerfacecolor="none",
            drawstyle="steps-post",
            label="Pareto frontier",
            zorder=1,
        )
        extra.append(line)
    extra.append(
        ax.axvline(
            recs.latency_budget_p99_us / 1000,
            color="#d62728",
            linestyle="--",
            linewidth=1,
            label=f"p99 budget {recs.latency_budget_p99_us / 1000:g} ms",
        )
    )
    if recs.target_load_infer_per_s is not None:
        extra.append(
            ax.axhline(
                recs.target_load_infer_per_s,
                color="#2ca02c",
                linestyle="--",
                linewidth=1,
                label=f"target load {recs.target_load_infer_per_s:,.0f} infer/s",
            )
        )
    # The latency-first mark is a ring drawn around the star, so one point can carry both.
    for pick, marker, size, face, edge, zorder in (
        (recs.latency_pick, "D", 19, "none", "#008080", 5),
        (recs.throughput_pick, "*", 16, "#ffbf00", "black", 6),
    ):
        if pick is None:
            continue
        (mark,) = ax.plot(
            [pick.point.latency_p99_us / 1000],
            [pick.point.throughput_infer_per_s],
            marker=marker,
            markersize=size,
            markerfacecolor=face,
            markeredgecolor=edge,
            markeredgewidth=2.0 if face == "none" else 1.0,
            linestyle="none",
            label=f"{pick.kind}:\n{pick.point.description}\n{pick.point.load_key}",
            zorder=zorder,
        )
        extra.append(mark)
    fig.legend(handles=extra, loc="outside right lower", markerscale=0.6)


def plot_concurrency_curves(data: PlotData, path: Path) -> Path | None:
    """Throughput and p99 against concurrency: one line per variant and protocol."""
    closed = [s for s in data.summaries if s.settings.request_rate_per_s is None and has_figures(s)]
    groups = curves(sorted(closed, key=load_order(data)))
    if not any(len({m.settings.concurrency for m in g}) > 1 for g in groups.values()):
        return None
    batches = {key.batch_size for key, _open in groups}
    knees = data.recommendations.knees if data.recommendations else {}
    with new_figure(13.0, 5.2) as fig:
        ax_tput, ax_p99 = fig.subplots(1, 2)
        knee_drawn = False
        for (key, _open), members in groups.items():
            name, protocol, batch = key.variant, key.protocol, key.batch_size
            xs = [m.settings.concurrency or 0 for m in members]
            style = {
                "color": data.colour(name),
                "marker": PROTOCOL_MARKERS[protocol],
                "linestyle": PROTOCOL_LINES[protocol],
                "capsize": 2,
                "markersize": 5,
            }
            label = f"{members[0].variant.description} · {PROTOCOL_NAMES[protocol]} b{batch}"
            _errorbar_pair(ax_tput, ax_p99, xs, members, style, (label, None))
            knee = knees.get(key)
            if knee is not None and knee in xs:
                y = _tputs(members)[xs.index(knee)]
                ax_tput.plot([knee], [y], marker="v", color="black", markersize=9, zorder=5)
                knee_drawn = True
        for ax in (ax_tput, ax_p99):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("concurrency (requests in flight, log scale)")
            ax.xaxis.set_major_formatter("{x:g}")
        _finish_pair(ax_tput, ax_p99, closed, " (▼ knee)" if knee_drawn else "")
        if len(batches) > 1:
            fig.legend(loc="outside right upper")
        else:
            variant_legend(fig, data, closed)
        return save_png(fig, path, "Throughput and p99 against concurrency", data, closed)


# What a delay sweep's variants share (the knob table's plot family: all but batching and the
# delay), and what its "no batching" level shares with them (not the batcher's settings).
FAMILY_FIELDS = tuple(k.field for k in KNOBS if k.plot_family)
OFF_FIELDS = tuple(f for f in FAMILY_FIELDS if f not in BATCHER_FIELDS and f != "max_batch_size")


def _knobs(s: VariantSummary, fields: tuple[str, ...] = FAMILY_FIELDS) -> tuple[Any, ...]:
    """The variant's values of ``fields`` (by default every knob but batching and the delay)."""
    return tuple(getattr(s.variant, f) for f in fields)


def plot_p99_vs_queue_delay(data: PlotData, path: Path) -> Path | None:
    """p99 and throughput against max_queue_delay_microseconds, one line per load point.

    The delay sweep is the largest set of batching variants that differ only in their delay;
    the no-batching variant with the same instances, if measured, is drawn as the "off" level.
    """
    batching = [s for s in data.summaries if s.variant.dynamic_batching and has_figures(s)]
    families: dict[tuple[Any, ...], set[int]] = {}
    for s in batching:
        families.setdefault(_knobs(s), set()).add(s.variant.max_queue_delay_us)
    if not families:
        return None
    family, delays = max(families.items(), key=lambda item: len(item[1]))
    if len(delays) < 2:
        return None
    shared = dict(zip(FAMILY_FIELDS, family, strict=True))
    off = [
        s
        for s in data.summaries
        if not s.variant.dynamic_batching
        and has_figures(s)
        and _knobs(s, OFF_FIELDS) == tuple(shared[f] for f in OFF_FIELDS)
    ]
    ticks = (["no batching"] if off else []) + [f"{d:g}" for d in sorted(delays)]
    position = {d: i + (1 if off else 0) for i, d in enumerate(sorted(delays))}
    by_load: dict[str, list[tuple[int, VariantSummary]]] = {}
    for s in sorted([*batching, *off], key=load_order(data)):
        if s.variant.dynamic_batching and _knobs(s) != family:
            continue
        x = position[s.variant.max_queue_delay_us] if s.variant.dynamic_batching else 0
        by_load.setdefault(s.load_key, []).append((x, s))
    loads = [k for k, pts in by_load.items() if any(s.variant.dynamic_batching for _, s in pts)]
    loads = loads[: len(PALETTE)]
    shown = [s for k in loads for _, s in by_load[k]]
    with new_figure(13.0, 5.2) as fig:
        ax_p99, ax_tput = fig.subplots(1, 2)
        for i, key in enumerate(loads):
            pts = sorted(by_load[key], key=lambda pair: pair[0])
            xs = [x for x, _ in pts]
            members = [m for _, m in pts]
            first = members[0].settings
            label = f"{PROTOCOL_NAMES[first.protocol]} b{first.batch_size} {load_short(members[0])}"
            style = {"color": PALETTE[i], "marker": "o", "capsize": 2, "markersize": 5}
            _errorbar_pair(ax_tput, ax_p99, xs, members, style, (None, label))
        for ax in (ax_p99, ax_tput):
            ax.set_xticks(range(len(ticks)), ticks)
            ax.set_xlabel("max_queue_delay_microseconds (µs; measured levels)")
        _finish_pair(ax_tput, ax_p99, shown)
        fig.legend(loc="outside right upper", title="load")
        knobs = f"count={shared['instance_count']}, max_batch_size {shared['max_batch_size']}"
        preferred = shared["preferred_batch_sizes"]
        knobs += f", preferred {list(preferred)}" if preferred else ""
        title = f"Dynamic batching: queue delay against latency ({knobs})"
        return save_png(fig, path, title, data, shown)


def plot_http_vs_grpc(data: PlotData, path: Path) -> Path | None:
    """The same variant under the same load over HTTP and over gRPC, side by side."""
    by_key: dict[tuple[Any, ...], dict[str, VariantSummary]] = {}
    for s in sorted(data.summaries, key=load_order(data)):
        if has_figures(s):
            st = s.settings
            key = (s.variant.name, st.batch_size, st.concurrency, st.request_rate_per_s)
            by_key.setdefault(key, {})[st.protocol] = s
    pairs = [p for p in by_key.values() if {"grpc", "http"} <= set(p)]
    if not pairs:
        return None
    shown = [s for p in pairs for s in p.values()]
    one_load = len({(p["grpc"].settings.batch_size, load_short(p["grpc"])) for p in pairs}) == 1
    labels = [
        textwrap.fill(p["grpc"].variant.description, 20)
        + ("" if one_load else f"\nb{p['grpc'].settings.batch_size} {load_short(p['grpc'])}")
        for p in pairs
    ]
    with new_figure(max(10.0, min(24.0, 2.0 + 2.2 * len(pairs))), 5.5) as fig:
        ax_tput, ax_p99 = fig.subplots(1, 2)
        xs = list(range(len(pairs)))
        bars = {"width": 0.4, "capsize": 3, "error_kw": {"alpha": 0.5}}
        for offset, protocol, colour in ((-0.2, "grpc", "#1f77b4"), (0.2, "http", "#ff7f0e")):
            members = [p[protocol] for p in pairs]
            at = [x + offset for x in xs]
            name = PROTOCOL_NAMES[protocol]
            for ax, ys, figures, scale, label in (
                (ax_tput, _tputs(members), [m.throughput for m in members], 1.0, name),
                (ax_p99, _p99s_ms(members), [m.latency_p99 for m in members], 1e-3, ""),
            ):
                ax.bar(at, ys, color=colour, label=label, yerr=error_bars(figures, scale), **bars)
        for ax in (ax_tput, ax_p99):
            ax.set_xticks(xs, labels, fontsize=8)
            ax.grid(axis="x", visible=False)
        _finish_pair(ax_tput, ax_p99, shown)
        ax_tput.legend(loc="best")
        return save_png(fig, path, "HTTP against gRPC (same variant, same load)", data, shown)
