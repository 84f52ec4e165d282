"""What to send to a model: a concrete shape and a value rule for every input, read from the graph.

perf_analyzer's default random bytes are not valid for most integer inputs (a token id must be a
row of its embedding table), and a dynamic non-batch dim has no size until someone picks one.
This module picks both and states why, for each input. The correctness check, the in-process
timing and perf_analyzer (through a JSON ``--input-data`` file written here) all send the same
values, so a served run measures the inputs that were checked.

Rules, in order, for each input:

- the user's samples (``--input-data FILE``, ``.npz`` or perf_analyzer's JSON) when given;
- names like an attention mask get ones, token-type / segment ids get zeros, position ids get
  ``0 .. n-1`` along their last axis;
- an integer input that reaches a ``Gather`` as its indices (directly or through Cast, Reshape,
  Unsqueeze, ...) whose table is a graph initializer stays below the table's row count;
- other integers take ``[0, 8)``, booleans are random, floats are standard normal.

Dynamic non-batch dims default to 128 (``DEFAULT_DYNAMIC_DIM``): the sequence length BERT-style
encoders are most often fine-tuned and served at, long enough that per-token work dominates the
fixed cost of a call. ``--shape NAME:D1,D2`` sets them; inputs that share a symbolic dim name
(``input_ids`` and ``attention_mask`` both ``[batch, sequence]``) follow one another.
"""

from __future__ import annotations

import base64
import json
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tritonlab.errors import ModelError
from tritonlab.models.inspect import OnnxModelInfo, TensorSpec

DEFAULT_DYNAMIC_DIM = 128
SAFE_INT_RANGE = (0, 8)
# perf_analyzer cycles through the JSON file's entries; several distinct samples keep a cache
# from serving one repeated input, and the cap keeps the file small for large inputs.
PERF_DATA_MAX_ENTRIES = 8
PERF_DATA_MAX_BYTES = 2_000_000

