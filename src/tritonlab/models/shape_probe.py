"""One request in-process before any server starts: does the model run at the shapes chosen?

A model exported by tracing often has its example's sizes baked into the graph (a BERT-like
encoder traced at sequence 16 reshapes to ``[1, 16, 12, 64]``): it loads, but runs only at that
size. Others run only within a range: an audio front end needs at least a window of samples, a
text recogniser only images up to a height. tritonlab sizes dynamic dims itself
(``inputs.DEFAULT_DYNAMIC_DIM``), so such a model would fail deep in the run with onnxruntime's
error. ``probe_inputs`` runs one request of the chosen inputs in onnxruntime first; a run that
yields an empty output counts as failing too. When it fails and the dynamic sizes were
tritonlab's own choice, it searches: first the sizes the graph itself names (the integers of its
Reshape targets, the most common first), then a ladder of typical sizes nearest the default
first (``LADDER``), at most ``MAX_TRIES`` in all and none larger than ``MAX_PROBE_BYTES``
per request; it keeps the first that runs and states in the inputs' note what was tried, what
failed and why this size. Otherwise it stops with one line naming the failing node, the shapes
tried and the ``--shape`` to pass.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from tritonlab.errors import ModelError
from tritonlab.models.input_graph import parse_shape_args
from tritonlab.models.inputs import DEFAULT_DYNAMIC_DIM, ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo

MAX_TRIES = 12
MAX_CANDIDATE = 8192
# Typical sizes of a dynamic dim (sequence lengths, image sides, audio windows), nearest
# tritonlab's default (128) first: half and double, then further out, multiples of 8 and 32.
LADDER = (64, 256, 32, 512, 16, 1024, 48, 96, 160, 320, 2048, 4096)
# A request larger than this (one sample of every input) is not probed: its size is not one a
# served request would have, and it could take this machine's memory.
MAX_PROBE_BYTES = 64 * 2**20
_NODE_RE = re.compile(r"running (\w+) node\. Name:'([^']*)'")


def _run_error(session: Any, inputs: ModelInputs) -> str | None:
    """onnxruntime's error for one request of ``inputs`` (batch 1), or which output came out
    empty; None when it runs and every output holds something."""
    try:
        outputs = session.run(None, inputs.batch(1))
    except Exception as exc:  # onnxruntime raises its own (Fail, RuntimeException, ...)
        text = " ".join(str(exc).split())
        return text or type(exc).__name__
    names = [o.name for o in session.get_outputs()]
    for name, out in zip(names, outputs, strict=False):
        if np.asarray(out).size == 0:
            return f"it runs, but output '{name}' is empty at {_shapes_text(inputs)}"
    return None


def _failing_node(error: str) -> str:
    match = _NODE_RE.search(error)
    if match:
        return f"{match.group(1)} node '{match.group(2)}'"
    return "an empty output" if error.startswith("it runs, but") else "the graph"


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


def candidate_sizes(info: OnnxModelInfo) -> list[tuple[int, str]]:
    """The sizes to try for the dynamic dims, with where each comes from: the graph's Reshape
    targets first, then the ladder; the default (already tried) left out."""
    named = [
        (size, "named by the graph's Reshape targets (a traced export's size)")
        for size in reshape_sizes(info)
    ]
    ladder = [
        (
            size,
            "the first size of the ladder of typical sizes, nearest the default first, that runs",
        )
        for size in LADDER
    ]
    seen = {DEFAULT_DYNAMIC_DIM}
    sizes = []
    for size, source in [*named, *ladder]:
        if size not in seen:
            seen.add(size)
            sizes.append((size, source))
    return sizes


def probe_inputs(info: OnnxModelInfo, inputs: ModelInputs, sized_by_user: bool) -> ModelInputs:
    """``inputs`` when one request of them runs in onnxruntime; else inputs at a size the graph
    names or the ladder offers that does (only when tritonlab chose the sizes); else a one-line
    ``ModelError``."""
    from tritonlab.models.ort_session import cpu_session

    session = cpu_session(info.path)
    if (error := _run_error(session, inputs)) is None:
        return inputs
    defaulted = "dynamic dims (" in inputs.dims_note  # tritonlab chose a dynamic size
    tried = [_shapes_text(inputs)]
    failures = [f"tritonlab's default ({_shapes_text(inputs)}) in {_failing_node(error)}"]
    if not sized_by_user and defaulted and not inputs.samples:
        tries = 0
        for size, source in candidate_sizes(info):
            if tries == MAX_TRIES:
                break
            candidate = derive_inputs(info, dynamic_dim=size)
            if candidate.shapes == inputs.shapes or candidate.sample_bytes > MAX_PROBE_BYTES:
                continue
            tries += 1
            failed = _run_error(session, candidate)
            if failed is None:
                why = (
                    f"the size the graph runs at: onnxruntime failed at {'; '.join(failures)}; "
                    f"{size} ({source}) runs; set with --shape"
                )
                return derive_inputs(info, dynamic_dim=size, dynamic_source=why)
            tried.append(_shapes_text(candidate))
            failures.append(f"{size} in {_failing_node(failed)}")
    example = next(iter(inputs.shapes), "INPUT")
    raise ModelError(
        f"onnxruntime cannot run {info.path.name} at {'; nor at '.join(tried[:4])}"
        + (f" (nor {len(tried) - 4} more sizes)" if len(tried) > 4 else "")
        + f": {_failing_node(error)} failed ({error[:200]}); pass the size it was exported at, "
        f"e.g. --shape {example}:D1,D2,..."
    )


def checked_inputs(
    info: OnnxModelInfo, shape_args: list[str] | None = None, input_data: Path | None = None
) -> ModelInputs:
    """What every request carries (``--shape``, ``--input-data``), probed in-process first."""
    return checked_shapes(info, parse_shape_args(shape_args or []), input_data)


def checked_shapes(
    info: OnnxModelInfo,
    shapes: dict[str, tuple[int, ...]] | None = None,
    input_data: Path | None = None,
) -> ModelInputs:
    """``checked_inputs`` with the ``--shape`` arguments already parsed."""
    inputs = derive_inputs(info, shapes, input_data=input_data)
    if not info.runs_onnx:
        return inputs  # a Python model or an ensemble: the served reference check is the probe
    return probe_inputs(info, inputs, sized_by_user=bool(shapes) or input_data is not None)
