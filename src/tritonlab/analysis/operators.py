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

# A CPU core does on the order of 10-50 FLOP per byte of DRAM bandwidth; below ~10 an operator
# is waiting on memory. The threshold only labels; the numbers are reported as they are.
MEMORY_BOUND_BELOW_FLOP_PER_BYTE = 10.0
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
        return asdict(self)


@dataclass(frozen=True)
class OperatorProfile:
    operators: tuple[OperatorCost, ...]

    @property
    def flops_per_sample(self) -> float:
        return sum(o.flops_per_sample for o in self.operators)

    @property
    def weight_bytes(self) -> int:
        return sum(o.weight_bytes for o in self.operators)

    @property
    def activation_bytes_per_sample(self) -> int:
        return sum(o.activation_bytes_per_sample for o in self.operators)

    def intensity(self, batch: float) -> float:
        moved = self.weight_bytes + batch * self.activation_bytes_per_sample
        return batch * self.flops_per_sample / moved if moved else 0.0

    def hottest(self, count: int = 3) -> list[OperatorCost]:
        return sorted(self.operators, key=lambda o: -o.flops_per_sample)[:count]

    def to_dict(self) -> dict[str, Any]:
        return {
            "operators": [o.to_dict() for o in self.operators],
            "flops_per_sample": self.flops_per_sample,
            "weight_bytes": self.weight_bytes,
            "activation_bytes_per_sample": self.activation_bytes_per_sample,
        }


def _shape(value_info: Any) -> list[int] | None:
    dims = value_info.type.tensor_type.shape.dim
    if not dims:
        return None
    return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in dims]


def _elem_bytes(elem_type: int) -> int:
    import onnx

    return int(onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize)


def profile_operators(onnx_path: Path) -> OperatorProfile:
    """Inspect the heavy operators of an ONNX model (symbolic batch dims count as 1)."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(str(onnx_path)))
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
class Roofline:
    """This machine's ridge point, estimated from the model's own in-process timings.

    Bandwidth: weight bytes / time at the smallest batch (all weight reads, an upper bound on
    what the run needed). Compute rate: FLOPs / time at the largest batch. Their ratio is the
    intensity above which the operators are limited by arithmetic rather than by memory.
    """

    bandwidth_gb_per_s: float
    compute_gflop_per_s: float

    @property
    def ridge_flop_per_byte(self) -> float:
        return self.compute_gflop_per_s / self.bandwidth_gb_per_s

    @classmethod
    def from_timings(
        cls, profile: OperatorProfile, us_per_execution: dict[int, float]
    ) -> Roofline | None:
        timed = {b: t for b, t in us_per_execution.items() if t > 0}
        if len(timed) < 2 or not profile.weight_bytes:
            return None
        small, large = min(timed), max(timed)
        bandwidth = profile.weight_bytes / (timed[small] * 1e-6) / 1e9
        compute = profile.flops_per_sample * large / (timed[large] * 1e-6) / 1e9
        return cls(bandwidth, compute)


def intensity_sentence(
    profile: OperatorProfile, mean_batches: dict[str, float], roofline: Roofline | None = None
) -> str:
    """One paragraph tying the batch sizes Triton formed to the operators' intensity."""
    if not profile.operators:
        return "The graph has no MatMul, Gemm or Conv operators to profile."
    ridge = roofline.ridge_flop_per_byte if roofline else MEMORY_BOUND_BELOW_FLOP_PER_BYTE
    at_one = profile.intensity(1.0)
    bound = "memory-bound" if at_one < ridge else "compute-bound"
    hot = ", ".join(
        f"{o.op_type} `{o.name}` ({o.flops_per_sample / 1e6:.2f} MFLOP, "
        f"{o.weight_bytes / 1e6:.2f} MB of weights)"
        for o in profile.hottest()
    )
    where = (
        f"this machine's ridge of {ridge:.1f} FLOP/byte ({roofline.compute_gflop_per_s:.0f} "
        f"GFLOP/s over {roofline.bandwidth_gb_per_s:.0f} GB/s, estimated from the in-process "
        "runs below)"
        if roofline
        else f"about {ridge:g} FLOP/byte, a typical CPU ridge (no timings to estimate this one)"
    )
    parts = [
        f"Hot operators: {hot}. Per sample the model does {profile.flops_per_sample / 1e6:.2f} "
        f"MFLOP and each execution reads {profile.weight_bytes / 1e6:.2f} MB of weights: at "
        f"batch 1 that is {at_one:.2f} FLOP/byte against {where}, so a batch-1 execution is "
        f"{bound}."
    ]
    batched = {k: v for k, v in mean_batches.items() if v and v > 1.05}
    if batched:
        listed = "; ".join(
            f"{name}: mean batch {b:.1f} -> {profile.intensity(b):.2f} FLOP/byte"
            f" ({'below' if profile.intensity(b) < ridge else 'at or above'} the ridge)"
            for name, b in batched.items()
        )
        parts.append(
            "Weights are read once per execution, so the batches Triton formed raise the "
            f"intensity ({listed}); that is why compute per inference falls with batching, "
            "until the ridge is reached."
        )
    return " ".join(parts)
