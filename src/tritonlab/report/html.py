"""A self-contained HTML report (``report.html``) of a run folder, from its stored files only.

One page: the recommendations (when a sweep produced them), the results tables with the range
of the repeats and verdicts next to the plots, the three-layer explanation of every configuration,
and the conditions (machine, versions, date, exact commands). Plots are embedded as base64
data URIs and the CSS is inline, so the file opens anywhere with no network. All text is
escaped. A tiny inline script records on load how many images decoded
(``<body data-images-loaded="N/M">``), which the headless-browser test reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt

from tritonlab.analysis.explain import Analysis, VariantReport
from tritonlab.analysis.summary import Summary
from tritonlab.analysis.verdicts import HIGHER, LOWER, Verdict
from tritonlab.experiments.store import write_text_atomic
from tritonlab.paths import PATHS_NOTE, shell_join
from tritonlab.report.efficiency_text import efficiency_section
from tritonlab.report.engine_section import (
    engine_lines,
    interference_lines,
    noise_floor_lines,
)
from tritonlab.report.experiment_log import cost_model_section
from tritonlab.report.html_parts import esc, figure, inline_markdown, recommendations_section
from tritonlab.report.method_section import count_verdicts, method_lines, robust_blocks
from tritonlab.report.plot_support import PROTOCOL_NAMES, context_line, load_text

if TYPE_CHECKING:
    from tritonlab.client.infer import InferCheck
    from tritonlab.experiments.manifest import Manifest
    from tritonlab.report.run_data import RunData

REPORT_FILE = "report.html"

CSS_FILE = Path(__file__).parent / "templates" / "report.css"

SCRIPT = """
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var loaded = images.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.dataset.imagesLoaded = loaded.length + "/" + images.length;
});
"""


def _num(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _summary_cell(s: Summary, digits: int = 0) -> str:
    spread = s.range  # min–max of the repeats
    ci = (
        f'<span class="ci">{_num(spread[0], digits)}–<wbr>{_num(spread[1], digits)}</span>'
        if spread
        else ""
    )
    return f'<td class="num">{_num(s.median, digits)}{ci}</td>'


def _verdict_cell(v: Verdict | None, better: str) -> str:
    if v is None:
        return "<td>n/a</td>"
    css = "" if not v.clear else (' class="good"' if v.word == better else ' class="bad"')
    return f"<td{css}>{esc(v.phrase())}</td>"


def _findings_note(r: VariantReport) -> str:
    """The row's note without the verdicts (they have their own columns)."""
    return "; ".join(r.labels) or "–"


COLUMNS = (
    "configuration",
    "infer/s<br>(min–max)",
    "avg µs",
    "p95 µs",
    "p99 µs<br>(min–max)",
    "queue µs",
    "compute infer µs",
    "mean batch",
    "server / client cores",
    "throughput vs baseline",
    "p99 vs baseline",
    "notes",
)


def _result_row(r: VariantReport) -> str:
    s = r.summary
    verdicts = (
        '<td class="muted">baseline</td><td class="muted">baseline</td>'
        if r.reference is None
        else _verdict_cell(r.verdicts.get("throughput"), HIGHER)
        + _verdict_cell(r.verdicts.get("latency_p99"), LOWER)
    )
    return (
        f"<tr><td>{esc(s.variant.description)}</td>"
        + _summary_cell(s.throughput)
        + _summary_cell(s.latency_avg)
        + _summary_cell(s.latency_p95)
        + _summary_cell(s.latency_p99)
        + f'<td class="num">{_num(s.queue_us.median)}</td>'
        + f'<td class="num">{_num(s.compute_infer_us.median)}</td>'
        + f'<td class="num">{_num(s.mean_batch.median, 1)}</td>'
        + f'<td class="num">{_num(s.server_cores.median, 2)} / '
        f"{_num(s.perf_analyzer_cores.median, 2)}</td>"
        + verdicts
        + f"<td>{esc(_findings_note(r))}</td></tr>"
    )


