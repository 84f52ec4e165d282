"""Render ``docs/experiment_log.md`` from stored results only.

The log opens with the measurement conditions (model, input shape, protocol, load, window,
stability, repeats, machine, versions, exact commands), then the seed's table with intervals
and verdicts, then the three layers per configuration, then the method. It is a pure function
of the files in the run folder, so ``tritonlab report`` rebuilds it byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tritonlab.experiments.manifest import FaultRecord
from tritonlab.experiments.store import CellResult
from tritonlab.explanation.cost_model import CostModel
from tritonlab.explanation.cost_prediction import MODEL_FAILS_PCT, Prediction
from tritonlab.explanation.explain import Analysis, VariantReport
from tritonlab.explanation.operators import operator_paragraph
from tritonlab.paths import PATHS_NOTE, shell_join
from tritonlab.perf.operator_profile import OperatorsRecord
from tritonlab.stats.run_trust import RunTrust
from tritonlab.stats.summary import column_digits

if TYPE_CHECKING:
    from tritonlab.experiments.manifest import Manifest
from tritonlab.client.infer import SHAPES_ONLY
from tritonlab.report.conditions_text import (
    load_line,
    measurement_line,
    sent_lines,
    sequence_lengths,
    trust_line,
)
from tritonlab.report.cost_model_text import cost_model_section
from tritonlab.report.efficiency_text import efficiency_section
from tritonlab.report.engine_section import (
    engine_lines,
    floor_reached,
    interference_lines,
    noise_floor_lines,
    verdict_blocks,
)
from tritonlab.report.method_section import (
    adaptive_lines,
    count_verdicts,
    method_lines,
    robust_blocks,
    run_stopping_note,
)
from tritonlab.report.nodes_section import nodes_section
from tritonlab.report.page_tables import blocks_note, drift_note
from tritonlab.report.plot_support import PROTOCOL_NAMES
from tritonlab.report.recommend_section import recommendations_section
from tritonlab.report.roofline_text import roofline_lines
from tritonlab.report.run_data import RunData, changed_step, split_cores
from tritonlab.report.steps_section import changed_step_line, steps_section
from tritonlab.report.still_open import still_open
from tritonlab.report.text_format import check_against, model_source, num
from tritonlab.report.trace_section import trace_section
from tritonlab.report.tune_section import tune_section


def _conditions(
    manifest: Manifest, analyses: list[Analysis], cells: Sequence[CellResult], trust: RunTrust
) -> list[str]:
    plan, model, machine = manifest.plan, manifest.model, manifest.machine
    server, packages = manifest.server, manifest.packages
    settings = [r.summary.settings for a in analyses for r in a.reports]
    # the A/A controls' loads too: their rates are their own peak's share (issue 36 audit)
    settings += [c.perf.settings for c in cells if c.variant.control]
    # A batch axis only where the model has one (a run stored before ``inputs``: as before).
    lead = ["batch"] if manifest.inputs is None or manifest.inputs.batched else []
    inputs = ", ".join(
        f"`{i.name}` {i.triton_dtype.removeprefix('TYPE_')} "
        f"[{', '.join([*lead, *[str(d) for d in i.dims]])}]"
        for i in model.inputs
    )
    return [
        "## Conditions",
        "",
        f"- Model: {model_source(model)}; inputs: {inputs}.",
        *sent_lines(manifest, [a.load_key for a in analyses]),
        *(f"- Configurations: {note}" for note in plan.notes),
        load_line(settings, len(analyses), sequence_lengths([a.load_key for a in analyses])),
        measurement_line(plan, cells, manifest.tune is not None),
        trust_line(trust),
        f"- Machine: {machine.cpu_model}, {machine.cpu_affinity_count} cores available, "
        f"{machine.memory_gib} GiB, {machine.os}"
        + (f", GPUs: {', '.join(machine.gpus)}" if machine.gpus else ", no GPU")
        + ".",
        f"- Software: Triton {server.version} ({server.source}), perf_analyzer "
        f"{manifest.perf_analyzer.version}, tritonclient "
        f"{packages.get('tritonclient', '?')}, "
        f"onnxruntime {packages.get('onnxruntime', '?')}, tritonlab "
        f"{manifest.tool.version} (commit {manifest.tool.commit or 'unknown'}).",
        *_service_lines(manifest),
        f"- Date (UTC): {manifest.created_utc}.",
        "",
    ]


def _service_lines(manifest: Manifest) -> list[str]:
    """A ``--url`` run measured a service: say what that leaves unknown."""
    if not manifest.server.source.startswith("remote server"):
        return []
    return [
        f"- Measured a service at {manifest.server.http_url}, not a server tritonlab started: "
        "no server CPU was measured, and the machine above is the client's. Behind a load "
        "balancer the server-side figures (queue, compute, batches) are those of whichever "
        "replica answered each statistics call: per-replica figures are unknown."
    ]


def _table(analysis: Analysis) -> list[str]:
    lines = [
        "| config | conc. | infer/s | avg µs | p95 µs | p99 µs | queue µs | compute infer µs "
        "| mean batch | server / client cores | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    columns = [
        column_digits([r.summary.throughput for r in analysis.reports]),
        *(
            column_digits([getattr(r.summary, name) for r in analysis.reports])
            for name in ("latency_avg", "latency_p95", "latency_p99")
        ),
    ]
    for r in analysis.reports:
        s = r.summary
        conc = (
            str(s.settings.concurrency)
            if s.settings.concurrency
            else "trace"
            if s.settings.request_intervals is not None
            else (f"{s.settings.request_rate_per_s:g}/s{s.settings.arrivals.table_note}")
        )
        lines.append(
            f"| {s.variant.description} | {conc} | {s.throughput.text(columns[0])} | "
            f"{s.latency_avg.text(columns[1])} | {s.latency_p95.text(columns[2])} | "
            f"{s.latency_p99.text(columns[3])} | "
            f"{num(s.queue_us.median)} | {num(s.compute_infer_us.median)} | "
            f"{num(s.mean_batch.median, 1)} | {num(s.server_cores.median, 2)} / "
            f"{num(s.perf_analyzer_cores.median, 2)} | {r.note} |"
        )
    return lines


def _counters_note(manifest: Manifest) -> str:
    """For a pipeline whose configurations change one step: the queue, compute and batch
    columns are the measured model's own counters, not the step's."""
    step = changed_step(manifest)
    if step is None:
        return ""
    return (
        f" The queue, compute and mean batch columns are the measured model's own counters "
        f"(an ensemble's request is one execution of it); step `{step}`'s own batch and compute "
        "are in each row's text below."
    )


def _step_line(manifest: Manifest, analysis: Analysis, r: VariantReport) -> str:
    """For a user's pipeline whose configurations change one step (``repository["tuned"]``),
    that step's own batch and compute beside the measured model's counters."""
    step = changed_step(manifest)
    if step is None:
        return ""
    base = analysis.reports[0].summary
    return changed_step_line(step, r.summary, None if r.summary is base else base)


def _variant_section(r: VariantReport, step_line: str = "") -> list[str]:
    s = r.summary
    dist = ", ".join(f"{size}: {count}" for size, count in s.batch_distribution.items())
    trials = ", ".join(str(t) for t in s.trial_counts)
    return [
        f"### {s.variant.description}",
        "",
        f"- **Background.** {r.background}",
        f"- **Action.** {r.action}",
        f"- **Result and explanation.** {r.result}" + (f" {step_line}" if step_line else ""),
        "",
        f"Evidence: batch sizes Triton executed (size: executions, all repeats): {dist or 'n/a'}; "
        f"per request in the server: queue {num(s.queue_us.median)} µs, compute input "
        f"{num(s.compute_input_us.median)} µs, infer {num(s.compute_infer_us.median)} µs, "
        f"output {num(s.compute_output_us.median)} µs, overhead "
        f"{num(s.overhead_us.median)} µs; compute per inference "
        f"{num(s.compute_per_inference_us.median)} µs; Little's law ratio "
        f"{num(s.littles_law_ratio, 2)}; perf_analyzer windows per repeat: {trials} "
        f"({s.stable_count}/{len(s.cells)} stable). Raw output: "
        f"`benchmarks/{s.variant.name}/`; config: `models/{s.model_name}/config.pbtxt`.",
        "",
    ]


def _misses(predictions: Sequence[Prediction]) -> str:
    """' (which misses 3 of its 6 points ...: ...)' where the cost model misses points of this
    run by more than 25% (issue 36 audit: the serving path's 94% quoted as fact where the model
    missed the measured executions); '' where it misses none."""
    counted = [p for p in predictions if not p.rate_not_kept]
    missed = sum(1 for p in counted if p.fails or p.term_misses())
    if not missed:
        return ""
    return (
        f" (which misses {missed} of its {len(counted)} points by more than "
        f"{MODEL_FAILS_PCT:g}% in throughput or a term: take this split as the model's, not as "
        "measured)"
    )


def _operators_section(
    operators: OperatorsRecord,
    analyses: list[Analysis],
    model: CostModel | None,
    bundled: bool = True,
    predictions: Sequence[Prediction] = (),
) -> list[str]:
    """Serving behaviour next to the operators' arithmetic intensity and in-process timings;
    ``bundled``: the run's server was the bundled tritonserver (its backends Python-based);
    ``predictions``: the cost model's, whose misses the split it quotes carries."""
    profile, timings = operators.profile, operators.in_process_us_per_execution
    first_load = [r.summary for a in analyses[:1] for r in a.reports]
    # one load's batches (the first), named with it: they differ at other loads (issue 36 audit)
    # onnxruntime's timings price onnxruntime's rows only: another engine's rows have their own
    # (issue 36 audit: openvino rows priced at onnxruntime's 84,005 µs per sample)
    mean_batches = {
        f"{s.variant.description} at `{s.load_key}`": s.mean_batch.median or 0.0
        for s in first_load
        if s.variant.engine == "onnxruntime"
    }
    others = sorted({s.variant.engine for s in first_load} - {"onnxruntime"})
    lines = ["## Operators and batching", ""]
    # which backend the serving path is: the bundled server runs ONNX models through tritonlab's
    # Python-based backend folders (issue 36 audit: "the Python backend" read as a mistake
    # where every config says `backend: "onnxruntime"`)
    path = (
        "Triton and the `onnxruntime` backend, in this bundled server a Python-based backend "
        "folder running tritonlab's adapter (no native C++ backend here)"
        if bundled
        else "Triton and the model's backend"
    )
    if model is not None:
        share1, share8 = model.serving_share(1), model.serving_share(8)
        lines += [
            (
                f"Which cost does batching spread? By the cost model above{_misses(predictions)}"
                ", one execution of "
                f"one request costs {model.execution_us(1):,.0f} µs, of which "
                f"{model.serving_us(1):,.0f} µs ({share1:.0%}) is the serving path ({path}, "
                "measured on the null model) and "
                f"{model.model_us(1):,.1f} µs the model itself (the in-process fit less the "
                "null model's own in-process call, which the serving path holds); at 8 requests "
                f"per execution the serving path is still {share8:.0%}. "
                + (
                    "Here the serving path dominates: what batching amortises is mostly "
                    "the serving path's fixed cost per execution, and the operators' "
                    "arithmetic intensity below barely matters for serving throughput. It "
                    "would matter where the model's own compute dominates an execution "
                    "(CNNs, encoders and larger models, or a GPU where per-execution "
                    "launches and weight reads are the fixed cost)."
                    if share1 >= 0.5
                    else "Here the model's own compute dominates an execution, so the "
                    "operators' character below decides what batching can gain: "
                    "weight-bound operators get cheaper per sample with batch size, "
                    "activation-bound ones barely do."
                )
            ),
            "",
        ]
    paragraph = operator_paragraph(profile, mean_batches, timings)
    if others and operators.engines_in_process_us_per_execution:
        paragraph += (
            f" These timings are onnxruntime's: the rows served by {' and '.join(others)} are "
            "not priced by them (their own in-process times are in the engines' table below)."
        )
    lines += [
        paragraph,
        "",
        "In-process onnxruntime (one thread, hot loop, no Triton) for the same model:",
        "",
        "| batch | µs per execution | µs per sample | FLOP/byte |",
        "|---|---|---|---|",
        *(
            f"| {batch} | {us:,.1f} | {us / batch:,.1f} | {profile.intensity(batch):.2f} |"
            for batch, us in sorted(timings.items())
        ),
        "",
    ]
    return lines + _engines_lines(operators, timings) + roofline_lines(operators, first_load)


