"""Triton's own rules for a model configuration's inputs and outputs, checked before any start.

``json_format.ParseDict`` catches what the protobuf schema refuses (unknown fields, bad enum
values); the server refuses more when it loads a model (``ValidateIOShape`` in Triton core's
``model_config_utils.cc``, 2.51): every tensor needs a name, a data type and at least one dim;
a dim is at least 1 or -1 (variable); a reshape's dims likewise, with the same element count as
the dims (an empty reshape, a scalar, only from dims of one element), and no empty reshape
without batching. ``io_problem`` applies these rules, so a configuration the server would
refuse stops before the server starts, with the tensor named; the integration tests load the
configurations tritonlab writes in the real server.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tritonclient.grpc import model_config_pb2

WILDCARD_DIM = -1


def _count(dims: Sequence[int]) -> int:
    """The element count of ``dims``, -1 when one is variable (Triton's ``GetElementCount``)."""
    return -1 if WILDCARD_DIM in dims else math.prod(dims)


def _chunks(dims: Sequence[int]) -> list[int]:
    """The element counts between variable dims ([2, 4, -1, 6] -> [8, 6])."""
    counts, current = [], 1
    for dim in dims:
        if dim == WILDCARD_DIM:
            counts.append(current)
            current = 1
        else:
            current *= dim
    return [*counts, current]


def tensor_problem(
    kind: str,
    name: str,
    data_type: int,
    dims: Sequence[int],
    reshape: Sequence[int] | None,
    max_batch_size: int,
) -> str | None:
    """Why Triton would refuse one input or output (``kind``); None when it would not.
    ``reshape`` None: the tensor has no reshape (an empty list is an empty reshape)."""
    label = f"{kind} '{name}'"
    if not name:
        return f"a model {kind} has no name"
    if data_type == model_config_pb2.TYPE_INVALID:
        return f"{label} has no data_type"
    if not dims:
        return f"{label} has no dims (a scalar is declared dims: [1])"
    if reshape is not None and not reshape and max_batch_size == 0:
        return (
            f"{label} has an empty reshape in a model without batching (max_batch_size 0), "
            "which Triton refuses: scalars are served as dims [1] there"
        )
    if any(d < 1 and d != WILDCARD_DIM for d in dims):
        return f"{label} has dims {list(dims)}: each must be >= 1, or -1 for a variable size"
    if reshape is None:
        return None
    if any(d < 1 and d != WILDCARD_DIM for d in reshape):
        return f"{label} has reshape {list(reshape)}: each must be >= 1, or -1"
    dims_count, reshape_count = _count(dims), _count(reshape) if reshape else 0
    if dims_count != reshape_count and (reshape_count != 0 or dims_count != 1):
        return f"{label}: dims {list(dims)} and reshape {list(reshape)} differ in size"
    if dims_count == WILDCARD_DIM and _chunks(dims) != _chunks(reshape):
        return f"{label}: dims {list(dims)} and reshape {list(reshape)} differ in size"
    return None


def io_problem(config: model_config_pb2.ModelConfig) -> str | None:
    """Why Triton would refuse ``config``'s inputs or outputs (the first one found); None when
    it would load them."""
    if config.max_batch_size < 0:
        return f"max_batch_size {config.max_batch_size}: must be 0 (no batching) or more"
    tensors = [("input", t) for t in config.input] + [("output", t) for t in config.output]
    for kind, tensor in tensors:
        reshape = list(tensor.reshape.shape) if tensor.HasField("reshape") else None
        problem = tensor_problem(
            kind, tensor.name, tensor.data_type, list(tensor.dims), reshape, config.max_batch_size
        )
        if problem is not None:
            return problem
    return None
