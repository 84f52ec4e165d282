"""What to send to a model: a concrete shape and a value rule for every input, read from the graph.

perf_analyzer's random bytes are not valid for most integer inputs (a token id must be a row of
its embedding table), and a dynamic dim has no size until someone picks one: this module picks
both and states why. The correctness check, the in-process timing and perf_analyzer (through a
JSON ``--input-data`` file written here) all send the same values. Rules, in order, per input:

- the user's samples (``--input-data FILE``, ``.npz`` or perf_analyzer's JSON) when given;
- a state input (``state_pairs``: ``state`` in, ``stateN`` out) starts at zeros, each open dim
  at 1, and is never sent: the server keeps it per sequence (an input's open leading dim is then
  1 too, one stream);
- names like an attention mask get ones, token-type / segment ids get zeros, position ids get
  ``0 .. n-1`` along their last axis;
- a small integer or boolean input the graph compares with constants (a sample rate, a mode:
  ``control_values``) gets the most often compared constant;
- an integer input that reaches a ``Gather`` as its indices (directly or through Cast, Reshape,
  Unsqueeze, ...) whose table is a graph initializer stays below the table's row count;
- other integers take ``[0, 8)``, booleans are random, floats are standard normal.

Dynamic non-batch dims default to 128 (``DEFAULT_DYNAMIC_DIM``), the sequence length BERT-style
encoders are most often served at; ``--shape NAME:D1,D2`` sets them, and inputs that share a
symbolic dim name follow one another. The graph is read in :mod:`~tritonlab.models.input_graph`,
the user's sample files in :mod:`~tritonlab.models.input_samples`.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from tritonlab import gateway
from tritonlab.errors import ModelError
from tritonlab.models.control_values import ControlValues, compared_constants
from tritonlab.models.input_graph import dims_text, gather_bounds, graph_dims, resolve_dims
from tritonlab.models.input_samples import load_samples
from tritonlab.models.inspect import TRITON_TO_NUMPY, OnnxModelInfo, TensorSpec
from tritonlab.models.state_pairs import StateTensor, state_shape, state_tensors
from tritonlab.records import NOT_STORED, Record

DEFAULT_DYNAMIC_DIM = 128
SAFE_INT_RANGE = (0, 8)
# perf_analyzer cycles through the JSON file's entries; several distinct samples keep a cache
# from serving one repeated input, and the cap keeps the file small for large inputs.
PERF_DATA_MAX_ENTRIES = 8
PERF_DATA_MAX_BYTES = 2_000_000
# A plan's ``fresh_inputs``: each cell's file holds this many samples drawn for it, more than a
# block-engine cell sends at this machine's rates (three windows of a few thousand requests);
# the cap keeps a large input's file to what one cell can read quickly. Triton's cache counts
# show whether a cell ran past them (a hit).
FRESH_SAMPLES = 8192
FRESH_DATA_MAX_BYTES = 32_000_000

_MASK_RE = re.compile(r"mask", re.IGNORECASE)
_TYPE_RE = re.compile(r"token_?type|segment|type_ids", re.IGNORECASE)
_POSITION_RE = re.compile(r"position", re.IGNORECASE)


@dataclass(frozen=True)
class InputRule(Record):
    """One input: the shape sent (without the batch dim) and how its values are made."""

    name: str
    triton_dtype: str
    shape: tuple[int, ...]
    # normal | int_range | ones | zeros | positions | random_bool | constant | user | state (a
    # state input: zeros in-process, never sent to the server, which keeps it per sequence)
    kind: str
    reason: str = ""
    # int_range: [low, high); constant: the value (low == high); user: observed min and max
    low: int | float | None = None
    high: int | float | None = None  # ints for int_range (as stored, and fingerprinted)

    def values_text(self) -> str:
        """The values in a few words, e.g. ``ints in [0, 1000)``."""
        if self.kind == "int_range":
            return f"ints in [{self.low:g}, {self.high:g})"
        if self.kind == "positions":
            return f"0 .. {self.shape[-1] - 1} along the last axis" if self.shape else "0"
        if self.kind == "user":
            return f"the user's samples (min {self.low:g}, max {self.high:g})"
        if self.kind == "constant":
            return f"{self.low:g}"
        return {
            "normal": "standard normal",
            "ones": "all ones",
            "zeros": "all zeros",
            "state": "kept by the server, from zeros",
            "random_bool": "random true/false",
        }[self.kind]


@dataclass(frozen=True)
class ModelInputs(Record):
    """Every input's rule; ``batch`` makes arrays, ``write_perf_data`` perf_analyzer's file."""

    rules: tuple[InputRule, ...] = ()
    batched: bool = True
    # How the dynamic dims were sized, stated in the log.
    dims_note: str = ""
    # The user's samples per input (numpy arrays, leading axis = sample), when --input-data was
    # given; in memory only (they stay in their file).
    samples: Annotated[dict[str, Any], NOT_STORED] = field(default_factory=dict, compare=False)

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Input name -> the shape run in-process, without the batch dim (state included)."""
        return {r.name: r.shape for r in self.rules}

    @property
    def sent_shapes(self) -> dict[str, tuple[int, ...]]:
        """Input name -> the shape a client sends the server (no state input: it keeps those)."""
        return {r.name: r.shape for r in self.rules if r.kind != "state"}

    def sent(self, arrays: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        """``arrays`` without the state inputs: what a client sends the server."""
        kept = self.sent_shapes
        return {k: v for k, v in arrays.items() if k in kept}

    def batch(
        self, batch_size: int = 1, seed: int = 0, offset: int = 0
    ) -> dict[str, np.ndarray[Any, Any]]:
        """Arrays for one request of ``batch_size`` samples (no batch axis if not batched); the
        user's samples are taken in order from ``offset``, cycling."""
        rng = np.random.default_rng(seed)
        count = batch_size if self.batched else 1
        out: dict[str, np.ndarray[Any, Any]] = {}
        for rule in self.rules:
            dtype = np.dtype(TRITON_TO_NUMPY[rule.triton_dtype])
            if rule.kind == "user":
                stack = self.samples[rule.name]
                picked = stack[(offset + np.arange(count)) % len(stack)]
                out[rule.name] = picked if self.batched else picked[0]
                continue
            shape = (count, *rule.shape) if self.batched else rule.shape
            out[rule.name] = _generate(rule, shape, dtype, rng)
        return out

    @property
    def sample_bytes(self) -> int:
        """Bytes of one sample, every input together."""
        return sum(
            int(np.prod(r.shape, dtype=np.int64))
            * np.dtype(TRITON_TO_NUMPY[r.triton_dtype]).itemsize
            for r in self.rules
        )

    def perf_entries(self) -> int:
        """How many distinct samples perf_analyzer's data file holds."""
        if self.samples:
            return min(PERF_DATA_MAX_ENTRIES, min(len(s) for s in self.samples.values()))
        return max(1, min(PERF_DATA_MAX_ENTRIES, PERF_DATA_MAX_BYTES // max(1, self.sample_bytes)))

    def fresh_entries(self) -> int:
        """How many samples a cell's file holds under a plan's ``fresh_inputs``."""
        return max(1, min(FRESH_SAMPLES, FRESH_DATA_MAX_BYTES // max(1, self.sample_bytes)))

    def perf_data(self, entries: int | None = None, seed: int = 1) -> dict[str, Any]:
        """perf_analyzer's JSON input data: ``entries`` samples from ``seed``, base64-encoded."""
        entries = entries or self.perf_entries()
        arrays = self.batch(entries, seed=seed) if self.batched else None
        data = []
        for i in range(entries):
            one = (
                {k: v[i] for k, v in arrays.items()}
                if arrays is not None
                else self.batch(1, seed=seed + i, offset=i)
            )
            data.append(
                {
                    name: {
                        "b64": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode(),
                        # a per-sample scalar is declared [1] to Triton (see config.py)
                        "shape": list(value.shape) or [1],
                    }
                    for name, value in self.sent(one).items()
                }
            )
        return {"data": data}

    def write_perf_data(self, path: Path, entries: int | None = None, seed: int = 1) -> Path:
        """Write perf_analyzer's ``--input-data`` file atomically; return its path."""
        return gateway.write_text(path, json.dumps(self.perf_data(entries, seed)))

    def describe(self) -> list[str]:
        """One line per input: dtype, shape sent and values, with the reason."""
        lead = ["batch"] if self.batched else []
        return [
            f"`{r.name}` {r.triton_dtype.removeprefix('TYPE_')} "
            f"[{', '.join([*lead, *(str(d) for d in r.shape)])}]: {r.values_text()} ({r.reason})"
            for r in self.rules
        ]

    def fingerprint_dict(self) -> dict[str, Any]:
        """What decides the data sent, for the plan fingerprint."""
        return {"rules": [r.to_dict() for r in self.rules], "dims_note": self.dims_note}


def _generate(
    rule: InputRule, shape: tuple[int, ...], dtype: np.dtype[Any], rng: np.random.Generator
) -> np.ndarray[Any, Any]:
    if rule.kind == "ones":
        return np.ones(shape, dtype=dtype)
    if rule.kind in ("zeros", "state"):
        return np.zeros(shape, dtype=dtype)
    if rule.kind == "positions":
        length = shape[-1] if shape else 1
        return np.broadcast_to(np.arange(length, dtype=dtype), shape).copy()
    if rule.kind == "random_bool":
        return rng.random(shape) > 0.5
    if rule.kind == "constant":
        return np.full(shape, rule.low, dtype=dtype)
    if rule.kind == "int_range":
        low, high = (
            SAFE_INT_RANGE if rule.low is None or rule.high is None else (rule.low, rule.high)
        )
        return rng.integers(int(low), int(high), size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _derived_rule(
    spec: TensorSpec,
    shape: tuple[int, ...],
    bound: tuple[int, str] | None,
    control: ControlValues | None = None,
    state_of: str | None = None,
) -> InputRule:
    name, dtype = spec.name, spec.triton_dtype
    is_int = not spec.is_float and dtype != "TYPE_BOOL"
    if state_of is not None:
        reason = (
            f"a state input: output '{state_of}' gives its next value; the server keeps it per "
            "sequence (Triton's sequence batcher), starting from zeros; a client never sends it"
        )
        return InputRule(name, dtype, shape, "state", reason)
    if _MASK_RE.search(name):
        return InputRule(name, dtype, shape, "ones", "named like a mask: nothing masked out")
    if _TYPE_RE.search(name) and dtype != "TYPE_BOOL":
        return InputRule(name, dtype, shape, "zeros", "named like token-type ids: one segment")
    if _POSITION_RE.search(name) and is_int:
        length = shape[-1] if shape else 1
        if bound is not None and length > bound[0]:
            raise ModelError(
                f"input '{name}': positions 0..{length - 1} exceed the {bound[0]}-row table of "
                f"Gather '{bound[1]}'; pass a shorter --shape for it"
            )
        return InputRule(name, dtype, shape, "positions", "named like position ids")
    if control is not None and (is_int or dtype == "TYPE_BOOL"):
        value = control.values[0]
        value = bool(value) if dtype == "TYPE_BOOL" else int(value)
        return InputRule(name, dtype, shape, "constant", control.reason(), value, value)
    if bound is not None and is_int:
        reason = f"indexes the {bound[0]}-row table of Gather '{bound[1]}'"
        return InputRule(name, dtype, shape, "int_range", reason, 0, bound[0])
    if dtype == "TYPE_BOOL":
        return InputRule(name, dtype, shape, "random_bool", "boolean input")
    if is_int:
        reason = "integer input that indexes no table: a small non-negative range"
        return InputRule(name, dtype, shape, "int_range", reason, *SAFE_INT_RANGE)
    return InputRule(name, dtype, shape, "normal", "float input")


def derive_inputs(
    info: OnnxModelInfo,
    shapes: dict[str, tuple[int, ...]] | None = None,
    dynamic_dim: int = DEFAULT_DYNAMIC_DIM,
    dynamic_source: str = "tritonlab's default; set with --shape",
    input_data: Path | None = None,
) -> ModelInputs:
    """Concrete shapes and value rules for every input of ``info``'s graph (or of its config)."""
    import onnx

    bounds: dict[str, tuple[int, str]] = {}
    controls: dict[str, ControlValues] = {}
    if info.runs_onnx:
        model = onnx.load(str(info.path), load_external_data=False)
        dims_by_input = graph_dims(model, info.batched)
        bounds = gather_bounds(model)
        discrete = {s.name for s in info.inputs if not s.is_float}
        controls = compared_constants(model, discrete)
    else:  # the config's dims: -1 is a dynamic dim, sized like a graph's unnamed one
        dims_by_input = {s.name: [d if d > 0 else "?" for d in s.dims] for s in info.inputs}
    if input_data is not None:
        return _user_inputs(info, dims_by_input, input_data)
    overrides = dict(shapes or {})
    capped = ""
    for name, dims in dims_by_input.items():
        # A default sequence longer than a position table would index past it: shorten it.
        bound = bounds.get(name)
        if (
            _POSITION_RE.search(name)
            and bound is not None
            and name not in overrides
            and dims
            and isinstance(dims[-1], str)
            and dynamic_dim > bound[0]
        ):
            dynamic_dim = bound[0]
            capped = f", capped at {bound[0]}: the position table of Gather '{bound[1]}' has " + (
                f"{bound[0]} rows"
            )
    states = {t.input: t for t in state_tensors(info)}
    stream = ""
    if states:
        dims_by_input, stream = _one_stream(dims_by_input, overrides, states, info.batched)
    resolved, note = resolve_dims(dims_by_input, overrides, dynamic_dim, dynamic_source + capped)
    note = "; ".join(filter(None, [note, stream]))
    rules = tuple(
        _derived_rule(
            spec,
            resolved[spec.name],
            bounds.get(spec.name),
            controls.get(spec.name),
            states[spec.name].output if spec.name in states else None,
        )
        for spec in info.inputs
    )
    return ModelInputs(rules, info.batched, note)


def _one_stream(
    dims_by_input: dict[str, list[int | str]],
    overrides: dict[str, tuple[int, ...]],
    states: dict[str, StateTensor],
    batched: bool,
) -> tuple[dict[str, list[int | str]], str]:
    """A model that carries state serves one stream per sequence: each state starts at its
    ``state_shape``, and an input's open leading dim (the stream's batch) is 1. The graph's
    dims with those set, and the note that says so ("" where no input had one)."""
    dims = dict(dims_by_input)
    leading = []
    for name, graph in dims_by_input.items():
        if name in states:  # a rule's shape leaves out the batch axis the request adds
            dims[name] = list(states[name].shape[1:] if batched else states[name].shape)
        elif (
            not batched and name not in overrides and len(graph) >= 2 and isinstance(graph[0], str)
        ):
            dims[name] = [1, *graph[1:]]
            leading.append(name)
    note = (
        f"the open leading dim of {', '.join(leading)} = 1 (the model carries state: a request "
        "is one stream's next chunk)"
        if leading
        else ""
    )
    return dims, note


def with_dynamic_dim(inputs: ModelInputs, info: OnnxModelInfo, length: int) -> ModelInputs:
    """The same rules with every dynamic non-batch dim at ``length`` (a sequence-length load)."""
    if inputs.samples:
        raise ModelError("a sequence-length sweep cannot resize the user's --input-data samples")
    return derive_inputs(info, dynamic_dim=length, dynamic_source="the load's sequence length")


def _user_inputs(
    info: OnnxModelInfo, dims_by_input: dict[str, list[int | str]], path: Path
) -> ModelInputs:
    # a state input is the server's (from zeros per sequence): never in the file, never sent
    states = {t.input: t for t in state_tensors(info)}
    samples = load_samples(path, info, frozenset(states))
    rules = []
    for spec in info.inputs:
        if spec.name in states:
            rules.append(
                _derived_rule(spec, state_shape(spec), None, None, states[spec.name].output)
            )
            continue
        stack = samples[spec.name]
        want = dims_by_input[spec.name]
        shape = tuple(int(d) for d in stack.shape[1:])
        if len(shape) != len(want) or any(
            isinstance(w, int) and w != g for w, g in zip(want, shape, strict=True)
        ):
            raise ModelError(
                f"--input-data {path}: '{spec.name}' samples have shape {list(shape)}, the model "
                f"takes {dims_text(want)} per sample"
            )
        if stack.dtype != spec.numpy_dtype:
            if not np.can_cast(stack.dtype, spec.numpy_dtype, casting="same_kind"):
                raise ModelError(
                    f"--input-data {path}: '{spec.name}' is {stack.dtype}, the model takes "
                    f"{spec.numpy_dtype}; save it as {spec.numpy_dtype}"
                )
            samples[spec.name] = stack = stack.astype(spec.numpy_dtype)
        low, high = (float(stack.min()), float(stack.max())) if stack.size else (0.0, 0.0)
        reason = f"{len(stack)} sample(s) from {path.name}"
        rules.append(InputRule(spec.name, spec.triton_dtype, shape, "user", reason, low, high))
    return ModelInputs(tuple(rules), info.batched, f"shapes from {path.name}", samples)