def _engines_lines(operators: OperatorsRecord, reference: dict[int, float]) -> list[str]:
    """Each other engine's in-process times beside onnxruntime's, and the precision it used."""
    engines = operators.engines_in_process_us_per_execution or {}
    if not engines:
        return []
    used = operators.engines_precision_used or {}
    lines = [
        "The same model on the other engines the configurations use (in-process, one thread "
        "and one stream, hot loop, no Triton); the ratio is onnxruntime's time over theirs "
        "(above 1: faster than onnxruntime):",
        "",
        "| engine | precision used | "
        + " | ".join(f"batch {b} µs (ratio)" for b in sorted(reference))
        + " |",
        "|---|---|" + "---|" * len(reference),
    ]
    for engine, timings in sorted(engines.items()):
        cells = [
            f"{us:,.1f} ({ref / us:.2f}x)" if (us := timings.get(b, 0.0)) else "–"
            for b, ref in sorted(reference.items())
        ]
        lines.append(f"| {engine} | {used.get(engine, 'not recorded')} | {' | '.join(cells)} |")
    lines.append("")
    fell_back = [e for e, u in sorted(used.items()) if e.split(" ")[-1] not in (u, "f32")]
    if fell_back:
        lines += [
            "Asked for a reduced precision that this processor cannot run, "
            + ", ".join(f"{e} computed in {used[e]}" for e in fell_back)
            + " (OpenVINO's own report after compiling): those configurations run the same "
            "arithmetic as their f32 counterparts here, so any difference between them is "
            "noise, not precision.",
            "",
        ]
    return lines


