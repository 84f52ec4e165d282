"""Values for control inputs, read from the graph: the constants a small integer or boolean
input is compared with.

A model that takes a sample rate, a mode or a flag as an input branches on it (``Equal`` with
16000, then ``If``); a value it does not expect sends it down a branch meant for other inputs,
or into an error. ``compared_constants`` follows each such input through value-preserving ops
(Cast, Reshape, Squeeze, ...) to the comparisons (Equal, Less, Greater, LessOrEqual,
GreaterOrEqual) whose other side is a constant, and returns those constants, the most often
compared first. :mod:`tritonlab.models.inputs` sends the first, and says so; ``--input-data``
still wins.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from tritonlab.models.input_graph import PASS_THROUGH

COMPARISONS = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}
# A control input is small: a scalar or a handful of values (a flag per sample, a mode).
MAX_CONTROL_ELEMENTS = 4
# A constant compared with is small too (a whole array is a threshold table, not a value).
MAX_CONSTANT_ELEMENTS = 4


@dataclass(frozen=True)
class ControlValues:
    """The constants a control input is compared with, the most frequent first, and where."""

    values: tuple[float, ...]
    nodes: tuple[str, ...]

    def reason(self) -> str:
        """Why the first value is sent, in a few words for the log."""
        listed = ", ".join(f"{v:g}" for v in self.values)
        where = ", ".join(self.nodes[:3]) + (" ..." if len(self.nodes) > 3 else "")
        return f"a control input: the graph compares it with {listed} ({where}); the first is sent"


def _constants(model: Any) -> dict[str, Any]:
    """Initializer and Constant-node outputs -> their values (numpy), small ones only."""
    from onnx import numpy_helper

    found: dict[str, Any] = {}
    for init in model.graph.initializer:
        if _count(init.dims) <= MAX_CONSTANT_ELEMENTS:
            found[init.name] = numpy_helper.to_array(init)
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value" and _count(attr.t.dims) <= MAX_CONSTANT_ELEMENTS:
                    found[node.output[0]] = numpy_helper.to_array(attr.t)
    return found


def _count(dims: Any) -> int:
    count = 1
    for d in dims:
        count *= int(d)
    return count


def _small(value_info: Any) -> bool:
    """Whether an input is a control's size: every dim fixed and few elements in all."""
    dims = value_info.type.tensor_type.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        return False
    return _count(d.dim_value for d in dims) <= MAX_CONTROL_ELEMENTS


def compared_constants(model: Any, names: set[str]) -> dict[str, ControlValues]:
    """Input name (of ``names``, the integer and boolean inputs) -> the constants the graph
    compares it with, for the small ones that reach a comparison through value-preserving ops."""
    consumers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    constants = _constants(model)
    found: dict[str, ControlValues] = {}
    for vi in model.graph.input:
        if vi.name not in names or not _small(vi):
            continue
        counts: Counter[float] = Counter()
        nodes: list[str] = []
        seen, queue = {vi.name}, deque([vi.name])
        while queue:
            tensor = queue.popleft()
            for node in consumers.get(tensor, []):
                if node.op_type in COMPARISONS:
                    others = [n for n in node.input if n != tensor and n in constants]
                    for other in others:
                        counts.update(float(v) for v in constants[other].ravel().tolist())
                        nodes.append(f"{node.op_type} '{node.name or node.output[0]}'")
                elif node.op_type in PASS_THROUGH and node.input[0] == tensor:
                    for out in node.output:
                        if out not in seen:
                            seen.add(out)
                            queue.append(out)
        if counts:
            values = tuple(v for v, _ in counts.most_common())
            found[vi.name] = ControlValues(values, tuple(dict.fromkeys(nodes)))
    return found