def results_table(analyses: list[Analysis]) -> str:
    """The seed's table for every load point: one group of rows per load, baseline first."""
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in COLUMNS) + "</tr>"
    body = []
    for analysis in analyses:
        first = analysis.reports[0].summary
        label = f"{load_text([first])} ({analysis.load_key})"
        body.append(f'<tr class="group"><th colspan="{len(COLUMNS)}">{esc(label)}</th></tr>')
        body += [_result_row(r) for r in analysis.reports]
    return (
        f'<div class="table-wrap"><table><thead>{head}</thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _variant_block(r: VariantReport) -> str:
    s = r.summary
    dist = ", ".join(f"{size}: {count:,}" for size, count in s.batch_distribution.items())
    trials = ", ".join(str(t) for t in s.trial_counts)
    evidence = (
        f"Batch sizes executed (size: executions): {dist or 'n/a'}. Per request in the server: "
        f"queue {_num(s.queue_us.median)} µs, compute input {_num(s.compute_input_us.median)} "
        f"µs, infer {_num(s.compute_infer_us.median)} µs, output "
        f"{_num(s.compute_output_us.median)} µs, overhead {_num(s.overhead_us.median)} µs. "
        f"Little's law ratio {_num(s.littles_law_ratio, 2)}. perf_analyzer windows per "
        f"repeat: {trials} ({s.stable_count}/{len(s.cells)} stable)."
    )
    return (
        f'<div class="variant"><h3>{esc(s.variant.description)}</h3><dl class="layers">'
        f"<dt>Background</dt><dd>{esc(r.background)}</dd>"
        f"<dt>Action</dt><dd>{esc(r.action)}</dd>"
        f"<dt>Result and explanation</dt><dd>{esc(r.result)}</dd></dl>"
        f'<p class="evidence">{esc(evidence)} Config: <code>models/{esc(s.model_name)}/'
        f"config.pbtxt</code>; raw output: <code>benchmarks/{esc(s.variant.name)}/</code>.</p>"
        "</div>"
    )


def _commands(analyses: Iterable[Analysis]) -> list[tuple[str, list[str]]]:
    out = []
    for analysis in analyses:
        for r in analysis.reports[:1]:
            if r.summary.cells:
                out.append((analysis.load_key, list(r.summary.cells[0].perf.command)))
    return out


def _shapes(shapes: dict[str, list[int]]) -> str:
    return ", ".join(f"{name} [{', '.join(str(d) for d in dims)}]" for name, dims in shapes.items())


def _markdown_section(anchor: str, lines: list[str]) -> str:
    """A log section (title first) rendered by markdown-it with raw HTML disabled (all text
    escaped), so the page and the log say the same thing."""
    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    body = renderer.render("\n".join(lines[2:]))  # without its "## " title
    return (
        f'<section id="{anchor}"><h2>{esc(lines[0].removeprefix("## "))}</h2>'
        f'<div class="markdown">{body}</div></section>'
    )


def cost_model_html(run: RunData) -> str:
    """The log's "Serving cost model" section (terms, predicted against measured, misses)."""
    return _markdown_section("cost-model", cost_model_section(run.cost_model, run.predictions))


def efficiency_html(run: RunData) -> str:
    """The log's "Serving efficiency" section, or nothing without in-process ceilings."""
    lines = efficiency_section(run.efficiencies, run.summaries)
    return _markdown_section("efficiency", lines) if lines else ""


def conditions_section(
    manifest: Manifest, analyses: list[Analysis], checks: list[InferCheck]
) -> str:
    model, machine, plan = manifest.model, manifest.machine, manifest.plan
    packages = manifest.packages
    server, tool = manifest.server, manifest.tool
    m = plan.measurement
    inputs = "; ".join(
        f"{i.name} {i.triton_dtype.removeprefix('TYPE_')} "
        f"[{', '.join(['batch', *[str(d) for d in i.dims]])}]"
        for i in model.inputs
    )
    summaries = [r.summary for a in analyses for r in a.reports]
    items = [
        (
            "Model",
            f"{model.name} from {model.onnx_file} (opset {model.opset}, sha256 "
            f"{model.sha256[:12]}); inputs: {inputs}",
        ),
        *(
            [
                (
                    "Data sent",
                    "; ".join(manifest.inputs.describe())
                    + (
                        f"; shapes: {manifest.inputs.dims_note}"
                        if manifest.inputs.dims_note
                        else ""
                    )
                    + ("" if manifest.inputs.batched else "; no batch axis (max_batch_size 0)"),
                )
            ]
            if manifest.inputs is not None
            else []
        ),
        *(("Configurations", note) for note in manifest.plan.notes),
        ("Load", f"{load_text(summaries)}; perf_analyzer on the same machine"),
        (
            "Measurement",
            f"{m.measurement_interval_ms} ms windows, stability "
            f"{m.stability_percentage:g}%, at most {m.max_trials} windows; "
            f"{plan.repeats} interleaved repeat(s) per configuration",
        ),
        (
            "Machine",
            f"{machine.cpu_model}, {machine.cpu_affinity_count} cores available, "
            f"{machine.memory_gib} GiB, {machine.os}, "
            + (", ".join(machine.gpus) if machine.gpus else "no GPU"),
        ),
        (
            "Software",
            f"Triton {server.version} ({server.source}), perf_analyzer "
            f"{manifest.perf_analyzer.version}, "
            + ", ".join(f"{k} {v}" for k, v in sorted(packages.items()))
            + f", tritonlab {tool.version} (commit {tool.commit or 'unknown'})",
        ),
        ("Date (UTC)", manifest.created_utc),
    ]
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
    commands = "".join(
        f"<h3>perf_analyzer, load {esc(key)} (first cell)</h3><pre>{esc(shell_join(cmd))}</pre>"
        for key, cmd in _commands(analyses)
    )
    server_cmd = shell_join(server.command) if server.command else "(remote server)"
    check_items = "".join(
        f"<li>{esc(PROTOCOL_NAMES.get(c.protocol, c.protocol))}"
        f"{'' if c.engine == 'onnxruntime' else esc(' served by ' + c.engine)}: one request "
        f"{esc(_shapes(c.input_shapes))} → {esc(_shapes(c.output_shapes))}; max abs diff "
        f"against onnxruntime {c.max_abs_diff:.3g} (tolerance {c.tolerance_abs:g})</li>"
        for c in checks
    )
    return (
        '<section id="conditions"><h2>Conditions</h2>'
        f'<dl class="layers">{rows}</dl>'
        + (f"<h3>Correctness check</h3><ul>{check_items}</ul>" if check_items else "")
        + f"<h3>Server command</h3><pre>{esc(server_cmd)}</pre>"
        + commands
        + f"<p>{inline_markdown(PATHS_NOTE)}</p>"
        + "<p>Rebuild this page, the plots and the experiment log from the stored results: "
        "<code>tritonlab report &lt;this folder&gt;</code>.</p></section>"
    )


def _load_rank(analysis: Analysis) -> tuple[bool, bool, int, float]:
    st = analysis.reports[0].summary.settings
    level = st.request_rate_per_s if st.request_rate_per_s is not None else st.concurrency
    return (st.request_rate_per_s is not None, st.protocol != "grpc", st.batch_size, level or 0)


def render_html_report(run: RunData, plots: dict[str, Path]) -> str:
    """The whole page as one string (a pure function of its arguments and the PNG bytes)."""
    manifest, recommendations = run.manifest, run.recommendations
    model = manifest.model.name
    analyses = sorted(run.analyses, key=_load_rank)  # closed loop, gRPC first, by level
    summaries = [r.summary for a in analyses for r in a.reports]
    sections: list[str] = []
    nav = []
    if recommendations is not None:
        sections.append(recommendations_section(recommendations, plots))
        nav.append(("recommendations", "Recommendations"))
    sections.append(
        '<section id="results"><h2>Results</h2>'
        + results_table(analyses)
        + "<p class='evidence'>Medians over the repeats; small grey figures are the "
        "range of the repeats (min–max); verdicts carry the 95% interval of the change. "
        "Latencies are client-side; queue and compute are per request in the server. "
        "Verdicts are against the baseline at the same load.</p></section>"
    )
    nav.append(("results", "Results"))
    if recommendations is None:
        sections.append(
            '<section id="overview"><h2>Throughput against latency</h2>'
            + figure("throughput_vs_p99", plots, "throughput against p99 latency")
            + "</section>"
        )
        nav.append(("overview", "Throughput vs p99"))
    where = [
        figure("latency_breakdown", plots, "latency breakdown per configuration"),
        figure("batch_sizes", plots, "batch sizes formed by Triton"),
        figure("roofline", plots, "roofline of the hot operators and served executions"),
    ]
    sections.append(
        '<section id="time"><h2>Where the time goes</h2>' + "".join(where) + "</section>"
    )
    nav.append(("time", "Where the time goes"))
    sweeps = [
        figure("concurrency_curves", plots, "throughput and p99 against concurrency"),
        figure("p99_vs_queue_delay", plots, "p99 against max_queue_delay_microseconds"),
        figure("http_vs_grpc", plots, "HTTP against gRPC"),
    ]
    if any(sweeps):
        sections.append('<section id="sweeps"><h2>Sweeps</h2>' + "".join(sweeps) + "</section>")
        nav.append(("sweeps", "Sweeps"))
    explained = "".join(
        (f"<h3>Load {esc(a.load_key)}</h3>" if len(analyses) > 1 else "")
        + "".join(_variant_block(r) for r in a.reports)
        for a in analyses
    )
    sections.append(
        '<section id="explanations"><h2>What each change did, and why</h2>'
        + explained
        + "</section>"
    )
    nav.append(("explanations", "Explanations"))
    if run.efficiencies:
        sections.append(efficiency_html(run))
        nav.append(("efficiency", "Serving efficiency"))
    sections.append(cost_model_html(run))
    nav.append(("cost-model", "Cost model"))
    sections.append(conditions_section(manifest, analyses, run.infer_checks))
    nav.append(("conditions", "Conditions"))
    method = "".join(
        f"<li>{inline_markdown(line[2:])}</li>"
        for line in method_lines(
            count_verdicts(analyses),
            manifest.adaptive is not None,
            robust_blocks(analyses),
            bool(run.stopping and run.stopping.get("precision")),
        )
        + engine_lines(run.engine, run.stopping, run.cells)
        + noise_floor_lines(run.noise_floors)
        + interference_lines(run.cells)
        if line.startswith("- ")
    )
    sections.append(f'<section id="method"><h2>Method</h2><ul>{method}</ul></section>')
    nav.append(("method", "Method"))
    links = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in nav if t)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(model)} on Triton: experiment report</title>\n"
        f"<style>\n{CSS_FILE.read_text(encoding='utf-8')}</style>\n</head>\n<body>\n"
        f"<header><h1>{esc(model)} on NVIDIA Triton: experiment report</h1>"
        f"<p>{esc(context_line(manifest, summaries))}</p></header>\n"
        f"<nav>{links}</nav>\n<main>\n" + "\n".join(sections) + "\n</main>\n"
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )


def write_html_report(run: RunData, plots: dict[str, Path]) -> Path:
    path = run.paths.root / REPORT_FILE
    write_text_atomic(path, render_html_report(run, plots))
    return path
