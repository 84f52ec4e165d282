"""Serving efficiency: served throughput over the in-process ceiling at the same parallelism.

The ceiling of a configuration with I instances x T intra-op threads is what I onnxruntime
sessions of T threads each deliver in this process, run back to back with no Triton, no network
and no client (``perf.in_process.in_process_ceiling``, measured after the run on the same
machine). Served / ceiling says how much of the compute the configuration buys reaches the
client; the remainder is the serving path, the client and the requests' gaps. The best ceiling
of any parallelism measured is the machine's in-process best, against which configurations of
different parallelism are compared. A batching configuration can exceed its batch-1 ceiling,
since batching makes each sample cheaper than the ceiling's batch-1 runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonlab.analysis.aggregate import VariantSummary, compare_figure
from tritonlab.analysis.frontier import at_reference_length
from tritonlab.analysis.summary import Summary
from tritonlab.perf.in_process import Ceiling


@dataclass(frozen=True)
class Efficiency:
    """One configuration at one load: served throughput against its ceiling and the best."""

    variant_name: str
    description: str
    load_key: str
    ceiling: Ceiling
    best: Ceiling
    served: Summary  # infer/s per repeat
    efficiency: Summary  # served / own ceiling, per repeat
    of_best: Summary  # served / the machine's best in-process figure, per repeat


def parse_ceilings(operators: dict[str, Any] | None) -> list[Ceiling]:
    return [Ceiling.from_dict(c) for c in (operators or {}).get("in_process_ceilings", [])]


def thread_speedup(ceilings: list[Ceiling]) -> dict[int, float]:
    """Intra-op threads -> in-process speedup of one instance over one thread (0: default)."""
    single = {
        c.threads: c.infer_per_s for c in ceilings if c.instances == 1 and c.engine == "onnxruntime"
    }
    base = single.get(1)
    if not base:
        return {}
    return {t: x / base for t, x in single.items() if t != 1 and x > 0}


def serving_efficiency(
    summaries: list[VariantSummary], ceilings: list[Ceiling]
) -> list[Efficiency]:
    """Each CPU configuration's efficiency at the client batch size its ceiling was taken at,
    and at the reference sequence length the ceilings were measured with."""
    if not ceilings:
        return []
    summaries = at_reference_length(summaries)
    best = max(ceilings, key=lambda c: c.infer_per_s)
    by_parallelism = {(c.instances, c.threads, c.engine): c for c in ceilings}
    out = []
    for s in summaries:
        v = s.variant
        ceiling = by_parallelism.get((v.instance_count, v.intra_op_threads or 0, v.engine))
        if ceiling is None or v.instance_kind != "KIND_CPU" or not ceiling.infer_per_s:
            continue
        if s.settings.batch_size != ceiling.batch_size and ceiling.batch_size != 1:
            continue
        served = s.throughput
        out.append(
            Efficiency(
                v.name,
                v.description,
                s.load_key,
                ceiling,
                best,
                served,
                Summary(tuple(x / ceiling.infer_per_s for x in served.values), served.rounds),
                Summary(tuple(x / best.infer_per_s for x in served.values), served.rounds),
            )
        )
    return out


def _ratio(summary: Summary) -> str:
    if summary.median is None:
        return "n/a"
    text = f"{summary.median:.2f}"
    if summary.range:
        text += f" ({summary.range[0]:.2f}–{summary.range[1]:.2f})"
    return text


def best_line(efficiencies: list[Efficiency], summaries: list[VariantSummary]) -> str:
    """Which configuration served the most, its efficiency, and whether its lead is clear."""
    by_key = {(s.variant.name, s.load_key): s for s in summaries}
    ranked = sorted(efficiencies, key=lambda e: -(e.served.median or 0.0))
    top = ranked[0]
    text = (
        f"Most served throughput: {top.description} at {top.load_key}, "
        f"{_ratio(top.efficiency)} of its own ceiling and {_ratio(top.of_best)} of the "
        "machine's best in-process figure"
    )
    rivals = [e for e in ranked[1:] if e.load_key == top.load_key]
    if rivals:
        first, second = (
            by_key.get((top.variant_name, top.load_key)),
            by_key.get((rivals[0].variant_name, rivals[0].load_key)),
        )
        if first is not None and second is not None:
            verdict = compare_figure("throughput", "throughput", second, first)
            text += f"; against the next, {rivals[0].description}, throughput {verdict.phrase()}"
    return text + "."


def efficiency_section(
    efficiencies: list[Efficiency], summaries: list[VariantSummary] | None = None
) -> list[str]:
    """The experiment log's table of efficiencies, with what the ceilings are."""
    if not efficiencies:
        return []
    best = efficiencies[0].best
    lines = [
        "## Serving efficiency",
        "",
        "Served throughput over the in-process ceiling: the same model run by as many "
        "onnxruntime sessions as the configuration has instances, each with its threads, back "
        "to back in one process with no Triton and no client, measured after the run on this "
        f"machine ({best.window_s:.0f} s per figure). The machine's best in-process figure is "
        f"{best.infer_per_s:,.1f} infer/s ({best.instances} x {_threads(best.threads)}). "
        "Ratios are the median over repeats (min–max); a batching configuration can exceed its "
        "batch-1 ceiling.",
        "",
        "| config | load | served infer/s | ceiling infer/s (instances x threads) "
        "| served / ceiling | served / machine best |",
        "|---|---|---|---|---|---|",
    ]
    for e in efficiencies:
        lines.append(
            f"| {e.description} | {e.load_key} | {e.served.text(1)} | "
            f"{e.ceiling.infer_per_s:,.1f} ({e.ceiling.instances} x "
            f"{_threads(e.ceiling.threads)}) | {_ratio(e.efficiency)} | {_ratio(e.of_best)} |"
        )
    lines.append("")
    if summaries:
        lines += [best_line(efficiencies, summaries), ""]
    return lines


def _threads(threads: int) -> str:
    return "default threads" if threads == 0 else f"{threads} thread{'s' if threads > 1 else ''}"
