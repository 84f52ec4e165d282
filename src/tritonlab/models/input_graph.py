"""What an ONNX graph says about its inputs: their dims, the tables they index, and ``--shape``.

:func:`graph_dims` reads each input's non-batch dims (numbers or symbolic names),
:func:`gather_bounds` the row count of the embedding table an integer input indexes, and
:func:`resolve_dims` turns the symbolic dims into sizes from ``--shape`` overrides
(:func:`parse_shape_args`) and a default. :mod:`tritonlab.models.inputs` builds the value
rules on top.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from tritonlab.errors import ModelError
from tritonlab.models.inspect import value_dims

# Ops that carry index values through unchanged (only their first input is followed).
PASS_THROUGH = {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Expand"}


def graph_dims(model: Any, batched: bool) -> dict[str, list[int | str]]:
    """Input name -> its non-batch dims: an int, or the symbolic name ('?' if unnamed)."""
    initializers = {i.name for i in model.graph.initializer}
    return {
        vi.name: value_dims(vi)[1:] if batched else value_dims(vi)
        for vi in model.graph.input
        if vi.name not in initializers
    }


def _table_rows(model: Any) -> dict[str, int]:
    """Initializer (and Constant node) name -> its first dim, the rows a Gather can index."""
    rows = {i.name: int(i.dims[0]) for i in model.graph.initializer if len(i.dims) >= 1}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value" and len(attr.t.dims) >= 1:
                    rows[node.output[0]] = int(attr.t.dims[0])
    return rows


def gather_bounds(model: Any) -> dict[str, tuple[int, str]]:
    """Graph input -> (rows, gather node) for inputs that index a table through a Gather (followed
    through value-preserving ops); with several tables, the smallest wins (every index must fit)."""
    consumers: dict[str, list[tuple[Any, int]]] = {}
    for node in model.graph.node:
        for index, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, index))
    tables = _table_rows(model)
    initializers = {i.name for i in model.graph.initializer}
    bounds: dict[str, tuple[int, str]] = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        seen = {vi.name}
        queue = deque([vi.name])
        while queue:
            tensor = queue.popleft()
            for node, index in consumers.get(tensor, []):
                if node.op_type == "Gather" and index == 1 and node.input[0] in tables:
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    if axis != 0:
                        continue
                    rows = tables[node.input[0]]
                    label = node.name or node.output[0]
                    if vi.name not in bounds or rows < bounds[vi.name][0]:
                        bounds[vi.name] = (rows, label)
                elif node.op_type in PASS_THROUGH and index == 0:
                    for out in node.output:
                        if out not in seen:
                            seen.add(out)
                            queue.append(out)
    return bounds


def parse_shape_args(values: list[str]) -> dict[str, tuple[int, ...]]:
    """``NAME:D1,D2,...`` strings (perf_analyzer's --shape form, no batch dim) -> shapes."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in values:
        name, sep, dims = value.rpartition(":")
        try:
            parsed = tuple(int(d) for d in dims.split(","))
        except ValueError:
            parsed = ()
        if not sep or not name or not parsed or min(parsed) < 1:
            raise ModelError(
                f"--shape {value!r}: write NAME:D1,D2,... with positive dims, without the batch "
                "dim (e.g. --shape input_ids:256)"
            )
        shapes[name] = parsed
    return shapes


def resolve_dims(
    graph_dims: dict[str, list[int | str]],
    overrides: dict[str, tuple[int, ...]],
    dynamic_dim: int,
    dynamic_source: str,
) -> tuple[dict[str, tuple[int, ...]], str]:
    """Concrete non-batch shapes per input, and how the dynamic dims were sized: a symbolic dim an
    override sets applies to every input sharing its name, the rest take ``dynamic_dim``."""
    for name, shape in overrides.items():
        if name not in graph_dims:
            raise ModelError(
                f"--shape names '{name}', which is not a model input; inputs: "
                f"{', '.join(graph_dims)}"
            )
        dims = graph_dims[name]
        if len(shape) != len(dims):
            raise ModelError(
                f"--shape {name}: the model's input has {len(dims)} non-batch dims "
                f"{dims_text(dims)}, got {len(shape)}; give exactly {len(dims)}"
            )
        for want, got in zip(dims, shape, strict=True):
            if isinstance(want, int) and want != got:
                raise ModelError(
                    f"--shape {name}: dims {dims_text(dims)} are fixed where they are numbers; "
                    f"got {list(shape)}"
                )
    named: dict[str, tuple[int, str]] = {}
    for name, shape in overrides.items():
        for want, got in zip(graph_dims[name], shape, strict=True):
            if isinstance(want, str) and want != "?":
                if want in named and named[want][0] != got:
                    raise ModelError(
                        f"--shape gives dim '{want}' two sizes ({named[want][0]} for "
                        f"{named[want][1]}, {got} for {name}); they share it, so give one"
                    )
                named[want] = (got, name)
    shapes: dict[str, tuple[int, ...]] = {}
    defaulted: set[str] = set()
    for name, dims in graph_dims.items():
        if name in overrides:
            shapes[name] = overrides[name]
            continue
        concrete = []
        for d in dims:
            if isinstance(d, int):
                concrete.append(d)
            elif d in named:
                concrete.append(named[d][0])
            else:
                concrete.append(dynamic_dim)
                defaulted.add(d)
        shapes[name] = tuple(concrete)
    notes = []
    if named:
        notes.append(
            "set by --shape: " + ", ".join(f"{k} = {v}" for k, (v, _) in sorted(named.items()))
        )
    if defaulted:
        listed = ", ".join(sorted(d for d in defaulted if d != "?")) or "unnamed"
        notes.append(f"dynamic dims ({listed}) = {dynamic_dim} ({dynamic_source})")
    return shapes, "; ".join(notes)


def dims_text(dims: list[int | str]) -> str:
    """Dims as written in messages, e.g. ``[sequence, 384]``."""
    return "[" + ", ".join(str(d) for d in dims) + "]"