# Ops that carry index values through unchanged (only their first input is followed).
_PASS_THROUGH = {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Expand"}
_MASK_RE = re.compile(r"mask", re.IGNORECASE)
_TYPE_RE = re.compile(r"token_?type|segment|type_ids", re.IGNORECASE)
_POSITION_RE = re.compile(r"position", re.IGNORECASE)


@dataclass(frozen=True)
class InputRule:
    """One input: the shape sent (without the batch dim) and how its values are made."""

    name: str
    triton_dtype: str
    shape: tuple[int, ...]
    # normal | int_range | ones | zeros | positions | random_bool | user
    kind: str
    reason: str
    low: float | None = None  # int_range: [low, high); user: observed min and max
    high: float | None = None

    def values_text(self) -> str:
        """The values in a few words, e.g. ``ints in [0, 1000)``."""
        if self.kind == "int_range":
            return f"ints in [{self.low:g}, {self.high:g})"
        if self.kind == "positions":
            return f"0 .. {self.shape[-1] - 1} along the last axis" if self.shape else "0"
        if self.kind == "user":
            return f"the user's samples (min {self.low:g}, max {self.high:g})"
        return {
            "normal": "standard normal",
            "ones": "all ones",
            "zeros": "all zeros",
            "random_bool": "random true/false",
        }[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "triton_dtype": self.triton_dtype,
            "shape": list(self.shape),
            "kind": self.kind,
            "reason": self.reason,
            "low": self.low,
            "high": self.high,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputRule:
        return cls(
            name=data["name"],
            triton_dtype=data["triton_dtype"],
            shape=tuple(int(d) for d in data["shape"]),
            kind=data["kind"],
            reason=str(data.get("reason", "")),
            low=data.get("low"),
            high=data.get("high"),
        )


@dataclass(frozen=True)
class ModelInputs:
    """Every input's rule; ``batch`` makes arrays, ``write_perf_data`` perf_analyzer's file."""

    rules: tuple[InputRule, ...]
    batched: bool
    # How the dynamic dims were sized, stated in the log.
    dims_note: str = ""
    # The user's samples per input (leading axis = sample), when --input-data was given.
    samples: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict, compare=False)

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {r.name: r.shape for r in self.rules}

    def batch(
        self, batch_size: int = 1, seed: int = 0, offset: int = 0
    ) -> dict[str, np.ndarray[Any, Any]]:
        """Arrays for one request of ``batch_size`` samples (no batch axis if not batched).

        The user's samples are taken in order from ``offset``, cycling.
        """
        rng = np.random.default_rng(seed)
        count = batch_size if self.batched else 1
        out: dict[str, np.ndarray[Any, Any]] = {}
        for rule in self.rules:
            dtype = np.dtype(_numpy_dtype(rule.triton_dtype))
            if rule.kind == "user":
                stack = self.samples[rule.name]
                picked = stack[(offset + np.arange(count)) % len(stack)]
                out[rule.name] = picked if self.batched else picked[0]
                continue
            shape = (count, *rule.shape) if self.batched else rule.shape
            out[rule.name] = _generate(rule, shape, dtype, rng)
        return out

    def perf_entries(self) -> int:
        """How many distinct samples perf_analyzer's data file holds."""
        if self.samples:
            return min(PERF_DATA_MAX_ENTRIES, min(len(s) for s in self.samples.values()))
        sample_bytes = sum(
            int(np.prod(r.shape, dtype=np.int64)) * np.dtype(_numpy_dtype(r.triton_dtype)).itemsize
            for r in self.rules
        )
        return max(1, min(PERF_DATA_MAX_ENTRIES, PERF_DATA_MAX_BYTES // max(1, sample_bytes)))

    def perf_data(self) -> dict[str, Any]:
        """perf_analyzer's JSON input data: one entry per sample, each tensor base64-encoded."""
        entries = self.perf_entries()
        arrays = self.batch(entries, seed=1) if self.batched else None
        data = []
        for i in range(entries):
            one = (
                {k: v[i] for k, v in arrays.items()}
                if arrays is not None
                else self.batch(1, seed=1 + i, offset=i)
            )
            data.append(
                {
                    name: {
                        "b64": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode(),
                        # a per-sample scalar is declared [1] to Triton (see config.py)
                        "shape": list(value.shape) or [1],
                    }
                    for name, value in one.items()
                }
            )
        return {"data": data}

    def write_perf_data(self, path: Path) -> Path:
        """Write perf_analyzer's ``--input-data`` file atomically; return its path."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.perf_data()))
        tmp.replace(path)
        return path

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "batched": self.batched,
            "dims_note": self.dims_note,
            "rules": [r.to_dict() for r in self.rules],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelInputs:
        return cls(
            rules=tuple(InputRule.from_dict(r) for r in data.get("rules", [])),
            batched=bool(data.get("batched", True)),
            dims_note=str(data.get("dims_note", "")),
        )


def _numpy_dtype(triton_dtype: str) -> str:
    from tritonlab.models.inspect import TRITON_TO_NUMPY

    return TRITON_TO_NUMPY[triton_dtype]


def _generate(
    rule: InputRule, shape: tuple[int, ...], dtype: np.dtype[Any], rng: np.random.Generator
) -> np.ndarray[Any, Any]:
    if rule.kind == "ones":
        return np.ones(shape, dtype=dtype)
    if rule.kind == "zeros":
        return np.zeros(shape, dtype=dtype)
    if rule.kind == "positions":
        length = shape[-1] if shape else 1
        return np.broadcast_to(np.arange(length, dtype=dtype), shape).copy()
    if rule.kind == "random_bool":
        return rng.random(shape) > 0.5
    if rule.kind == "int_range":
        low, high = (
            SAFE_INT_RANGE if rule.low is None or rule.high is None else (rule.low, rule.high)
        )
        return rng.integers(int(low), int(high), size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# --- reading the graph -------------------------------------------------------------------------


def _graph_dims(model: Any, batched: bool) -> dict[str, list[int | str]]:
    """Input name -> its non-batch dims: an int, or the symbolic name ('?' if unnamed)."""
    initializers = {i.name for i in model.graph.initializer}
    out: dict[str, list[int | str]] = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        dims: list[int | str] = []
        for dim in vi.type.tensor_type.shape.dim:
            if dim.HasField("dim_value") and dim.dim_value > 0:
                dims.append(int(dim.dim_value))
            else:
                dims.append(dim.dim_param or "?")
        out[vi.name] = dims[1:] if batched else dims
    return out


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
    """Graph input -> (rows, gather node) for inputs that index a table through a Gather.

    Follows each input through value-preserving ops; with several Gathers, the smallest table
    wins (every index must be valid for every table it reaches).
    """
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
                elif node.op_type in _PASS_THROUGH and index == 0:
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


def _resolve_dims(
    graph_dims: dict[str, list[int | str]],
    overrides: dict[str, tuple[int, ...]],
    dynamic_dim: int,
    dynamic_source: str,
) -> tuple[dict[str, tuple[int, ...]], str]:
    """Concrete non-batch shapes; symbolic names set by one input apply to every input."""
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
                f"{_dims_text(dims)}, got {len(shape)}; give exactly {len(dims)}"
            )
        for want, got in zip(dims, shape, strict=True):
            if isinstance(want, int) and want != got:
                raise ModelError(
                    f"--shape {name}: dims {_dims_text(dims)} are fixed where they are numbers; "
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


def _dims_text(dims: list[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _derived_rule(
    spec: TensorSpec, shape: tuple[int, ...], bound: tuple[int, str] | None
) -> InputRule:
    name, dtype = spec.name, spec.triton_dtype
    is_int = not spec.is_float and dtype != "TYPE_BOOL"
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
    if bound is not None and is_int:
        rows, gather = bound
        return InputRule(
            name,
            dtype,
            shape,
            "int_range",
            f"indexes the {rows}-row table of Gather '{gather}'",
            0,
            rows,
        )
    if dtype == "TYPE_BOOL":
        return InputRule(name, dtype, shape, "random_bool", "boolean input")
    if is_int:
        low, high = SAFE_INT_RANGE
        return InputRule(
            name,
            dtype,
            shape,
            "int_range",
            "integer input that indexes no table: a small non-negative range",
            low,
            high,
        )
    return InputRule(name, dtype, shape, "normal", "float input")


def derive_inputs(
    info: OnnxModelInfo,
    shapes: dict[str, tuple[int, ...]] | None = None,
    dynamic_dim: int = DEFAULT_DYNAMIC_DIM,
    dynamic_source: str = "tritonlab's default; set with --shape",
    input_data: Path | None = None,
) -> ModelInputs:
    """Concrete shapes and value rules for every input of ``info``'s graph."""
    import onnx

    model = onnx.load(str(info.path), load_external_data=False)
    graph_dims = _graph_dims(model, info.batched)
    if input_data is not None:
        return _user_inputs(info, graph_dims, input_data)
    bounds = gather_bounds(model)
    overrides = dict(shapes or {})
    capped = ""
    for name, dims in graph_dims.items():
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
    resolved, note = _resolve_dims(graph_dims, overrides, dynamic_dim, dynamic_source + capped)
    rules = tuple(
        _derived_rule(spec, resolved[spec.name], bounds.get(spec.name)) for spec in info.inputs
    )
    return ModelInputs(rules, info.batched, note)


def with_dynamic_dim(inputs: ModelInputs, info: OnnxModelInfo, length: int) -> ModelInputs:
    """The same rules with every dynamic non-batch dim at ``length`` (a sequence-length load)."""
    if inputs.samples:
        raise ModelError("a sequence-length sweep cannot resize the user's --input-data samples")
    return derive_inputs(info, dynamic_dim=length, dynamic_source="the load's sequence length")


# --- the user's samples ------------------------------------------------------------------------


def _load_samples(path: Path, info: OnnxModelInfo) -> dict[str, np.ndarray[Any, Any]]:
    if not path.exists():
        raise ModelError(f"--input-data {path} not found; pass an .npz or perf_analyzer JSON file")
    specs = {s.name: s for s in info.inputs}
    if path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as archive:
                arrays = {k: archive[k] for k in archive.files}
        except Exception as exc:
            raise ModelError(f"--input-data {path} is not a readable .npz ({exc})") from exc
        if not info.batched:  # one request per file unless stacked
            arrays = {
                k: v[None] if k in specs and v.ndim == len(specs[k].dims) else v
                for k, v in arrays.items()
            }
    elif path.suffix == ".json":
        arrays = _json_samples(path, specs)
    else:
        raise ModelError(f"--input-data {path}: use an .npz file or perf_analyzer's JSON format")
    missing = [n for n in specs if n not in arrays]
    if missing:
        raise ModelError(
            f"--input-data {path} has no array for input(s) {', '.join(missing)}; "
            f"it has {', '.join(arrays) or 'none'}"
        )
    counts = {len(arrays[n]) for n in specs}
    if len(counts) != 1:
        raise ModelError(f"--input-data {path}: every input needs the same number of samples")
    return {n: arrays[n] for n in specs}


def _json_samples(path: Path, specs: dict[str, TensorSpec]) -> dict[str, np.ndarray[Any, Any]]:
    try:
        entries = json.loads(path.read_text())["data"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(
            f'--input-data {path} is not perf_analyzer JSON ({{"data": [...]}}): {exc}'
        ) from exc
    per_input: dict[str, list[np.ndarray[Any, Any]]] = {}
    for entry in entries:
        for name, value in entry.items():
            if name not in specs:
                continue
            dtype = specs[name].numpy_dtype
            if isinstance(value, dict) and "b64" in value:
                array = np.frombuffer(base64.b64decode(value["b64"]), dtype=dtype)
            elif isinstance(value, dict):
                array = np.asarray(value.get("content", []), dtype=dtype)
            else:
                array = np.asarray(value, dtype=dtype)
            shape = value.get("shape") if isinstance(value, dict) else None
            dims = specs[name].dims
            if shape is None and -1 not in dims:
                shape = list(dims)
            if shape is None:
                raise ModelError(f"--input-data {path}: '{name}' needs a \"shape\" (dims vary)")
            per_input.setdefault(name, []).append(array.reshape(shape))
    try:
        return {k: np.stack(v) for k, v in per_input.items()}
    except ValueError as exc:
        raise ModelError(f"--input-data {path}: samples of one input differ in shape") from exc


def _user_inputs(
    info: OnnxModelInfo, graph_dims: dict[str, list[int | str]], path: Path
) -> ModelInputs:
    samples = _load_samples(path, info)
    rules = []
    for spec in info.inputs:
        stack = samples[spec.name]
        want = graph_dims[spec.name]
        shape = tuple(int(d) for d in stack.shape[1:])
        if len(shape) != len(want) or any(
            isinstance(w, int) and w != g for w, g in zip(want, shape, strict=True)
        ):
            raise ModelError(
                f"--input-data {path}: '{spec.name}' samples have shape {list(shape)}, the model "
                f"takes {_dims_text(want)} per sample"
            )
        if stack.dtype != spec.numpy_dtype:
            if not np.can_cast(stack.dtype, spec.numpy_dtype, casting="same_kind"):
                raise ModelError(
                    f"--input-data {path}: '{spec.name}' is {stack.dtype}, the model takes "
                    f"{spec.numpy_dtype}; save it as {spec.numpy_dtype}"
                )
            samples[spec.name] = stack = stack.astype(spec.numpy_dtype)
        low = float(stack.min()) if stack.size else 0.0
        high = float(stack.max()) if stack.size else 0.0
        rules.append(
            InputRule(
                spec.name,
                spec.triton_dtype,
                shape,
                "user",
                f"{len(stack)} sample(s) from {path.name}",
                low,
                high,
            )
        )
    return ModelInputs(tuple(rules), info.batched, f"shapes from {path.name}", samples)
