"""A self-contained HTML report (``report.html``) of a run folder, from its stored files only.

One page: the recommendations (when a sweep produced them), the results tables with the range
of the repeats and verdicts next to the plots, the three-layer explanation of every configuration,
and the conditions (machine, versions, date, exact commands). Plots are embedded as base64
data URIs and the CSS is inline, so the file opens anywhere with no network. A tiny inline
script records on load how many images decoded (``<body data-images-loaded="N/M">``), which the
headless-browser test reads.

The markup lives in Jinja2 templates under ``templates/``: ``report.html.j2`` is the page and
lists its sections, one ``section_<anchor>.html.j2`` each, with shared macros in
``macros.html.j2``. This module only prepares the data they print. Every printed value is
escaped (``autoescape`` with Python's ``html.escape``); only our own renderers' output is
``Markup``: the log's markdown (markdown-it, raw HTML disabled), ``inline_markdown`` and the
CSS file. Inside ``{% spaceless %}`` … ``{% endspaceless %}`` a line break in a template is for
reading only: next to a tag (``<…>``, ``{% … %}``, ``{# … #}``) it is dropped with the
indentation around it, elsewhere (between words or values) it becomes one space.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from markdown_it import MarkdownIt
from markupsafe import Markup

from tritonlab import gateway
from tritonlab.client.infer import SHAPES_ONLY
from tritonlab.explanation.explain import Analysis, VariantReport
from tritonlab.paths import PATHS_NOTE, shell_join
from tritonlab.report.conditions_text import measurement_line, trust_line
from tritonlab.report.cost_model_text import cost_model_section
from tritonlab.report.efficiency_text import efficiency_section
from tritonlab.report.engine_section import (
    engine_lines,
    floor_reached,
    interference_lines,
    noise_floor_lines,
    verdict_blocks,
)
from tritonlab.report.html_parts import (
    TEMPLATES,
    Figure,
    RecommendationsView,
    environment,
    figure,
    figures,
    protocol_name,
    recommendations_view,
)
from tritonlab.report.method_section import (
    count_verdicts,
    method_lines,
    robust_blocks,
    run_stopping_note,
)
from tritonlab.report.plot_support import context_line, load_rank, load_text
from tritonlab.report.still_open import still_open
from tritonlab.report.text_format import check_against, model_source
from tritonlab.stats.run_trust import RunTrust
from tritonlab.stats.verdicts import HIGHER, LOWER, Verdict

if TYPE_CHECKING:
    from tritonlab.client.infer import InferCheck
    from tritonlab.experiments.manifest import Manifest
    from tritonlab.report.run_data import RunData


def content_security_policy(css: str, script: str) -> str:
    """The page's policy: nothing loads from anywhere (plots are ``data:`` images), and only
    the page's own style sheet and script run, named by their sha256 (a name or a path in the
    page can never become markup that runs)."""

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    return (
        f"default-src 'none'; img-src data:; style-src {digest(css)}; "
        f"script-src {digest(script)}; base-uri 'none'; form-action 'none'"
    )


class VerdictCell(NamedTuple):
    """A verdict column of the results table: its phrase and CSS class ('', 'good', 'bad')."""

    text: str
    css: str


@dataclass(frozen=True)
class ResultRow:
    """One configuration's row: ``verdicts`` is None for the baseline."""

    report: VariantReport
    verdicts: tuple[VerdictCell, VerdictCell] | None
    note: str


@dataclass(frozen=True)
class ResultGroup:
    """The rows of one load point under its label ('gRPC, batch 1, concurrency 8 (key)')."""

    label: str
    rows: list[ResultRow]


def _verdict_cell(v: Verdict | None, better: str) -> VerdictCell:
    if v is None:
        return VerdictCell("n/a", "")
    return VerdictCell(v.phrase(), "" if not v.clear else ("good" if v.word == better else "bad"))


def _result_row(r: VariantReport) -> ResultRow:
    verdicts = (
        None
        if r.reference is None
        else (
            _verdict_cell(r.verdicts.get("throughput"), HIGHER),
            _verdict_cell(r.verdicts.get("latency_p99"), LOWER),
        )
    )
    return ResultRow(r, verdicts, "; ".join(r.labels) or "–")  # the verdicts have own columns


@dataclass(frozen=True)
class Explanation:
    """One configuration's three layers and the evidence under them."""

    report: VariantReport
    batches: str  # "size: executions, ..." or "n/a"
    trials: str  # perf_analyzer windows per repeat, "3, 4, 3"


def _explanation(r: VariantReport) -> Explanation:
    s = r.summary
    dist = ", ".join(f"{size}: {count:,}" for size, count in s.batch_distribution.items())
    return Explanation(r, dist or "n/a", ", ".join(str(t) for t in s.trial_counts))


