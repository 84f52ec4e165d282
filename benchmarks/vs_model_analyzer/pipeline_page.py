"""The page of the pipeline benchmark (``pipeline_compare.py``), rendered from its stored JSON
alone: the searches, Model Analyzer's pick model by model, and both picks re-measured by one
tool.

``remeasure.py`` measures each pick over the protocol its tool chose (Model Analyzer's
perf_analyzer over gRPC, tune's pick over whatever its search picked), so two rows at one
concurrency may differ in protocol too. The page states each row's protocol and calls a load
common only where the concurrency and the protocol both match; elsewhere it says that the rows
compare operating points, not configurations (issue 36 audit: "the common load is concurrency
8" beside a gRPC row and an HTTP row). Where it quotes tune's race verdict (its stop reason),
the verdict carries its caveats (``race_notes.py``): whether an A/A control was measured in the
tune, and the race's rounds added one at a time.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # remeasure, beside this file

from race_notes import quoted_race_caveats
from remeasure import median_range_text

ENSEMBLE = "pipeline"
PROTOCOL_NAMES = {"grpc": "gRPC", "http": "HTTP"}


def protocol_name(protocol: str | None) -> str:
    """'gRPC', 'HTTP', or 'protocol not stored'."""
    if not protocol:
        return "protocol not stored"
    return PROTOCOL_NAMES.get(protocol.lower(), protocol)


def row_protocol(data: dict[str, Any], row: dict[str, Any]) -> str | None:
    """The protocol a re-measured row was measured over: the row's own where stored, else its
    pick's (``remeasure.py`` measures each pick over the protocol in ``picks[]``)."""
    if row.get("protocol"):
        return str(row["protocol"])
    pick = next((p for p in data.get("picks") or [] if p.get("name") == row["pick"]), None)
    return None if pick is None else pick.get("protocol")


def picks_protocols_text(data: dict[str, Any]) -> str:
    """'each pick over its tool's protocol (Model Analyzer quick (ensemble): gRPC; tritonlab
    tune: HTTP)', or the one protocol every pick used."""
    picks = data.get("picks") or []
    if not picks:
        flags = (data.get("model_analyzer") or {}).get("perf_analyzer_flags") or {}
        return protocol_name(flags.get("protocol"))
    names = {protocol_name(p.get("protocol")) for p in picks}
    if len(names) == 1:
        return f"{names.pop()} for every pick"
    each = "; ".join(f"{p['tool']}: {protocol_name(p.get('protocol'))}" for p in picks)
    return f"each pick over its tool's protocol ({each})"


def load_sentence(data: dict[str, Any]) -> str:
    """What the rows at the common concurrency share: the same concurrency and protocol (a
    common load), or the concurrency only (operating points, not configurations)."""
    common = data["common_concurrency"]
    by_protocol: dict[str, list[str]] = {}
    for row in data["remeasured"]:
        if row["concurrency"] == common:
            by_protocol.setdefault(protocol_name(row_protocol(data, row)), []).append(row["pick"])
    if len(by_protocol) <= 1:
        over = "".join(f" over {name}" for name in by_protocol)
        return (
            f"the common load is concurrency {common}{over} (every pick at the same concurrency "
            "and protocol)."
        )
    each = "; ".join(f"{', '.join(picks)} over {name}" for name, picks in by_protocol.items())
    shared = [f"{' and '.join(p)} ({name})" for name, p in by_protocol.items() if len(p) > 1]
    text = (
        f"each pick is measured over the protocol its tool chose ({each}), so the rows at "
        f"concurrency {common} share the concurrency but not the protocol: "
        + (
            f"a load common to the picks in concurrency and protocol is there only for "
            f"{'; '.join(shared)}; between the others"
            if shared
            else "no load is common to them, and"
        )
        + " the rows compare operating points (configuration and protocol), not configurations."
    )
    reason = (data.get("tune") or {}).get("stop_reason") or ""
    named = [p for p in by_protocol if p in PROTOCOL_NAMES.values()]
    if len(named) > 1 and all(p.lower() in reason.lower() for p in named):
        text += f' tune\'s search weighed these protocols; its stop reason: "{reason}".'
        if caveats := quoted_race_caveats(data.get("tune") or {}):
            text += f" {caveats}"
    return text


