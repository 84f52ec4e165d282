"""The roofline: where the model's hot operators, and the served configurations' executions,
sit against this machine's measured ceilings (memory bandwidth and GEMM rate, one thread).

An operator at batch ``b`` does ``b · flops_per_sample`` FLOP and moves its weights once plus
``b`` samples of activations (``analysis.operators``); its arithmetic intensity is the ratio. Its
achieved rate is those FLOPs over its own kernel time from onnxruntime's profiler
(``perf.op_timing``). The attainable rate at that intensity is ``min(GEMM rate, bandwidth ×
intensity)``; the lower of the two is the ceiling that binds, and achieved over attainable says
how far below it the operator runs.

A served configuration's execution is placed by its mean batch (samples per execution, from
Triton's statistics): the whole model's intensity at that batch, and the model's FLOPs per
execution over Triton's measured compute time per execution. That time includes the serving
path (the Python backend, its adapter, the copies), so the point sits below the operators'
own: the vertical gap is what serving costs at that batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonlab.analysis.aggregate import VariantSummary
from tritonlab.analysis.operators import OperatorCost, OperatorProfile
from tritonlab.perf.machine import MachineCeilings


@dataclass(frozen=True)
class RooflinePoint:
    """One operator (or one served configuration) at one batch size."""

    name: str
    kind: str  # the operator type, or "served" for a configuration's executions
    batch: float
    intensity_flop_per_byte: float
    achieved_flop_per_s: float
    attainable_flop_per_s: float
    binding: str  # "memory bandwidth" or "compute (GEMM)"
    bytes_moved: float = 0.0  # per execution, by the graph arithmetic

    @property
    def share_of_ceiling(self) -> float:
        return (
            self.achieved_flop_per_s / self.attainable_flop_per_s
            if self.attainable_flop_per_s
            else 0.0
        )


def _point(
    name: str,
    kind: str,
    batch: float,
    cost: OperatorCost | OperatorProfile,
    flop_per_s: float,
    m: MachineCeilings,
) -> RooflinePoint:
    intensity = cost.intensity(batch)
    moved = cost.weight_bytes + batch * cost.activation_bytes_per_sample
    return RooflinePoint(
        name,
        kind,
        batch,
        intensity,
        flop_per_s,
        m.attainable_flop_per_s(intensity),
        m.binding(intensity),
        moved,
    )


def profile_of(operators: dict[str, Any]) -> OperatorProfile:
    return OperatorProfile(tuple(OperatorCost(**o) for o in operators["profile"]["operators"]))


def ceilings_of(operators: dict[str, Any] | None) -> MachineCeilings | None:
    data = (operators or {}).get("machine_ceilings")
    return MachineCeilings.from_dict(data) if data else None


def operator_points(operators: dict[str, Any]) -> list[RooflinePoint]:
    """Each profiled heavy operator at each timed batch size (empty without ceilings)."""
    machine = ceilings_of(operators)
    timings = operators.get("operator_us_per_execution") or {}
    if machine is None or not timings:
        return []
    points = []
    for op in profile_of(operators).operators:
        for batch_text, by_name in sorted(timings.items(), key=lambda kv: int(kv[0])):
            us = by_name.get(op.name)
            batch = int(batch_text)
            if not us or not op.flops_per_sample:
                continue
            flop_per_s = batch * op.flops_per_sample / (us * 1e-6)
            points.append(_point(op.name, op.op_type, batch, op, flop_per_s, machine))
    return points


def served_points(
    operators: dict[str, Any], summaries: list[VariantSummary]
) -> list[RooflinePoint]:
    """Each served configuration's executions (first load point only: one point each)."""
    machine = ceilings_of(operators)
    if machine is None:
        return []
    profile = profile_of(operators)
    if not profile.flops_per_sample:  # no MatMul, Gemm or Conv: no FLOPs to place
        return []
    first_load = summaries[0].load_key if summaries else None
    points = []
    for s in summaries:
        batch, execution_us = s.mean_batch.median, s.execution_us.median
        if s.load_key != first_load or not batch or not execution_us:
            continue
        flop_per_s = batch * profile.flops_per_sample / (execution_us * 1e-6)
        points.append(
            _point(
                s.variant.description,
                "served",
                batch,
                profile,
                flop_per_s,
                machine,
            )
        )
    return points


def roofline_lines(operators: dict[str, Any] | None, summaries: list[VariantSummary]) -> list[str]:
    """The log's roofline paragraph and table: which ceiling binds each hot operator at each
    batch size, and how far below it the operator runs."""
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
    lines += [
        "| operator | batch | FLOP/byte | achieved GFLOP/s | binding ceiling | attainable "
        "GFLOP/s | share of it |",
        "|---|---|---|---|---|---|---|",
    ]
    hot = {o.name for o in profile_of(operators).hottest(3)}
    shown = [p for p in ops if p.name in hot]
    for p in shown:
        lines.append(
            f"| {p.kind} `{p.name}` | {p.batch:g} | {p.intensity_flop_per_byte:.2f} | "
            f"{p.achieved_flop_per_s / 1e9:.2f} | {p.binding} | "
            f"{p.attainable_flop_per_s / 1e9:.2f} | {p.share_of_ceiling:.0%} |"
        )
    lines.append("")
    over = [p for p in ops if p.share_of_ceiling > 1.0]
    if over:
        cached = [
            p for p in over if p.binding == "memory bandwidth" and machine.fits_cache(p.bytes_moved)
        ]
        lines += [
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
    lines += ["Across every profiled operator: " + "; ".join(sentences) + ".", ""]
    served = served_points(operators, summaries)
    if served:
        listed = "; ".join(
            f"{p.name}: mean batch {p.batch:.1f}, {p.intensity_flop_per_byte:.2f} FLOP/byte, "
            f"{p.achieved_flop_per_s / 1e9:.2f} GFLOP/s ({p.share_of_ceiling:.0%} of the "
            f"{p.binding} ceiling)"
            for p in served
        )
        lines += [
            "Where the served executions sit (the whole model at the mean batch Triton formed, "
            "its FLOPs over Triton's compute time per execution, which includes the serving "
            f"path): {listed}.",
            "",
        ]
    return lines
