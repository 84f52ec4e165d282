"""Render ``docs/experiment_log.md`` from stored results only.

The log opens with the measurement conditions (model, input shape, protocol, load, window,
stability, repeats, machine, versions, exact commands), then the seed's table with intervals
and verdicts, then the three layers per configuration, then the method. It is a pure function
of the files in the run folder, so ``tritonlab report`` rebuilds it byte for byte.
"""

from __future__ import annotations

from typing import Any

from tritonlab.analysis.explain import Analysis, VariantReport
from tritonlab.analysis.operators import (
    OperatorCost,
    OperatorProfile,
    operator_paragraph,
)
from tritonlab.analysis.recommend import Recommendations
from tritonlab.analysis.rules import (
    CPU_BOUND_SHARE,
    SATURATED_QUEUE_SHARE,
    TRAP_BATCH_SHARE_OF_IN_FLIGHT,
    TRAP_QUEUE_SHARE_OF_DELAY,
)
from tritonlab.analysis.verdicts import (
    MIN_EFFECT_PCT,
    SINGLE_RUN_EFFECT_PCT,
    separation_p_value,
)
from tritonlab.perf.settings import PerfSettings
from tritonlab.report.recommend_section import recommendations_section

_PROTOCOL_NAMES = {"grpc": "gRPC", "http": "HTTP"}


