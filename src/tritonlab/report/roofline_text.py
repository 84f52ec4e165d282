"""The experiment log's roofline paragraph and table: which of this machine's ceilings binds
each hot operator at each batch size, how far below it the operator runs, and where the served
executions sit (the points themselves: ``explanation.roofline``)."""

from __future__ import annotations

from tritonlab.explanation.roofline import (
    RooflinePoint,
    ceilings_of,
    operator_points,
    served_points,
)
from tritonlab.perf.machine import MachineCeilings
from tritonlab.perf.operator_profile import OperatorsRecord
from tritonlab.stats.aggregate import VariantSummary


def _over_ceiling_note(ops: list[RooflinePoint], machine: MachineCeilings) -> list[str]:
    over = [p for p in ops if p.share_of_ceiling > 1.0]
    if not over:
        return []
    cached = [
        p for p in over if p.binding == "memory bandwidth" and machine.fits_cache(p.bytes_moved)
    ]
    return [
        f"{len(over)} operator point{'' if len(over) == 1 else 's'} "
        f"{'runs' if len(over) == 1 else 'run'} above the ceiling that should bind "
        f"{'it' if len(over) == 1 else 'them'}. "
        + (
            f"{len(cached)} of them {'is' if len(cached) == 1 else 'are'} bandwidth-bound "
            "by the arithmetic but move only "
            f"{max(p.bytes_moved for p in cached) / 1e6:.2f} MB or less per execution, "
            f"within this processor's {machine.last_level_cache_bytes >> 20} MiB "
            "last-level cache: in a hot loop their weights stay cached, so the DRAM "
            "bandwidth measured on 128 MiB arrays is not what limits them (a cold "
            "execution, or one behind another model's, would be). "
            if cached
            else ""
        )
        + "A compute-bound point above the GEMM line means this operator's kernel beat "
        "the square MatMuls the ceiling was taken from (the ceiling is a best of 7 runs "
        "on a shared machine, not a hardware peak).",
        "",
    ]


def _by_batch_sentence(ops: list[RooflinePoint]) -> list[str]:
    by_batch: dict[float, list[RooflinePoint]] = {}
    for p in ops:
        by_batch.setdefault(p.batch, []).append(p)
    sentences = []
    for batch, points in sorted(by_batch.items()):
        memory = [p for p in points if p.binding == "memory bandwidth"]
        shares = sorted(p.share_of_ceiling for p in points)
        sentences.append(
            f"at batch {batch:g}, {len(memory)} of {len(points)} heavy operators sit below the "
            f"ridge (bandwidth binds) and the rest above it (compute binds); they run at "
            f"{shares[0]:.0%}–{shares[-1]:.0%} of the ceiling that binds them"
        )
    return ["Across every profiled operator: " + "; ".join(sentences) + ".", ""]


def _in_all(p: RooflinePoint, summaries: list[VariantSummary], load_key: str, flops: float) -> str:
    """', 127.3 GFLOP/s in all (2 instances ...)': what the server delivered together
    (throughput x FLOPs per sample), where it ran several instances, so one execution's rate
    is not the server's (issue 36 audit: "38% of the ceiling" read as a
    kernel at half speed where two instances shared one core and delivered as much as one)."""
    first = load_key or (summaries[0].load_key if summaries else "")  # served_points' load
    s = next(
        (x for x in summaries if x.variant.description == p.name and x.load_key == first),
        None,
    )
    if s is None or s.variant.instance_count <= 1 or not s.throughput.median:
        return ""
    total = s.throughput.median * flops / 1e9
    n, c, batch = s.variant.instance_count, s.settings.concurrency, s.mean_batch.median
    if c and batch and batch >= 0.95 * c / max(1, s.settings.batch_size):
        # every batch held every request in flight: the instances took turns, never ran at
        # once (issue 36 audit: "executions overlapped" said of batches of 8 at concurrency 8)
        return (
            f"; its {n} instances took turns (every batch held all {c} requests in flight), so "
            f"the server delivered {total:.2f} GFLOP/s in all (throughput x FLOPs per sample)"
        )
    return (
        f"; with {n} instances one execution's rate is not the server's: together they "
        f"delivered {total:.2f} GFLOP/s (throughput x FLOPs per sample)"
    )


