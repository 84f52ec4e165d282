"""The user's samples (``--input-data FILE``): an ``.npz`` or perf_analyzer's JSON, read per input.

:func:`load_samples` returns one stacked array per model input (leading axis = sample) or raises
``ModelError`` naming what is wrong with the file; :mod:`tritonlab.models.inputs` checks the
shapes and dtypes against the graph and turns them into ``user`` rules.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

from tritonlab.errors import ModelError
from tritonlab.models.inspect import OnnxModelInfo, TensorSpec


def load_samples(
    path: Path, info: OnnxModelInfo, kept: frozenset[str] = frozenset()
) -> dict[str, np.ndarray[Any, Any]]:
    """One stacked array per model input (leading axis = sample), read from ``path``; ``kept``:
    inputs the server keeps (a state input), which the file need not hold and a client never
    sends."""
    if not path.exists():
        raise ModelError(f"--input-data {path} not found; pass an .npz or perf_analyzer JSON file")
    specs = {s.name: s for s in info.inputs if s.name not in kept}
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
