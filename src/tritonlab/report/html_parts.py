"""Pieces of the HTML report (``html.py``): escaping, the plots embedded as data URIs with
their captions, and the sweep's recommendations (picks, Pareto frontier, knees)."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import TYPE_CHECKING

from tritonlab.analysis.config_key import ConfigKey
from tritonlab.report.plot_support import PROTOCOL_NAMES
from tritonlab.report.recommend_summary_text import summary_line
from tritonlab.report.recommend_text import justification

if TYPE_CHECKING:
    from tritonlab.analysis.recommend_records import Pick, Recommendations

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

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def inline_markdown(text: str) -> str:
    """Escape ``text``, then turn `code` and **bold** into tags (the log's only markup)."""
    out = _CODE.sub(r"<code>\1</code>", esc(text))
    return _BOLD.sub(r"<strong>\1</strong>", out)


def figure(name: str, plots: dict[str, Path], alt: str) -> str:
    path = plots.get(name)
    if path is None:
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    caption = CAPTIONS.get(name, "")
    return (
        f'<figure id="plot-{esc(name)}"><img src="data:image/png;base64,{data}" '
        f'alt="{esc(alt)}"><figcaption>{esc(caption)} File: <code>plots/{esc(path.name)}'
        "</code></figcaption></figure>"
    )


def _pick_card(pick: Pick, recs: Recommendations) -> str:
    p = pick.point
    load = (
        f"{p.request_rate_per_s:g} req/s Poisson"
        if p.request_rate_per_s is not None
        else f"concurrency {p.concurrency}"
    )
    verdicts = "".join(
        f"<li>{esc(v.figure)}: {esc(v.phrase())} <span class='evidence'>({esc(v.method)})"
        "</span></li>"
        for v in pick.verdicts.values()
    )
    return (
        f'<div class="card"><h3>{esc(pick.kind)}: {esc(p.description)}</h3>'
        f"<p>{esc(PROTOCOL_NAMES.get(p.protocol, p.protocol))}, client batch {p.batch_size}, "
        f"{esc(load)}: <strong>{p.throughput_infer_per_s:,.0f} infer/s</strong>, "
        f"p99 <strong>{p.latency_p99_us:,.0f} µs</strong> (medians; worst repeat's p99 "
        f"{p.worst_p99_us:,.0f} µs).</p>"
        f"<p>{esc(justification(pick, recs))}</p>"
        + (f"<ul>{verdicts}</ul>" if verdicts else "")
        + "</div>"
    )


def _curve_label(key: ConfigKey, descriptions: dict[str, str]) -> str:
    """A configuration in words: 'baseline (...) · gRPC, batch 1'."""
    name = descriptions.get(key.variant, key.variant)
    return f"{name} · {PROTOCOL_NAMES.get(key.protocol, key.protocol)}, batch {key.batch_size}"


def _key_value_table(
    title: str, unit: str, values: dict[ConfigKey, float], descriptions: dict[str, str]
) -> str:
    if not values:
        return ""
    rows = "".join(
        f'<tr><td>{esc(_curve_label(k, descriptions))}</td><td class="num">{v:,.0f}</td></tr>'
        for k, v in values.items()
    )
    return (
        f"<h3>{esc(title)}</h3><div class='table-wrap'><table class='compact'><thead><tr>"
        f"<th>configuration</th><th>{esc(unit)}</th></tr></thead><tbody>{rows}</tbody></table>"
        "</div>"
    )


def recommendations_section(recs: Recommendations, plots: dict[str, Path]) -> str:
    target = (
        f", target load {recs.target_load_infer_per_s:,.0f} infer/s"
        if recs.target_load_infer_per_s is not None
        else ""
    )
    cards = [
        _pick_card(p, recs) for p in (recs.throughput_pick, recs.latency_pick) if p is not None
    ]
    descriptions = {p.variant: p.description for p in recs.points}
    frontier = "".join(
        f"<tr><td>{esc(p.description)}</td><td>{esc(p.load_key)}</td>"
        f'<td class="num">{p.throughput_infer_per_s:,.0f}</td>'
        f'<td class="num">{p.latency_p99_us:,.0f}</td></tr>'
        for p in recs.frontier
    )
    return (
        '<section id="recommendations"><h2>Recommendations</h2>'
        f'<p class="summary-line">{esc(summary_line(recs))}</p>'
        f"<p>Latency budget: p99 ≤ {recs.latency_budget_p99_us:,.0f} µs{esc(target)}; "
        f"{len(recs.points)} operating points measured, {len(recs.frontier)} on the Pareto "
        "frontier.</p>"
        + (f'<div class="cards">{"".join(cards)}</div>' if cards else "")
        + figure("throughput_vs_p99", plots, "throughput against p99 latency, picks marked")
        + (
            "<h3>Pareto frontier</h3><div class='table-wrap'><table class='compact'><thead><tr>"
            "<th>configuration</th><th>load</th><th>infer/s</th><th>p99 µs</th></tr></thead>"
            f"<tbody>{frontier}</tbody></table></div>"
            if frontier
            else ""
        )
        + _key_value_table(
            "Knee of each concurrency curve",
            "concurrency",
            {k: float(v) for k, v in recs.knees.items()},
            descriptions,
        )
        + _key_value_table(
            "Highest request rate within the p99 budget (open loop)",
            "req/s",
            recs.max_rate_within_budget,
            descriptions,
        )
        + "</section>"
    )