def _model_text(config: dict[str, Any]) -> str:
    batching = "batching" if config.get("dynamic_batching") else "no batching"
    count, batch = config.get("instance_count"), config.get("max_batch_size")
    return f"{count} inst, max batch {batch}, {batching}"


def ma_pick_text(ma: dict[str, Any]) -> str:
    best = ma.get("best_throughput")
    if not best:
        return "none"
    parts = [f"{name}: {_model_text(c)}" for name, c in best["composing"].items()]
    return "; ".join(parts) + f"; c{best['concurrency']}"


def tune_pick_text(tune: dict[str, Any]) -> str:
    pick = tune.get("pick")
    if not pick:
        return "none"
    return f"{pick['description']} (the tuned step); c{pick['concurrency']}"


def _reported(figures: dict[str, Any] | None) -> str:
    if not figures or figures.get("throughput_infer_per_s") is None:
        return "n/a"
    p99 = figures.get("p99_latency_us")
    p99_text = "n/a" if p99 is None else f"{p99 / 1000:.2f} ms"
    return f"{figures['throughput_infer_per_s']:,.0f} infer/s, p99 {p99_text}"


def markdown(data: dict[str, Any]) -> str:
    m, v = data["machine"], data["versions"]
    ma, tune = data["model_analyzer"], data["tune"]
    p = data["pipeline"]
    lines = [
        "# Model Analyzer's ensemble search and tritonlab tune on the built-in pipeline",
        "",
        f"Measured {data['date_utc']} UTC on {m['cpu']} ({m['cores']} cores, no GPU)"
        + (f" at commit {data['commit']}" if data.get("commit") else "")
        + f": tritonserver {v['tritonserver'] or 'n/a'} (nvidia-pytriton "
        f"{v['nvidia-pytriton']}) and perf_analyzer {v['perf_analyzer'] or 'n/a'} for both "
        f"tools, Model Analyzer {v['triton-model-analyzer'] or 'n/a'}, tritonlab "
        f"{v['tritonlab']}, onnxruntime {v['onnxruntime']}, torch {v['torch']}. The pipeline: "
        f"`preprocess` (Python) -> `cnn` ({p['cnn']}, {p['cnn_pixels']}x{p['cnn_pixels']}, "
        "tritonlab's Python-based onnxruntime backend) -> `postprocess` (Python, top "
        f"{p['top_k']}), chained by the ensemble `pipeline`; frames {p['image_hw'][0]}x"
        f"{p['image_hw'][1]} uint8, batch 1, {picks_protocols_text(data)}. Command: "
        "`make ma-pipeline-bench` "
        f"(`benchmarks/vs_model_analyzer/pipeline_compare.py`); `$WORK` below is its work "
        f"folder, `{data.get('work', 'runs/pipeline_vs_model_analyzer')}`.",
        "",
        "## The searches",
        "",
        "| tool | exit status | wall s | configurations | perf_analyzer runs / cells "
        "| its pick (throughput) | as it reported |",
        "|---|---|---|---|---|---|---|",
    ]
    bounds = ma.get("search_bounds") or {}
    lines.append(
        f"| Model Analyzer quick (ensemble; at most {bounds.get('max_instances', '?')} "
        f"instances, max batch {bounds.get('max_batch', '?')}, concurrency "
        f"{bounds.get('max_concurrency', '?')}) | {ma.get('exit_code')} | "
        f"{ma.get('wall_s', 0):.0f} | {ma.get('num_configs', 'n/a')} | "
        f"{ma.get('num_perf_analyzer_runs', 'n/a')} | {ma_pick_text(ma)} | "
        f"{_reported(ma.get('best_throughput'))} |"
    )
    lines.append(
        f"| tritonlab tune (time budget {data['tune_time_budget_s']:.0f} s) | "
        f"{tune['exit_code']} | {tune['wall_s']:.0f} | {tune.get('configurations', 'n/a')} | "
        f"{tune.get('cells_measured', 'n/a')} | "
        + (tune_pick_text(tune) if tune.get("ok") else tune.get("error", "failed"))
        + f" | {_reported(tune.get('pick'))} |"
    )
    closing = ma.get("closing_log_lines") or []
    if closing:
        lines += ["", "How Model Analyzer's log ends:", "", "```", *closing, "```"]
    best = ma.get("best_throughput")
    if best:
        lines += [
            "",
            "## Model Analyzer's pick, model by model",
            "",
            f"Its best throughput: `{best['config']}` at concurrency {best['concurrency']} "
            f"(the repository with these configs: `$WORK/ensemble_{p['cnn']}/picked_repository/`"
            ").",
            "",
            "| model | instances | kind | max batch | dynamic batching |",
            "|---|---|---|---|---|",
        ]
        for name, c in best["composing"].items():
            lines.append(
                f"| {name} | {c['instance_count']} | {c['instance_kind']} | "
                f"{c['max_batch_size']} | {'on' if c['dynamic_batching'] else 'off'} |"
            )
        picked = data.get("model_analyzer_pick_configs") or {}
        if "ensemble_max_batch_size" in picked:
            lines.append(
                f"| {ENSEMBLE} (ensemble) | — | — | {picked['ensemble_max_batch_size']} | — |"
            )
        lines += [
            "",
            "Every model's `config.pbtxt` as Model Analyzer generated it is in the JSON "
            "(`model_analyzer_pick_configs`).",
        ]
    lines += ["", f"## Both picks re-measured by one tool ({data['rounds']} shuffled rounds)", ""]
    if data["remeasured"]:
        lines += [
            "The block engine (tritonlab's cell runner, perf_analyzer cells) on one server with "
            "every pick loaded under its own prefix; median (min–max) over the rounds. "
            '"own" is the concurrency the tool chose; ' + load_sentence(data),
            "",
            "| pick | protocol | load | rounds | infer/s | p99 ms |",
            "|---|---|---|---|---|---|",
        ]
        checks = [k for k in ("aa_control", "interference", "trust") if k in data["remeasured"][0]]
        note = (
            ""
            if checks
            else "Note: the re-measurement stored no A/A control and no interference record: "
            "nothing checked its noise, so a difference between the ranges is the measured "
            "one, not one a control bounds."
        )  # a doubt of the run travels with its figures (issue 36 audit)
        for row in data["remeasured"]:
            load = f"c{row['concurrency']}" + (" (own)" if row["own_load"] else "")
            lines.append(
                f"| {row['pick']} | {protocol_name(row_protocol(data, row))} | {load} | "
                f"{row['rounds']} | "
                f"{median_range_text(row['throughput_infer_per_s'])} | "
                f"{median_range_text(row['p99_us'], 1000, 2)} |"
            )
        if note:
            lines += ["", note]
    else:
        lines.append(f"Not re-measured: {data.get('remeasure_note', 'no pick to measure')}.")
    failures = data.get("failures") or []
    if failures:
        lines += ["", "## What failed", ""]
        for failure in failures:
            lines += [
                f"### {failure['what']}",
                "",
                f"Command (exit status {failure['exit_code']}):",
                "",
                "```",
                shlex.join(failure["command"]),
                "```",
                "",
                "Decisive lines:",
                "",
                "```",
                *failure["lines"],
                "```",
                "",
                failure["why"],
                "",
            ]
    lines += ["", "## Notes", ""]
    lines += [f"- {note}" for note in data.get("notes", [])]
    lines.append("")
    return "\n".join(lines)