def _plain(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _load_line(settings: list[PerfSettings], load_points: int) -> str:
    """One load point in full; several as the values each dimension took."""
    if load_points == 1:
        s = settings[0]
        load = (
            f"concurrency {s.concurrency}"
            if s.concurrency
            else f"request rate {s.request_rate_per_s:g}/s (Poisson)"
        )
        mode = "async" if s.async_mode else "sync"
        return (
            f"- Load: {_PROTOCOL_NAMES[s.protocol]}, client batch size {s.batch_size}, {load}, "
            f"{mode} requests from perf_analyzer on the same machine."
        )
    protocols = sorted({_PROTOCOL_NAMES[s.protocol] for s in settings})
    batches = sorted({s.batch_size for s in settings})
    levels = sorted({s.concurrency for s in settings if s.concurrency})
    rates = sorted({s.request_rate_per_s for s in settings if s.request_rate_per_s})
    parts = [
        f"{load_points} load points: {' and '.join(protocols)}",
        f"client batch size {', '.join(str(b) for b in batches)}",
    ]
    if levels:
        parts.append(f"concurrency {', '.join(str(c) for c in levels)} (sync requests)")
    if rates:
        parts.append(
            f"open-loop Poisson rates from {rates[0]:,.0f} to {rates[-1]:,.0f} req/s "
            "(async requests, a fraction of each configuration's own peak)"
        )
    return "- Load: " + "; ".join(parts) + "; perf_analyzer on the same machine."


def _conditions(manifest: dict[str, Any], analyses: list[Analysis]) -> list[str]:
    plan = manifest["plan"]
    model = manifest["model"]
    machine = manifest["machine"]
    packages = manifest.get("packages", {})
    settings = [r.summary.settings for a in analyses for r in a.reports]
    inputs = ", ".join(
        f"`{i['name']}` {i['triton_dtype'].removeprefix('TYPE_')} "
        f"[{', '.join(['batch', *[str(d) for d in i['dims']]])}]"
        for i in model["inputs"]
    )
    measurement = plan["measurement"]
    server = manifest["server"]
    return [
        "## Conditions",
        "",
        f"- Model: `{model['name']}` from `{model['onnx_file']}` (opset {model['opset']}, "
        f"sha256 `{model['sha256'][:12]}`); inputs: {inputs}.",
        _load_line(settings, len(analyses)),
        f"- Measurement: perf_analyzer {measurement['measurement_interval_ms']} ms time windows, "
        f"stability threshold {measurement['stability_percentage']:g}%, at most "
        f"{measurement['max_trials']} windows; an unstable cell is retried with a window twice "
        f"as long. {plan['repeats']} repeat{'s' if plan['repeats'] != 1 else ''} per "
        "configuration, interleaved (every "
        "configuration once, then again), one configuration loaded at a time.",
        f"- Machine: {machine['cpu_model']}, {machine['cpu_affinity_count']} cores available, "
        f"{machine['memory_gib']} GiB, {machine['os']}"
        + (f", GPUs: {', '.join(machine['gpus'])}" if machine.get("gpus") else ", no GPU")
        + ".",
        f"- Software: Triton {server['version']} ({server['source']}), perf_analyzer "
        f"{manifest['perf_analyzer']['version']}, tritonclient "
        f"{packages.get('tritonclient', '?')}, "
        f"onnxruntime {packages.get('onnxruntime', '?')}, tritonlab "
        f"{manifest['tool']['version']} (commit {manifest['tool']['commit'] or 'unknown'}).",
        f"- Date (UTC): {manifest['created_utc']}.",
        "",
    ]


def _table(analysis: Analysis) -> list[str]:
    lines = [
        "| config | conc. | infer/s | avg µs | p95 µs | p99 µs | queue µs | compute infer µs "
        "| mean batch | server / client cores | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in analysis.reports:
        s = r.summary
        conc = (
            str(s.settings.concurrency)
            if s.settings.concurrency
            else (f"{s.settings.request_rate_per_s:g}/s")
        )
        lines.append(
            f"| {s.variant.description} | {conc} | {s.throughput.text()} | "
            f"{s.latency_avg.text()} | {s.latency_p95.text()} | {s.latency_p99.text()} | "
            f"{_plain(s.queue_us.median)} | {_plain(s.compute_infer_us.median)} | "
            f"{_plain(s.mean_batch.median, 1)} | {_plain(s.server_cores.median, 2)} / "
            f"{_plain(s.perf_analyzer_cores.median, 2)} | {r.note} |"
        )
    return lines


def _variant_section(r: VariantReport) -> list[str]:
    s = r.summary
    dist = ", ".join(f"{size}: {count}" for size, count in s.batch_distribution.items())
    trials = ", ".join(str(t) for t in s.trial_counts)
    return [
        f"### {s.variant.description}",
        "",
        f"- **Background.** {r.background}",
        f"- **Action.** {r.action}",
        f"- **Result and explanation.** {r.result}",
        "",
        f"Evidence: batch sizes Triton executed (size: executions, all repeats): {dist or 'n/a'}; "
        f"per request in the server: queue {_plain(s.queue_us.median)} µs, compute input "
        f"{_plain(s.compute_input_us.median)} µs, infer {_plain(s.compute_infer_us.median)} µs, "
        f"output {_plain(s.compute_output_us.median)} µs, overhead "
        f"{_plain(s.overhead_us.median)} µs; compute per inference "
        f"{_plain(s.compute_per_inference_us.median)} µs; Little's law ratio "
        f"{_plain(s.littles_law_ratio, 2)}; perf_analyzer windows per repeat: {trials} "
        f"({s.stable_count}/{len(s.cells)} stable). Raw output: "
        f"`benchmarks/{s.variant.name}/`; config: `models/{s.model_name}/config.pbtxt`.",
        "",
    ]


def method_lines(repeats: int = 3) -> list[str]:
    p = separation_p_value(repeats, repeats)
    return [
        "## Method",
        "",
        "- Each figure is the median over the repeats; brackets give the 95% Student-t "
        f"interval of the mean (wide with {repeats} repeats, by design: it shows how far one "
        "number could move on this machine).",
        f'- Verdicts ("higher", "lower", "no clear difference"): a difference is clear '
        "only when every repeat of one configuration lies beyond every repeat of the other "
        f"(complete separation; for {repeats} against {repeats} that happens by chance with "
        f"p = {p:.2g}, the exact rank-sum test) and the medians "
        f"differ by at least {MIN_EFFECT_PCT:g}%. With one repeat the medians must differ by "
        f"{SINGLE_RUN_EFFECT_PCT:g}%.",
        "- Queue, compute and batch sizes come from Triton's statistics extension (the "
        "difference between snapshots taken just before and just after each perf_analyzer "
        "run), not from estimates; CPU is the user + system time of the server's process tree "
        "and of perf_analyzer over the same run, divided by its wall time.",
        f"- Rules: queue-delay trap when queue >= {TRAP_QUEUE_SHARE_OF_DELAY:.0%} of the delay "
        f"and mean batch >= {TRAP_BATCH_SHARE_OF_IN_FLIGHT:.0%} of the inferences in flight, "
        "with fewer in flight than the batch target; saturated when queue >= "
        f"{SATURATED_QUEUE_SHARE:.0%} of server time; CPU-bound when server + client use >= "
        f"{CPU_BOUND_SHARE:.0%} of the cores; Little's law flags throughput x latency / "
        "concurrency outside 0.8–1.2.",
        "",
    ]


def _operators_section(operators: dict[str, Any], analyses: list[Analysis]) -> list[str]:
    """Serving behaviour next to the operators' arithmetic intensity and in-process timings."""
    profile = OperatorProfile(tuple(OperatorCost(**o) for o in operators["profile"]["operators"]))
    mean_batches = {
        r.summary.variant.description: r.summary.mean_batch.median or 0.0
        for a in analyses[:1]
        for r in a.reports
    }
    timings = {int(b): us for b, us in operators["in_process_us_per_execution"].items()}
    lines = [
        "## Operators and batching",
        "",
        operator_paragraph(profile, mean_batches, timings),
        "",
        "In-process onnxruntime (one thread, hot loop, no Triton) for the same model:",
        "",
        "| batch | µs per execution | µs per sample | FLOP/byte |",
        "|---|---|---|---|",
    ]
    for batch, us in sorted(timings.items()):
        lines.append(
            f"| {batch} | {us:,.1f} | {us / batch:,.1f} | {profile.intensity(batch):.2f} |"
        )
    lines += [
        "",
        "Compare the µs per sample with the compute per inference Triton reported above: the "
        "gap is what serving (the Python backend, copies, scheduling) adds to the bare run.",
        "",
    ]
    return lines


def render_experiment_log(
    manifest: dict[str, Any],
    analyses: list[Analysis],
    infer_checks: list[dict[str, Any]],
    operators: dict[str, Any] | None = None,
    recommendations: Recommendations | None = None,
) -> str:
    model_name = manifest["model"]["name"]
    lines = [f"# Experiment log: {model_name} on Triton", ""]
    lines += _conditions(manifest, analyses) if analyses else []
    if infer_checks:
        lines += ["## Correctness check", ""]
        for check in infer_checks:
            lines.append(
                f"- {_PROTOCOL_NAMES[check['protocol']]}: one request of shape "
                f"{check['input_shapes']} -> {check['output_shapes']}; max abs diff against "
                f"onnxruntime {check['max_abs_diff']:.3g} (tolerance {check['tolerance_abs']:g})."
            )
        lines.append("")
    if recommendations is not None:  # sweeps: the conclusion before the tables behind it
        summaries = [r.summary for a in analyses for r in a.reports]
        lines += recommendations_section(recommendations, summaries)
    for analysis in analyses:
        lines += [f"## Results: {analysis.load_key}", ""]
        lines += _table(analysis)
        lines += [
            "",
            "Figures are medians over the repeats, with the 95% interval in brackets; "
            "latencies are client-side, queue and compute are per request in the server.",
            "",
        ]
        lines += [ln for r in analysis.reports for ln in _variant_section(r)]
    if operators and analyses:
        lines += _operators_section(operators, analyses)
    lines += method_lines(int(manifest["plan"]["repeats"]))
    lines += [
        "## Reproduce",
        "",
        "- Server command: `" + " ".join(manifest["server"].get("command") or ["(remote)"]) + "`",
        "- perf_analyzer command per cell: in `results/cells/*.json` (`perf.command`), raw "
        "console output and CSV in `benchmarks/`.",
        "- Rebuild this file from the stored results: `tritonlab report <this folder>`.",
        "",
    ]
    return "\n".join(lines)
