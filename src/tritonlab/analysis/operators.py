"""The model's hot operators and their memory-access character (linking the "two Tritons").

For every MatMul, Gemm and Conv node, the graph (with ONNX shape inference) gives the FLOPs per
sample and the bytes it must move: weights once per execution, activations per sample. Their
ratio at batch size b, the arithmetic intensity, says whether the operator is bound by memory
bandwidth (few FLOPs per byte) or by compute. Weights are read once per execution however many
samples it carries, so batching raises intensity: this is the operator-level reason a batched
execution costs less per inference, and the figure the experiment log sets next to the batch
sizes Triton actually formed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tritonlab.analysis.fit_check import (
    check_fit,
    per_sample_text,
    points_around,
)
from tritonlab.perf.in_process import Ceiling
from tritonlab.perf.machine import MachineCeilings
from tritonlab.records import Record

_HEAVY = ("MatMul", "Gemm", "Conv")


@dataclass(frozen=True)
class OperatorCost:
    """One heavy operator: work per sample and data moved."""

    name: str
    op_type: str
    flops_per_sample: float
    weight_bytes: int
    activation_bytes_per_sample: int

    def intensity(self, batch: float) -> float:
        """FLOP per byte moved for one execution of ``batch`` samples."""
        moved = self.weight_bytes + batch * self.activation_bytes_per_sample
        return batch * self.flops_per_sample / moved if moved else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The operator's fields as JSON (FLOPs per sample, bytes)."""
        return asdict(self)


@dataclass(frozen=True)
class OperatorProfile:
    """The heavy operators of one model (per sample); the totals are derived from them."""

    operators: tuple[OperatorCost, ...]

    @property
    def flops_per_sample(self) -> float:
        """FLOPs per sample of all the heavy operators together."""
        return sum(o.flops_per_sample for o in self.operators)

    @property
    def weight_bytes(self) -> int:
        """Weight bytes of all the heavy operators together."""
        return sum(o.weight_bytes for o in self.operators)

    @property
    def activation_bytes_per_sample(self) -> int:
        """Activation bytes per sample of all the heavy operators together."""
        return sum(o.activation_bytes_per_sample for o in self.operators)

    def intensity(self, batch: float) -> float:
        """FLOP per byte moved by one execution of ``batch`` samples of the whole profile."""
        moved = self.weight_bytes + batch * self.activation_bytes_per_sample
        return batch * self.flops_per_sample / moved if moved else 0.0

    def hottest(self, count: int = 3) -> list[OperatorCost]:
        """The ``count`` operators with the most FLOPs per sample, most first."""
        return sorted(self.operators, key=lambda o: -o.flops_per_sample)[:count]

    def to_dict(self) -> dict[str, Any]:
        """The operators and their totals (FLOPs, bytes) as JSON."""
        return {
            "operators": [o.to_dict() for o in self.operators],
            "flops_per_sample": self.flops_per_sample,
            "weight_bytes": self.weight_bytes,
            "activation_bytes_per_sample": self.activation_bytes_per_sample,
        }


