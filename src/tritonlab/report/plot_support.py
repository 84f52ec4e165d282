"""What every plot of ``report/plots.py`` shares: the data, labels, colours, figure and saving.

matplotlib is imported lazily (inside functions) and used through its object API with the Agg
renderer, so importing tritonlab never loads it and no global pyplot state is touched. Figure
size, dpi, fonts and PNG metadata are fixed, so the same results give the same bytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritonlab import gateway
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.summary import Summary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tritonlab.decisions.recommend_records import Recommendations
    from tritonlab.experiments.manifest import Manifest
    from tritonlab.perf.operator_profile import OperatorsRecord
    from tritonlab.perf.settings import PerfSettings
    from tritonlab.report.run_data import RunData

DPI = 100
MAX_ROWS = 30  # per-configuration plots fall back to the reference load beyond this
PROTOCOL_NAMES = {"grpc": "gRPC", "http": "HTTP"}
PROTOCOL_MARKERS = {"grpc": "o", "http": "s"}
PROTOCOL_LINES: dict[str, Any] = {"grpc": "-", "http": "--"}
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
_RC: dict[Any, Any] = {
    "font.family": "DejaVu Sans",  # ships with matplotlib: the same glyphs on every machine
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 8,
    "svg.hashsalt": "tritonlab",
    "path.simplify": False,
}


@dataclass(frozen=True)
class PlotData:
    """What every plot draws from: the manifest, the summaries, the picks if there are any."""

    manifest: Manifest
    summaries: list[VariantSummary]
    recommendations: Recommendations | None = None
    operators: OperatorsRecord | None = None  # results/operators.json (the roofline's data)

    @classmethod
    def of(cls, run: RunData) -> PlotData:
        """The plot data of a loaded run folder."""
        return cls(run.manifest, run.summaries, run.recommendations, run.operators)

    def variant_index(self, variant_name: str) -> int:
        """The variant's position in plan order (past the end when it is unknown)."""
        names = list(dict.fromkeys(s.variant.name for s in self.summaries))
        return names.index(variant_name) if variant_name in names else len(names)

    def colour(self, variant_name: str) -> str:
        """One colour per variant, in plan order, the same in every plot."""
        return PALETTE[self.variant_index(variant_name) % len(PALETTE)]


def load_short(s: VariantSummary) -> str:
    """'c8' for closed-loop concurrency 8, 'r400/s' for an open-loop rate of 400 req/s."""
    st = s.settings
    if st.request_intervals is not None:
        return "trace"
    if st.request_rate_per_s is not None:
        return f"r{st.request_rate_per_s:g}/s{st.arrivals.table_note}"
    return f"c{st.concurrency}"


def load_text(summaries: Iterable[VariantSummary]) -> str:
    """The load of a set of summaries in words: 'gRPC, batch 1, concurrency 8'."""
    settings = [s.settings for s in summaries]
    if not settings:
        return "no load"
    protocols = "+".join(
        PROTOCOL_NAMES[p] for p in sorted({st.protocol for st in settings}, reverse=True)
    )
    batches = sorted({st.batch_size for st in settings})
    parts = [protocols, "batch " + ",".join(str(b) for b in batches)]
    conc = sorted(
        {st.concurrency for st in settings if st.request_rate_per_s is None and st.concurrency}
    )
    rates = sorted({st.request_rate_per_s for st in settings if st.request_rate_per_s})
    if conc:
        parts.append(f"concurrency {conc[0]}" + (f"–{conc[-1]}" if len(conc) > 1 else ""))
    if rates:
        span = f"{rates[0]:g}" + (f"–{rates[-1]:g}" if len(rates) > 1 else "")
        parts.append(f"{span} req/s Poisson")
    return ", ".join(parts)


def context_line(manifest: Manifest, summaries: Iterable[VariantSummary]) -> str:
    """'model · load · CPU, N cores · date': the second line of every title."""
    machine = manifest.machine
    cores = machine.cpu_affinity_count or machine.cpu_count_logical or "?"
    return (
        f"{manifest.model.name} · {load_text(summaries)} · "
        f"{machine.cpu_model}, {cores} cores · {manifest.created_utc[:10]}"
    )


def has_figures(s: VariantSummary) -> bool:
    """Whether the summary has a median throughput and p99 to plot."""
    return s.throughput.median is not None and s.latency_p99.median is not None


def error_bars(summaries: list[Summary], scale: float = 1.0) -> list[list[float]] | None:
    """matplotlib's [lower, upper] distances from the medians to the range of the repeats.

    None when no summary has a range (single repeats): no zero-length bars are drawn.
    """
    pairs = [
        ((s.median - s.range[0]) * scale, (s.range[1] - s.median) * scale)
        if s.range is not None and s.median is not None
        else (0.0, 0.0)
        for s in summaries
    ]
    if not any(low or high for low, high in pairs):
        return None
    return [[low for low, _ in pairs], [high for _, high in pairs]]


def load_rank(st: PerfSettings) -> tuple[bool, bool, int, float]:
    """Sort key of a load: closed loop first, gRPC before HTTP, client batch, load level."""
    level = st.request_rate_per_s if st.request_rate_per_s is not None else st.concurrency
    return (st.request_rate_per_s is not None, st.protocol != "grpc", st.batch_size, level or 0)


def load_order(data: PlotData) -> Callable[[VariantSummary], tuple[Any, ...]]:
    """Sort key: ``load_rank``, then plan order."""
    return lambda s: (*load_rank(s.settings), data.variant_index(s.variant.name))