def _served_sentence(
    served: list[RooflinePoint],
    load_key: str = "",
    summaries: list[VariantSummary] | None = None,
    flops: float = 0.0,
) -> list[str]:
    if not served:
        return []
    at = (
        f" at load `{load_key}` (the log's first load point: the mean batch, and so these "
        "figures, differ at other loads)"
        if load_key
        else ""
    )
    listed = "; ".join(
        f"{p.name}: mean batch {p.batch:.1f}, {p.intensity_flop_per_byte:.2f} FLOP/byte, "
        f"{p.achieved_flop_per_s / 1e9:.2f} GFLOP/s ({p.share_of_ceiling:.0%} of the "
        f"{p.binding} ceiling{_in_all(p, summaries or [], load_key, flops)})"
        for p in served
    )
    return [
        f"Where the served executions sit{at} (the whole model at the mean batch Triton formed, "
        "its FLOPs over Triton's compute time per execution, which includes the serving "
        f"path): {listed}.",
        "",
    ]


def roofline_lines(operators: OperatorsRecord | None, summaries: list[VariantSummary]) -> list[str]:
    """The log's roofline paragraph and table: which ceiling binds each hot operator at each
    batch size, and how far below it the operator runs (markdown lines; [] without ceilings)."""
    machine = ceilings_of(operators)
    if operators is None or machine is None:
        return []
    ops = operator_points(operators)
    lines = [
        "### Roofline: the hot operators against this machine's ceilings",
        "",
        f"Ceilings of this machine for one thread ({machine.cpu}, measured "
        f"{machine.measured_utc} with numpy {machine.libraries.get('numpy', '?')} and "
        f"onnxruntime {machine.libraries.get('onnxruntime', '?')}; `tritonlab.perf.machine`): "
        f"memory bandwidth {machine.bandwidth_bytes_per_s / 1e9:.1f} GB/s (the faster of a "
        f"two-pass triad, {machine.triad_bytes_per_s / 1e9:.1f} GB/s, and a copy, "
        f"{machine.copy_bytes_per_s / 1e9:.1f} GB/s, on {machine.bandwidth_array_bytes >> 20} "
        f"MiB arrays), GEMM {machine.gemm_flop_per_s / 1e9:.1f} GFLOP/s (the fastest float32 "
        f"square MatMul in onnxruntime, {machine.gemm_size}³). They meet at "
        f"{machine.ridge_flop_per_byte:.2f} FLOP/byte: an operator below that intensity is "
        "bound by memory bandwidth, above it by compute. Operator times are onnxruntime's own "
        "kernel times (its profiler, one thread, the median of 3 runs); the plot is "
        "`plots/roofline.png`.",
        "",
    ]
    if not ops:
        return [*lines, "No operator timings were recorded for this run.", ""]
    hot = {o.name for o in operators.profile.hottest(3)}
    lines += [
        "| operator | batch | FLOP/byte | achieved GFLOP/s | binding ceiling | attainable "
        "GFLOP/s | share of it |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {p.kind} `{p.name}` | {p.batch:g} | {p.intensity_flop_per_byte:.2f} | "
            f"{p.achieved_flop_per_s / 1e9:.2f} | {p.binding} | "
            f"{p.attainable_flop_per_s / 1e9:.2f} | {p.share_of_ceiling:.0%} |"
            for p in ops
            if p.name in hot
        ),
        "",
    ]
    lines += _over_ceiling_note(ops, machine)
    lines += _by_batch_sentence(ops)
    loads = {x.load_key for x in summaries}
    load_key = next(iter(loads)) if len(loads) == 1 else ""
    served = served_points(operators, summaries)
    flops = operators.profile.flops_per_sample
    return lines + _served_sentence(served, load_key, summaries, flops)
