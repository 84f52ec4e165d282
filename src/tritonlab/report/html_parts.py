"""Pieces of the HTML report (``html.py``): the Jinja2 environment of its templates, the plots
as data URIs with their captions, the log's inline markup, and the sweep's recommendations."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2
from jinja2.ext import Extension
from markupsafe import Markup

from tritonlab.report.plot_support import PROTOCOL_NAMES
from tritonlab.report.recommend_summary_text import summary_line
from tritonlab.report.recommend_text import justification
from tritonlab.report.text_format import num
from tritonlab.stats.config_key import ConfigKey

if TYPE_CHECKING:
    from tritonlab.decisions.recommend_records import Pick, Recommendations

CAPTIONS = {
    "throughput_vs_p99": "Each point is one configuration at one load: median over the repeats; "
    "light bars are the range of the repeats, min–max (cut at the plot's edge when wider). "
    "Up and to the left is better. Lines join the load levels of one configuration.",
    "concurrency_curves": "Closed-loop load: more requests in flight raise throughput until the "
    "server saturates; beyond that only the tail grows.",
    "latency_breakdown": "Per request in the server (Triton's statistics, medians): time queued, "
    "then compute input / infer / output. The black tick is the client-side average latency; the "
    "gap is network, serialisation and the client.",
    "p99_vs_queue_delay": "Batching variants only: how long the batcher may wait for a batch "
    "against the tail latency and the throughput it buys. Dotted (one load only): no batching.",
    "http_vs_grpc": "The same configuration under the same load, over each protocol.",
    "batch_sizes": "Share of executions per batch size Triton formed (all repeats).",
    "roofline": "The model's heavy operators at batch 1, 8 and 64 (onnxruntime's kernel times) "
    "and each served configuration's executions (stars: the whole model at its mean batch, "
    "Triton's compute time) against this machine's measured bandwidth and GEMM ceilings.",
}

TEMPLATES = Path(__file__).parent / "templates"
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def esc(text: object) -> str:
    """``text`` as HTML text: Python's ``html.escape`` (quotes as ``&quot;`` and ``&#x27;``)."""
    return html.escape(str(text), quote=True)


def inline_markdown(text: str) -> Markup:
    """Escape ``text``, then turn `code` and **bold** into tags (the log's only markup)."""
    out = _CODE.sub(r"<code>\1</code>", esc(text))
    return Markup(_BOLD.sub(r"<strong>\1</strong>", out))  # escaped above


def protocol_name(protocol: str) -> str:
    """'grpc' -> 'gRPC', 'http' -> 'HTTP' (other names unchanged)."""
    return PROTOCOL_NAMES.get(protocol, protocol)


@dataclass(frozen=True)
class Figure:
    """One plot embedded in the page: ``data`` is the PNG in base64 (ASCII, nothing to escape)."""

    name: str
    data: str
    alt: str
    caption: str
    file: str


def figure(name: str, plots: dict[str, Path], alt: str) -> Figure | None:
    """The plot ``name`` as a Figure with its caption, or None when it was not drawn."""
    if (path := plots.get(name)) is None:
        return None
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return Figure(name, data, alt, CAPTIONS.get(name, ""), path.name)


def figures(plots: dict[str, Path], wanted: dict[str, str]) -> list[Figure]:
    """The drawn plots among ``wanted`` (name -> alt text), in that order."""
    return [f for name, alt in wanted.items() if (f := figure(name, plots, alt)) is not None]


@dataclass(frozen=True)
class KeyValueTable:
    """A two-column table, one configuration a row: (label, value) with the value in words."""

    title: str
    unit: str
    rows: list[tuple[str, str]]


@dataclass(frozen=True)
class RecommendationsView:
    """What the recommendations section shows (``section_recommendations.html.j2``)."""

    recs: Recommendations
    summary_line: str  # the sweep in one sentence (report/recommend_summary_text.py)
    target: str  # ", target load N infer/s" or ""
    picks: list[tuple[Pick, str]]  # each pick with its justification
    figure: Figure | None
    tables: list[KeyValueTable]


def pick_load(pick: Pick) -> str:
    """The pick's load in words: 'N req/s Poisson' (or 'constant') or 'concurrency N'."""
    p = pick.point
    if p.request_rate_per_s is not None:
        return f"{p.request_rate_per_s:g} req/s {p.arrivals.word}"
    return f"concurrency {p.concurrency}"


def _curve_label(key: ConfigKey, descriptions: dict[str, str]) -> str:
    """A configuration in words: 'baseline (...) · gRPC, batch 1'."""
    name = descriptions.get(key.variant, key.variant)
    return f"{name} · {protocol_name(key.protocol)}, batch {key.batch_size}"


def _table(
    title: str, unit: str, values: dict[ConfigKey, float], descriptions: dict[str, str]
) -> list[KeyValueTable]:
    rows = [(_curve_label(k, descriptions), num(v)) for k, v in values.items()]
    return [KeyValueTable(title, unit, rows)] if rows else []


def recommendations_view(recs: Recommendations, plots: dict[str, Path]) -> RecommendationsView:
    """The sweep's picks, Pareto frontier, knees and highest rates for the template."""
    target = (
        f", target load {recs.target_load_infer_per_s:,.0f} infer/s"
        if recs.target_load_infer_per_s is not None
        else ""
    )
    descriptions = {p.variant: p.description for p in recs.points}
    tables = _table(
        "Knee of each concurrency curve",
        "concurrency",
        {k: float(v) for k, v in recs.knees.items()},
        descriptions,
    ) + _table(
        "Highest request rate within the p99 budget (open loop)",
        "req/s",
        recs.max_rate_within_budget,
        descriptions,
    )
    return RecommendationsView(
        recs,
        summary_line(recs),
        target,
        [
            (p, justification(p, recs))
            for p in (recs.throughput_pick, recs.latency_pick)
            if p is not None
        ],
        figure("throughput_vs_p99", plots, "throughput against p99 latency, picks marked"),
        tables,
    )


_SPACELESS = re.compile(r"{%-?\s*spaceless\s*-?%}(.*?){%-?\s*endspaceless\s*-?%}", re.S)
_BREAK = re.compile(r"\s*\n\s*")


def _join_break(m: re.Match[str]) -> str:
    s = m.string
    tight = (
        m.start() == 0
        or m.end() == len(s)
        or s.endswith((">", "%}", "#}"), 0, m.start())
        or s.startswith(("<", "{%", "{#"), m.end())
    )
    return "" if tight else " "


class Spaceless(Extension):
    """``{% spaceless %}…{% endspaceless %}``: the template's line breaks there are layout only
    (rules: html.py's docstring); applied to the template source when it is loaded."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        """``source`` with each spaceless region joined into one line and its markers removed."""
        return _SPACELESS.sub(lambda m: _BREAK.sub(_join_break, m.group(1)), source)


def _escaped(value: object) -> object:
    # Python's html.escape rather than markupsafe's flavour (&#34; &#39;): the same in a browser,
    # and the reports written before the templates stay byte-identical.
    return value if hasattr(value, "__html__") else Markup(esc(value))


@cache
def environment() -> jinja2.Environment:
    """The Jinja2 environment of the report's templates (autoescaping, strict undefined)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        finalize=_escaped,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        extensions=[Spaceless],
    )
    env.filters.update(num=num, protocol=protocol_name, inline_markdown=inline_markdown)
    env.globals.update(pick_load=pick_load)
    return env