def reference_load(data: PlotData) -> str:
    """The plan's first load point if it was measured, else the most measured one."""
    keys = [s.load_key for s in data.summaries]
    loads = data.manifest.plan.loads
    if loads and loads[0].key in keys:
        return loads[0].key
    return max(dict.fromkeys(keys), key=keys.count)


def per_configuration_rows(
    data: PlotData, keep: Callable[[VariantSummary], bool]
) -> list[VariantSummary]:
    """Summaries for one-row-per-configuration plots, grouped by load; capped at MAX_ROWS."""
    rows = sorted((s for s in data.summaries if keep(s)), key=load_order(data))
    if len(rows) > MAX_ROWS:
        ref = reference_load(data)
        rows = [s for s in rows if s.load_key == ref]
    return rows


LABEL_WRAP_CHARS = 60  # a longer row label is wrapped onto lines of at most 48 characters


def row_label(s: VariantSummary, rows: list[VariantSummary]) -> str:
    """A row's label: the description, plus protocol, batch and load when rows differ in load;
    a long one wrapped (a plan's own descriptions can be a sentence)."""
    label = s.variant.description
    if len({r.load_key for r in rows}) > 1:
        proto = PROTOCOL_NAMES[s.settings.protocol]
        label = f"{label} · {proto} b{s.settings.batch_size} {load_short(s)}"
    if len(label) > LABEL_WRAP_CHARS:
        import textwrap

        return textwrap.fill(label, 48)
    return label


def curves(
    summaries: Iterable[VariantSummary],
) -> dict[tuple[ConfigKey, str | None], list[VariantSummary]]:
    """Summaries grouped into curves (configuration, and for open loop how its requests were
    spaced: None for closed loop), by level."""
    groups: dict[tuple[ConfigKey, str | None], list[VariantSummary]] = {}
    for s in summaries:
        st = s.settings
        key = (ConfigKey.of(s), None if st.request_rate_per_s is None else st.request_distribution)
        groups.setdefault(key, []).append(s)
    for members in groups.values():
        members.sort(key=lambda m: m.settings.request_rate_per_s or m.settings.concurrency or 0)
    return groups


@contextmanager
def new_figure(width_in: float, height_in: float) -> Iterator[Figure]:
    """A matplotlib Figure ``width_in`` x ``height_in`` inches at the fixed dpi and style."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        yield Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")


def save_png(
    fig: Figure, path: Path, title: str, data: PlotData, shown: list[VariantSummary]
) -> Path:
    """Title the figure with its context line and write it atomically, without metadata."""
    # Left-aligned, so a legend beside the axes never runs under it.
    fig.suptitle(f"{title}\n{context_line(data.manifest, shown)}", fontsize=10, x=0.01, ha="left")
    buffer = io.BytesIO()
    # No 'Software' text chunk (it carries the matplotlib version) and no date: stable bytes.
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})  # gateway: memory
    return gateway.write_bytes(path, buffer.getvalue(), mode=0o644)


def variant_legend(fig: Figure, data: PlotData, summaries: list[VariantSummary]) -> None:
    """Beside the axes: colour = variant; marker and line style = protocol; hollow = open loop."""
    from matplotlib.lines import Line2D

    handles: list[Any] = [
        Line2D([], [], color=data.colour(s.variant.name), marker="o", label=s.variant.description)
        for s in dict((s.variant.name, s) for s in summaries).values()
    ]
    protocols = sorted({s.settings.protocol for s in summaries}, reverse=True)
    if len(protocols) > 1:
        handles += [
            Line2D(
                [],
                [],
                color="black",
                marker=PROTOCOL_MARKERS[p],
                linestyle=PROTOCOL_LINES[p],
                label=PROTOCOL_NAMES[p],
            )
            for p in protocols
        ]
    if any(s.settings.request_rate_per_s is not None for s in summaries):
        handles.append(
            Line2D([], [], color="black", marker="o", fillstyle="none", label="open loop (rate)")
        )
    fig.legend(handles=handles, loc="outside right upper")


def annotate_points(
    ax: Axes, labelled: list[tuple[float, float, str]], fontsize: int, log_x: bool = False
) -> None:
    """Label points; labels of points that nearly coincide are stacked, not overprinted."""
    if not labelled:
        return
    xs = [math.log10(max(x, 1e-9)) if log_x else x for x, _, _ in labelled]
    span_x = (max(xs) - min(xs)) if log_x else max(xs)
    span_y = max(y for _, y, _ in labelled) or 1.0
    placed: list[tuple[float, float]] = []
    for (x, y, text), px_here in zip(labelled, xs, strict=True):
        near = sum(
            1
            for px, py in placed
            if abs(px - px_here) < 0.04 * (span_x or 1.0) and abs(py - y) < 0.04 * span_y
        )
        placed.append((px_here, y))
        ax.annotate(
            text, (x, y), xytext=(6, 4 - 11 * near), textcoords="offset points", fontsize=fontsize
        )


def fade_error_bars(container: Any, alpha: float = 0.4) -> None:
    """Draw an errorbar container's interval lines light, so medians stay readable."""
    for lines in container.lines[1:]:
        for line in lines:
            line.set_alpha(alpha)


def limits_from_medians(
    ax: Axes, xs: list[float] | None, ys: list[float], log_x: bool = False, x_pad: float = 1.12
) -> None:
    """Fit the axes to the medians, not to the intervals: wide bars are cut at the edge."""
    top = max(ys, default=0.0)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
    if not xs:
        return
    low, high = min(xs), max(xs)
    if log_x:
        ax.set_xlim(low / 1.6, high * 1.6)
    else:
        ax.set_xlim(0, high * x_pad if high > 0 else 1.0)