@dataclass(frozen=True)
class CheckLine:
    """One correctness check: a request through Triton against onnxruntime."""

    protocol: str
    engine: str  # "" for onnxruntime, else " served by <engine>"
    inputs: str
    outputs: str
    against: str  # what the answer was compared with, and how close (``check_against``)
    tolerance: str  # " (tolerance X)", or "" for a shapes-only check


@dataclass(frozen=True)
class Conditions:
    """The conditions section: (label, value) rows, the checks and the exact commands."""

    items: list[tuple[str, str]]
    checks: list[CheckLine]
    server_command: str
    commands: list[tuple[str, str]]  # (load key, perf_analyzer command of its first cell)
    paths_note: str


@dataclass(frozen=True)
class MarkdownSection:
    """A log section rendered by markdown-it: its title and the HTML of its body."""

    title: str
    body: Markup


class Section(NamedTuple):
    """One section of the page: ``section_<anchor>.html.j2``, linked as ``title``."""

    anchor: str
    title: str


@dataclass(frozen=True)
class Page:
    """Everything ``report.html.j2`` prints."""

    model: str
    context: str
    css: Markup
    script: Markup
    csp: Markup
    sections: list[Section]
    recommendations: RecommendationsView | None
    results: list[ResultGroup]
    overview: Figure | None
    time_figures: list[Figure]
    sweep_figures: list[Figure]
    explanations: list[tuple[str, list[Explanation]]]  # (load key or "", its configurations)
    efficiency: MarkdownSection | None
    cost_model: MarkdownSection
    conditions: Conditions
    method: list[str]


def _shapes(shapes: dict[str, list[int]]) -> str:
    return ", ".join(f"{name} [{', '.join(str(d) for d in dims)}]" for name, dims in shapes.items())


def markdown_section(lines: list[str]) -> MarkdownSection:
    """A log section (title first) rendered by markdown-it with raw HTML disabled (all text
    escaped), so the page and the log say the same thing."""
    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    body = renderer.render("\n".join(lines[2:]))  # without its "## " title
    return MarkdownSection(lines[0].removeprefix("## "), Markup(body))


def _condition_items(
    manifest: Manifest, analyses: list[Analysis], trust: RunTrust | None = None
) -> list[tuple[str, str]]:
    model, machine, plan = manifest.model, manifest.machine, manifest.plan
    server, tool = manifest.server, manifest.tool
    # A batch axis only where the model has one (a run stored before ``inputs``: as before).
    lead = ["batch"] if manifest.inputs is None or manifest.inputs.batched else []
    inputs = "; ".join(
        f"{i.name} {i.triton_dtype.removeprefix('TYPE_')} "
        f"[{', '.join([*lead, *[str(d) for d in i.dims]])}]"
        for i in model.inputs
    )
    items = [("Model", f"{model_source(model, code='')}; inputs: {inputs}")]
    if (data := manifest.inputs) is not None:
        items.append(
            (
                "Data sent",
                "; ".join(data.describe())
                + (f"; shapes: {data.dims_note}" if data.dims_note else "")
                + ("" if data.batched else "; no batch axis (max_batch_size 0)"),
            )
        )
    items += [("Configurations", note) for note in plan.notes]
    summaries = [r.summary for a in analyses for r in a.reports]
    return [
        *items,
        ("Load", f"{load_text(summaries)}; perf_analyzer on the same machine"),
        (
            "Measurement",
            measurement_line(
                plan, [c for s in summaries for c in s.cells], manifest.tune is not None
            )
            .removeprefix("- Measurement: ")
            .removesuffix("."),
        ),
        *(
            [("Trust", trust_line(trust).removeprefix("- Trust: ").replace("**", ""))]
            if trust is not None
            else []
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
            + ", ".join(f"{k} {v}" for k, v in sorted(manifest.packages.items()))
            + f", tritonlab {tool.version} (commit {tool.commit or 'unknown'})",
        ),
        ("Date (UTC)", manifest.created_utc),
    ]


def conditions(
    manifest: Manifest,
    analyses: list[Analysis],
    checks: list[InferCheck],
    trust: RunTrust | None = None,
) -> Conditions:
    """Machine, versions, date, the correctness checks and the exact commands of the run."""
    server = manifest.server
    return Conditions(
        _condition_items(manifest, analyses, trust),
        [
            CheckLine(
                protocol_name(c.protocol),
                "" if c.engine == "onnxruntime" else f" served by {c.engine}",
                _shapes(c.input_shapes),
                _shapes(c.output_shapes),
                check_against(c),
                "" if c.reference == SHAPES_ONLY else f" (tolerance {c.tolerance_abs:g})",
            )
            for c in checks
        ],
        shell_join(server.command) if server.command else "(remote server)",
        [
            (a.load_key, shell_join(a.reports[0].summary.cells[0].perf.command))
            for a in analyses
            if a.reports and a.reports[0].summary.cells
        ],
        PATHS_NOTE,
    )


