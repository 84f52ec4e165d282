"""One request in-process before any server starts: does the model run at the shapes chosen?

A model exported by tracing often has its example's sizes baked into the graph (a BERT-like
encoder traced at sequence 16 reshapes to ``[1, 16, 12, 64]``): it loads, but runs only at that
size. tritonlab sizes dynamic dims itself (``inputs.DEFAULT_DYNAMIC_DIM``), so such a model would
fail deep in the run with onnxruntime's error. ``probe_inputs`` runs one request of the chosen
inputs in onnxruntime first. When it fails and the dynamic sizes were tritonlab's own choice,
it tries the sizes the graph itself names (the integers of its Reshape targets, the most common
first) and keeps the first that runs, saying why in the inputs' note; otherwise it stops with
one line naming the failing node, the shapes tried and the ``--shape`` to pass.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from tritonlab.errors import ModelError
from tritonlab.models.input_graph import parse_shape_args
from tritonlab.models.inputs import ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo

MAX_TRIES = 8
MAX_CANDIDATE = 8192
_NODE_RE = re.compile(r"running (\w+) node\. Name:'([^']*)'")


def _run_error(session: Any, inputs: ModelInputs) -> str | None:
    """onnxruntime's error for one request of ``inputs`` (batch 1), None when it runs."""
    try:
        session.run(None, inputs.batch(1))
    except Exception as exc:  # onnxruntime raises its own (Fail, RuntimeException, ...)
        text = " ".join(str(exc).split())
        return text or type(exc).__name__
    return None


def _failing_node(error: str) -> str:
    match = _NODE_RE.search(error)
    return f"{match.group(1)} node '{match.group(2)}'" if match else "the graph"


def reshape_sizes(info: OnnxModelInfo) -> list[int]:
    """The positive integers of the graph's Reshape targets, the most frequent first."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(info.path), load_external_data=False)
    graph = model.graph
    constants: dict[str, Any] = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    constants[node.output[0]] = attr.t
    counts: Counter[int] = Counter()
    for node in graph.node:
        if node.op_type == "Reshape" and len(node.input) > 1 and node.input[1] in constants:
            values = numpy_helper.to_array(constants[node.input[1]]).ravel().tolist()
            counts.update(int(v) for v in values if 1 < int(v) <= MAX_CANDIDATE)
    return [size for size, _ in counts.most_common()]


def _shapes_text(inputs: ModelInputs) -> str:
    return ", ".join(f"{name} {list(shape)}" for name, shape in inputs.shapes.items())


def probe_inputs(info: OnnxModelInfo, inputs: ModelInputs, sized_by_user: bool) -> ModelInputs:
    """``inputs`` when one request of them runs in onnxruntime; else inputs at a size the graph
    names that does (only when tritonlab chose the sizes); else a one-line ``ModelError``."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(info.path), providers=["CPUExecutionProvider"])
    if (error := _run_error(session, inputs)) is None:
        return inputs
    defaulted = "dynamic dims (" in inputs.dims_note  # tritonlab chose a dynamic size
    tried = [_shapes_text(inputs)]
    if not sized_by_user and defaulted and not inputs.samples:
        for size in reshape_sizes(info)[:MAX_TRIES]:
            candidate = derive_inputs(
                info,
                dynamic_dim=size,
                dynamic_source=(
                    f"the size the graph runs at: at tritonlab's default ({tried[0]}) "
                    f"onnxruntime failed in {_failing_node(error)}, and {size}, named by the "
                    "graph's Reshape targets (a traced export's size), runs; set with --shape"
                ),
            )
            if candidate.shapes == inputs.shapes:
                continue
            if _run_error(session, candidate) is None:
                return candidate
            tried.append(_shapes_text(candidate))
    example = next(iter(inputs.shapes), "INPUT")
    raise ModelError(
        f"onnxruntime cannot run {info.path.name} at {'; nor at '.join(tried)}: "
        f"{_failing_node(error)} failed ({error[:200]}); pass the size it was exported at, "
        f"e.g. --shape {example}:D1,D2,..."
    )


def checked_inputs(
    info: OnnxModelInfo, shape_args: list[str] | None = None, input_data: Path | None = None
) -> ModelInputs:
    """What every request carries (``--shape``, ``--input-data``), probed in-process first."""
    shapes = parse_shape_args(shape_args or [])
    inputs = derive_inputs(info, shapes, input_data=input_data)
    if not info.runs_onnx:
        return inputs  # a Python model or an ensemble: the served reference check is the probe
    return probe_inputs(info, inputs, sized_by_user=bool(shapes) or input_data is not None)
