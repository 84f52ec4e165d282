"""The model's hot operators read from its ONNX graph (FLOPs and bytes per sample of every
MatMul, Gemm and Conv) and ``operators.json``'s record of what a run measured about them.

Weights are read once per execution however many samples it carries, so batching raises the
arithmetic intensity: the operator-level reason a batched execution costs less per inference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonlab.perf.in_process import Ceiling
from tritonlab.perf.machine import MachineCeilings
from tritonlab.records import Record, later

_HEAVY = ("MatMul", "Gemm", "Conv")


@dataclass(frozen=True)
class OperatorCost(Record):
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


@dataclass(frozen=True)
class OperatorProfile(Record):
    """The heavy operators of one model (per sample); the totals are derived from them (and
    stored beside them, FLOPs and bytes)."""

    DERIVED = ("flops_per_sample", "weight_bytes", "activation_bytes_per_sample")

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
    null_in_process_us_per_execution: dict[int, float] | None = later()
    # "backend precision" -> batch size -> µs per execution, for every engine but onnxruntime.
    engines_in_process_us_per_execution: dict[str, dict[int, float]] | None = later()
    # "openvino precision" -> the precision OpenVINO compiled in on this processor.
    engines_precision_used: dict[str, str] | None = later()
    in_process_ceilings: tuple[Ceiling, ...] | None = later()
    machine_ceilings: MachineCeilings | None = later()
    # batch size -> operator name -> median µs per kernel run (onnxruntime's profiler).
    operator_us_per_execution: dict[int, dict[str, float]] | None = later()


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
    """The heavy operators of an ONNX model, per sample (the batch dim counts as 1);
    ``input_shapes`` (non-batch dims, as sent) fixes dynamic dims before shape inference."""
    import onnx

    raw = onnx.load(str(onnx_path))
    for vi in raw.graph.input:
        if (sent := (input_shapes or {}).get(vi.name)) is None:
            continue
        full = (1, *sent) if batched else sent
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == len(full):
            for dim, size in zip(dims, full, strict=True):
                dim.Clear()
                dim.dim_value = int(size)
    # data_prop: shapes computed in the graph (a Reshape to heads x head size) are propagated;
    # without it the attention MatMuls' dims stayed symbolic and counted as 1, so an encoder's
    # Q.K^T, attention x V and output projection read as 2-768 FLOPs (issue 36 audit: 2,491.72
    # MFLOP per sample where the layers hold 2,869)
    model = onnx.shape_inference.infer_shapes(raw, data_prop=True)
    graph = model.graph
    shapes: dict[str, tuple[list[int], int]] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if (shape := _shape(vi)) is not None:
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
        name = node.name or node.output[0]
        ops.append(
            OperatorCost(name, node.op_type, flops, int(weight_bytes), int(act_in + act_out))
        )
    return OperatorProfile(tuple(ops))