@dataclass(frozen=True)
class OperatorsRecord(Record):
    """``results/operators.json``: the heavy operators' profile, the in-process timings (µs per
    execution by batch size), the parallel ceilings and the roofline's per-operator times.

    Parts a run did not measure (older runs, no other engine, no roofline) are None and left
    out of the file, so older files dump back as they are stored.
    """

    profile: OperatorProfile
    in_process_us_per_execution: dict[int, float]
    # The empty model's in-process time: the serving-path cells contain it already.
    null_in_process_us_per_execution: dict[int, float] | None = None
    # "backend precision" -> batch size -> µs per execution, for every engine but onnxruntime.
    engines_in_process_us_per_execution: dict[str, dict[int, float]] | None = None
    # "openvino precision" -> the precision OpenVINO compiled in on this processor.
    engines_precision_used: dict[str, str] | None = None
    in_process_ceilings: tuple[Ceiling, ...] | None = None
    machine_ceilings: MachineCeilings | None = None
    # batch size -> operator name -> median µs per kernel run (onnxruntime's profiler).
    operator_us_per_execution: dict[int, dict[str, float]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as the file stores it: the profile with its totals, ceilings without an
        onnxruntime ``engine``, and parts not measured left out."""
        data = {k: v for k, v in super().to_dict().items() if v is not None}
        data["profile"] = self.profile.to_dict()
        if self.in_process_ceilings is not None:
            data["in_process_ceilings"] = [c.to_dict() for c in self.in_process_ceilings]
        return data


def _shape(value_info: Any) -> list[int] | None:
    dims = value_info.type.tensor_type.shape.dim
    if not dims:
        return None
    return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in dims]


def _elem_bytes(elem_type: int) -> int:
    import onnx

    return int(onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize)


def profile_operators(
    onnx_path: Path, input_shapes: dict[str, tuple[int, ...]] | None = None, batched: bool = True
) -> OperatorProfile:
    """Inspect the heavy operators of an ONNX model.

    ``input_shapes`` (non-batch dims, as sent) fixes dynamic dims such as a sequence length
    before shape inference; the batch dim counts as 1, so figures are per sample.
    """
    import onnx

    raw = onnx.load(str(onnx_path))
    for vi in raw.graph.input:
        sent = (input_shapes or {}).get(vi.name)
        if sent is None:
            continue
        full = (1, *sent) if batched else sent
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == len(full):
            for dim, size in zip(dims, full, strict=True):
                dim.Clear()
                dim.dim_value = int(size)
    model = onnx.shape_inference.infer_shapes(raw)
    graph = model.graph
    shapes: dict[str, tuple[list[int], int]] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        shape = _shape(vi)
        if shape is not None:
            shapes[vi.name] = (shape, _elem_bytes(vi.type.tensor_type.elem_type))
    weights = {
        init.name: (list(init.dims), _elem_bytes(init.data_type)) for init in graph.initializer
    }
    ops = []
    for node in graph.node:
        if node.op_type not in _HEAVY or len(node.input) < 2 or not node.output:
            continue
        known = {**shapes, **weights}
        a, b, out = known.get(node.input[0]), known.get(node.input[1]), shapes.get(node.output[0])
        if a is None or b is None or out is None:
            continue
        out_elems = math.prod(out[0][1:]) if len(out[0]) > 1 else math.prod(out[0])
        # Conv: each output element takes (input channels / groups x kernel area) multiply-adds
        reduce = math.prod(b[0][1:]) if node.op_type == "Conv" else a[0][-1]
        flops = 2.0 * out_elems * reduce
        weight_bytes = sum(
            math.prod(weights[n][0]) * weights[n][1] for n in node.input[1:] if n in weights
        )
        act_in = math.prod(a[0][1:]) * a[1] if node.input[0] not in weights else 0
        act_out = out_elems * out[1]
        ops.append(
            OperatorCost(
                node.name or node.output[0],
                node.op_type,
                flops,
                int(weight_bytes),
                int(act_in + act_out),
            )
        )
    return OperatorProfile(tuple(ops))


@dataclass(frozen=True)
class ExecutionCostFit:
    """In-process time per execution fitted as ``fixed_us + per_sample_us x batch``.

    Least squares over the measured batch sizes. The fixed part is what one execution costs
    whatever its size (reading the weights, the call itself); the per-sample part grows with the
    batch. Batching can only save the fixed part, which is why its share at batch 1 bounds what
    server-side batching can gain in compute.
    """

    fixed_us: float
    per_sample_us: float

    max_relative_error: float = 0.0

    @classmethod
    def fit(cls, us_per_execution: dict[int, float]) -> ExecutionCostFit | None:
        """Weighted least squares (weights 1/t², i.e. on relative error) over the batches.

        None with fewer than 2 batches timed. When at most one batch timed above zero (the
        times are what is left after the empty model's own time was taken off, and a model
        as small as the empty one leaves nothing), the model's compute is below what the
        timing resolves: the fit is zero, not missing (seen on the integration tests'
        two-input model, which timed faster in-process than the empty model)."""
        points = sorted((b, t) for b, t in us_per_execution.items() if t > 0)
        if len(points) < 2:
            return cls(0.0, 0.0, 0.0) if len(us_per_execution) >= 2 else None
        weights = [1.0 / (t * t) for _, t in points]
        total = sum(weights)
        mean_b = sum(w * b for w, (b, _) in zip(weights, points, strict=True)) / total
        mean_t = sum(w * t for w, (_, t) in zip(weights, points, strict=True)) / total
        var_b = sum(w * (b - mean_b) ** 2 for w, (b, _) in zip(weights, points, strict=True))
        cov = sum(
            w * (b - mean_b) * (t - mean_t) for w, (b, t) in zip(weights, points, strict=True)
        )
        slope = max(0.0, cov / var_b) if var_b else 0.0
        fixed = max(0.0, mean_t - slope * mean_b)
        worst = max(abs(fixed + slope * b - t) / t for b, t in points)
        return cls(fixed, slope, worst)

    def per_sample_at(self, batch: float) -> float:
        """Cost per sample (µs) of one execution at ``batch`` samples."""
        return self.fixed_us / batch + self.per_sample_us

    @property
    def fixed_share_at_batch_1(self) -> float:
        """The fixed cost's share (0–1) of one batch-1 execution."""
        total = self.fixed_us + self.per_sample_us
        return self.fixed_us / total if total else 0.0


def operator_paragraph(
    profile: OperatorProfile,
    mean_batches: dict[str, float],
    us_per_execution: dict[int, float] | None = None,
) -> str:
    """Tie the batch sizes Triton formed to the operators' bytes, intensity and timings."""
    if not profile.operators:
        return "The graph has no MatMul, Gemm or Conv operators to profile."
    hot = ", ".join(
        f"{o.op_type} `{o.name}` ({o.flops_per_sample / 1e6:.2f} MFLOP per sample, "
        f"{o.weight_bytes / 1e6:.3g} MB of weights)"
        for o in profile.hottest()
    )
    weights, acts = profile.weight_bytes, profile.activation_bytes_per_sample
    weight_share = weights / (weights + acts) if weights + acts else 0.0
    parts = [
        f"Hot operators: {hot}. Per sample the model does {profile.flops_per_sample / 1e6:.2f} "
        f"MFLOP; each execution reads {weights / 1e6:.3g} MB of weights once and moves "
        f"{acts / 1e3:.3g} KB of activations per sample, so at batch 1 weights are "
        f"{weight_share:.0%} of the bytes and the intensity is "
        f"{profile.intensity(1):.2f} FLOP/byte."
    ]
    if weight_share >= 0.5:
        parts.append(
            "Because the weights are read once per execution however many samples it carries, "
            f"batching raises the intensity (batch 8: {profile.intensity(8):.2f} FLOP/byte, "
            f"batch 64: {profile.intensity(64):.2f})."
        )
    else:
        parts.append(
            "Activations dominate the bytes, so batching barely raises the intensity "
            f"(batch 64: {profile.intensity(64):.2f} FLOP/byte); it can only amortise the fixed "
            "cost of each call."
        )
    fit = ExecutionCostFit.fit(us_per_execution or {})
    if fit is not None:
        parts.append(_fit_sentences(fit, profile, mean_batches, us_per_execution or {}))
    return " ".join(parts)


def _fit_sentences(
    fit: ExecutionCostFit,
    profile: OperatorProfile,
    mean_batches: dict[str, float],
    us_per_execution: dict[int, float],
) -> str:
    """The in-process line and the bound on batching its fixed part sets, where the line agrees
    with its points (``fit_check``); otherwise how far it misses and the measured points."""
    line = (
        f"Measured in-process, an execution costs {fit.fixed_us:.1f} µs fixed + "
        f"{fit.per_sample_us:.1f} µs per sample (fitted over the batch sizes below"
    )
    check = check_fit(fit.fixed_us, fit.per_sample_us, us_per_execution)
    if check is not None and not check.supports_bound(fit.fixed_share_at_batch_1):
        # the line misses its points by as much as the bound it would set: quote the points
        def at(batch: float) -> str:
            return "measured in-process (the whole call) " + per_sample_text(
                points_around(us_per_execution, batch)
            )

        one = at(1)
        text = (
            f"{line}; the line {check.bound_phrase(fit.fixed_share_at_batch_1)}, so its fixed "
            "part is not read as a bound on what batching can save in compute)."
        )
    else:

        def at(batch: float) -> str:
            return f"{fit.per_sample_at(batch):.1f} µs per sample"

        one = f"{fit.per_sample_at(1):.1f} µs at batch 1"
        text = (
            f"{line}, within {fit.max_relative_error:.0%} of each): the fixed part is "
            f"{fit.fixed_share_at_batch_1:.0%} of a batch-1 run, and that is all batching can "
            "save in compute."
        )
    batched = {k: v for k, v in mean_batches.items() if v and v > 1.05}
    if batched:
        listed = "; ".join(
            f"{name}: mean batch {b:.1f} -> {at(b)} ({profile.intensity(b):.2f} FLOP/byte)"
            for name, b in batched.items()
        )
        text += f" At the batches Triton formed ({listed}) against {one}."
    return text
