"""The roofline: where the model's hot operators, and the served configurations' executions,
sit against this machine's measured ceilings (memory bandwidth and GEMM rate, one thread).

An operator at batch ``b`` does ``b · flops_per_sample`` FLOP and moves its weights once plus
``b`` samples of activations; its achieved rate is those FLOPs over its own kernel time
(``perf.op_timing``), its attainable rate ``min(GEMM rate, bandwidth × intensity)``. A served
configuration is placed by its mean batch and Triton's compute time per execution, which
includes the serving path: the gap below the operators is what serving costs at that batch.
The log's paragraph and table are built in ``report.roofline_text``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonlab.perf.machine import MachineCeilings
from tritonlab.perf.operator_profile import OperatorCost, OperatorProfile, OperatorsRecord
from tritonlab.stats.aggregate import VariantSummary


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
        """Achieved over attainable FLOP/s (1.0: on the binding ceiling); 0 without a ceiling."""
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
    return RooflinePoint(
        name,
        kind,
        batch,
        intensity,
        flop_per_s,
        m.attainable_flop_per_s(intensity),
        m.binding(intensity),
        cost.weight_bytes + batch * cost.activation_bytes_per_sample,
    )


def ceilings_of(operators: OperatorsRecord | None) -> MachineCeilings | None:
    """This machine's measured ceilings from ``operators.json``; None when not measured."""
    return operators.machine_ceilings if operators else None


def operator_points(operators: OperatorsRecord) -> list[RooflinePoint]:
    """Each profiled heavy operator at each timed batch size (empty without ceilings)."""
    machine = operators.machine_ceilings
    timings = operators.operator_us_per_execution or {}
    if machine is None or not timings:
        return []
    points = []
    for op in operators.profile.operators:
        for batch, by_name in sorted(timings.items()):
            us = by_name.get(op.name)
            if not us or not op.flops_per_sample:
                continue
            flop_per_s = batch * op.flops_per_sample / (us * 1e-6)
            points.append(_point(op.name, op.op_type, batch, op, flop_per_s, machine))
    return points


def served_points(
    operators: OperatorsRecord, summaries: list[VariantSummary]
) -> list[RooflinePoint]:
    """Each served configuration's executions (first load point only: one point each)."""
    machine, profile = operators.machine_ceilings, operators.profile
    if machine is None or not profile.flops_per_sample:  # no MatMul, Gemm or Conv: no FLOPs
        return []
    first_load = summaries[0].load_key if summaries else None
    points = []
    for s in summaries:
        batch, execution_us = s.mean_batch.median, s.execution_us.median
        if s.load_key != first_load or not batch or not execution_us:
            continue
        flop_per_s = batch * profile.flops_per_sample / (execution_us * 1e-6)
        points.append(_point(s.variant.description, "served", batch, profile, flop_per_s, machine))
    return points