def _method(run: RunData, analyses: list[Analysis]) -> list[str]:
    lines = (
        method_lines(
            count_verdicts(analyses),
            run_stopping_note(run),
            robust_blocks(analyses),
            tune=run.tune is not None,
        )
        + engine_lines(
            run.engine,
            run.stopping,
            run.cells,
            run.manifest.cpu_split,
            run.manifest.sweep is not None,
            run.manifest.tune is not None,
            still_open(run, run.manifest.machine.cpu_affinity_count or 1),
        )
        + noise_floor_lines(
            run.noise_floors,
            run.trust,
            run.engine is not None,
            floor_reached(run.analyses),
            verdict_blocks(run.analyses),
        )
        + interference_lines(run.cells)
    )
    return [line[2:] for line in lines if line.startswith("- ")]


def _sections(page: Page, efficiencies: bool) -> list[Section]:
    """The page's sections in order, those with nothing to show left out."""
    shown = [
        (page.recommendations is not None, "recommendations", "Recommendations"),
        (True, "results", "Results"),
        (page.recommendations is None, "overview", "Throughput vs p99"),
        (True, "time", "Where the time goes"),
        (bool(page.sweep_figures), "sweeps", "Sweeps"),
        (True, "explanations", "Explanations"),
        (efficiencies, "efficiency", "Serving efficiency"),
        (True, "cost-model", "Cost model"),
        (True, "conditions", "Conditions"),
        (True, "method", "Method"),
    ]
    return [Section(anchor, title) for show, anchor, title in shown if show]


def html_page(run: RunData, plots: dict[str, Path]) -> Page:
    """The data of the page, from ``run`` and the written plots."""
    manifest, recommendations = run.manifest, run.recommendations
    analyses = sorted(run.analyses, key=lambda a: load_rank(a.reports[0].summary.settings))
    many = len(analyses) > 1
    css = (TEMPLATES / "report.css").read_text(encoding="utf-8")
    script = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    page = Page(
        model=manifest.model.name,
        context=context_line(manifest, [r.summary for a in analyses for r in a.reports]),
        css=Markup(css),  # our own files
        script=Markup(script),
        csp=Markup(content_security_policy(css, script)),  # our own text: no user string
        sections=[],
        recommendations=(
            recommendations_view(recommendations, plots) if recommendations is not None else None
        ),
        results=[  # the seed's table for every load point, baseline first
            ResultGroup(
                f"{load_text([a.reports[0].summary])} ({a.load_key})",
                [_result_row(r) for r in a.reports],
            )
            for a in analyses
        ],
        overview=figure("throughput_vs_p99", plots, "throughput against p99 latency"),
        time_figures=figures(
            plots,
            {
                "latency_breakdown": "latency breakdown per configuration",
                "batch_sizes": "batch sizes formed by Triton",
                "roofline": "roofline of the hot operators and served executions",
            },
        ),
        sweep_figures=figures(
            plots,
            {
                "concurrency_curves": "throughput and p99 against concurrency",
                "p99_vs_queue_delay": "p99 against max_queue_delay_microseconds",
                "http_vs_grpc": "HTTP against gRPC",
            },
        ),
        explanations=[
            (a.load_key if many else "", [_explanation(r) for r in a.reports]) for a in analyses
        ],
        efficiency=(
            markdown_section(
                efficiency_section(
                    run.efficiencies, run.summaries, _split_cores(run.manifest), run.trust
                )
            )
            if run.efficiencies
            else None
        ),
        cost_model=markdown_section(
            cost_model_section(
                run.cost_model,
                run.predictions,
                run.unfitted_loads,
                graph=manifest.model.is_graph,
                stateful=manifest.plan.measurement.requests_per_sequence is not None,
            )
        ),
        conditions=conditions(manifest, analyses, run.infer_checks, run.trust),
        method=_method(run, analyses),
    )
    page.sections.extend(_sections(page, bool(run.efficiencies)))
    return page


def render_html_report(run: RunData, plots: dict[str, Path]) -> str:
    """The whole page as one string (a pure function of its arguments and the PNG bytes)."""
    return environment().get_template("report.html.j2").render(page=html_page(run, plots))


def write_html_report(run: RunData, plots: dict[str, Path]) -> Path:
    """Write ``report.html`` into the run folder; returns its path."""
    path = run.paths.html_report
    gateway.write_text(path, render_html_report(run, plots))
    return path


def _split_cores(manifest: Manifest) -> tuple[int, int] | None:
    from tritonlab.report.run_data import split_cores

    return split_cores(manifest)