def faults_section(faults: list[FaultRecord]) -> list[str]:
    """Every fault the run met (a server that died, a perf_analyzer that hung) and what was done."""
    if not faults:
        return []
    lines = [
        "## Faults and recoveries",
        "",
        "A server that dies is restarted on the same ports and the cell measured again; a cell "
        "that fails twice is given up on and the run goes on (`results/faults.json`).",
        "",
        "| when (UTC) | cell | what happened | action | server log |",
        "|---|---|---|---|---|",
    ]
    for f in faults:
        # the lines logged during the failed attempt (records from before 2026-12-03: the
        # log's last relevant lines)
        log = " / ".join(f.log_lines[-2:]).replace("|", "\\|") or "(nothing logged)"
        what = f.what.replace("|", "\\|")
        lines.append(f"| {f.utc} | {f.cell} | {what[:160]} | {f.action} | {log[:200]} |")
    return [*lines, ""]


def render_experiment_log(run: RunData) -> str:
    manifest, analyses, recommendations = run.manifest, run.analyses, run.recommendations
    operators, cost_model = run.operators, run.cost_model
    lines = [f"# Experiment log: {manifest.model.name} on Triton", ""]
    lines += _conditions(manifest, analyses, run.cells, run.trust) if analyses else []
    if run.infer_checks:
        lines += ["## Correctness check", ""]
        for check in run.infer_checks:
            served = "" if check.engine == "onnxruntime" else f" served by {check.engine}"
            relative = (
                f", {check.max_rel_diff:.2%} of the largest reference value"
                if check.max_rel_diff is not None and check.engine != "onnxruntime"
                else ""
            )
            lines.append(
                f"- {PROTOCOL_NAMES[check.protocol]}{served}: "
                + (
                    f"a sequence of {check.sequence_requests} requests, each of shape "
                    if check.sequence_requests
                    else "one request of shape "
                )
                + f"{check.input_shapes} -> {check.output_shapes}; {check_against(check)}"
                + (
                    f"{relative} (tolerance {check.tolerance_abs:g})."
                    if check.reference != SHAPES_ONLY
                    else "."
                )
            )
        lines.append("")
    lines += tune_section(
        run.tune,
        changed_step(manifest) if run.tune else None,
        bool(run.engine and run.engine.coload and run.engine.coload.co_loaded),
        run.summaries,
    )
    repository = manifest.model.repository or {}  # a tune of an ensemble: the step it moved
    step, model = repository.get("tuned"), repository.get("model")
    if run.tune is not None and step and step != model:
        lines += [
            f"The search moved step `{step}` of `{model}` (its instances, batching, max batch and "
            f"threads; the other steps ran as configured): {repository.get('tuned_reason', '')}.",
            "",
        ]
    if recommendations is not None:  # sweeps: the conclusion before the tables behind it
        lines += recommendations_section(recommendations, run.summaries)
    lines += trace_section(manifest.plan.loads, run.cells)
    for analysis in analyses:
        lines += [
            f"## Results: {analysis.load_key}",
            "",
            *_table(analysis),
            "",
            "Figures are medians over the repeats, with the range of the repeats (min–max) in "
            "brackets; verdicts in the notes carry the 95% interval of the change; "
            "latencies are client-side, queue and compute are per request in the server."
            + blocks_note(analysis, manifest.tune is not None)
            + drift_note(analysis, run.summaries)
            + _counters_note(manifest),
            "",
            *(
                line
                for r in analysis.reports
                for line in _variant_section(r, _step_line(manifest, analysis, r))
            ),
        ]
    if manifest.model.repository:
        labels = {v.name: v.description for v in manifest.plan.variants}
        kind = str(manifest.model.repository.get("kind", ""))
        lines += steps_section(run.cells, labels, kind)
    lines += engine_lines(
        run.engine,
        run.stopping,
        run.cells,
        run.manifest.cpu_split,
        run.manifest.sweep is not None,
        run.manifest.tune is not None,
        still_open(run, run.manifest.machine.cpu_affinity_count or 1),
    )
    lines += noise_floor_lines(
        run.noise_floors,
        run.trust,
        run.engine is not None,
        floor_reached(run.analyses),
        verdict_blocks(run.analyses),
    )
    lines += interference_lines(run.cells)
    lines += faults_section(run.faults)
    lines += nodes_section(manifest.nodes, run.cells)
    lines += efficiency_section(
        run.efficiencies, run.summaries, split_cores(run.manifest), run.trust
    )
    lines += cost_model_section(
        cost_model,
        run.predictions,
        run.unfitted_loads,
        graph=manifest.model.is_graph,
        stateful=manifest.plan.measurement.requests_per_sequence is not None,
    )
    if operators and analyses:
        bundled = manifest.server.source.startswith("bundled")
        lines += _operators_section(operators, analyses, cost_model, bundled, run.predictions)
    lines += method_lines(
        count_verdicts(analyses),
        run_stopping_note(run),
        robust_blocks(analyses),
        tune=run.tune is not None,
    )
    lines[-1:-1] = adaptive_lines(manifest, run.adaptive_rounds, run.stopping)
    lines += [
        "## Reproduce",
        "",
        "- Server command: `"
        + (shell_join(manifest.server.command) if manifest.server.command else "(remote)")
        + "`",
        f"- {PATHS_NOTE}",
        "- perf_analyzer command per cell: in `results/cells/*.json` (`perf.command`), raw "
        "console output and CSV in `benchmarks/`.",
        "- Rebuild this file from the stored results: `tritonlab report <this folder>`.",
        "",
    ]
    return "\n".join(lines)
