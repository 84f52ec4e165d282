"""State pairs of a streaming model: an input that takes what an output gave on the last call.

A stateful streaming model (a VAD, a keyword spotter, an RNN) carries its state through the
client: ``state`` in, ``stateN`` out, and the next request sends the last ``stateN`` back. Such
a pair is an input and an output of one dtype and compatible dims whose names pair up as these
models name them: ``state``/``stateN``, ``h``/``hn``, ``c``/``cn``, ``h0``/``hn``; and, where
the stem names a state (``state``, ``hidden``, ``cell``, ``h``, ``c``, ``mem``, ``cache``,
``context``), ``x_in``/``x_out``, ``in_x``/``out_x``, ``x``/``x_out``, ``x``/``x_new``,
``x``/``x_next`` (a denoiser's ``audio``/``audio_out`` is not a state). A growing cache
(``past_key_values``/``present``: its output is longer than its input) is not one.
``state_pairs`` finds them. Such a model is served with Triton's sequence batcher
(``repository/config.py``): the state tensors leave the served interface, the backend adapter
keeps each sequence's state (``state_tensors`` says what it starts from: zeros, each dim the
graph leaves open at 1, one stream), and a client sends only the other inputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tritonlab.errors import ConfigError
from tritonlab.models.inspect import TRITON_TO_NUMPY, OnnxModelInfo, TensorSpec

# (input suffix, output suffix) after a common stem: these name a state whatever the stem.
_STATE_SUFFIXES = (("", "n"), ("", "N"), ("0", "n"), ("0", "N"), ("_0", "_n"))
# These pair an input with an output of many kinds: a state only where the stem says so.
_STATE_STEM = re.compile(r"state|hidden|cell|^h$|^c$|mem|cache|context|ctx", re.IGNORECASE)
_SUFFIXES = (
    ("_in", "_out"),
    ("in", "out"),
    ("", "_out"),
    ("", "_new"),
    ("", "_next"),
    ("", ".out"),
)
_PREFIXES = (("in_", "out_"), ("input_", "output_"))


def _stem(input_name: str, output_name: str, tail_in: str, tail_out: str) -> str:
    """The common stem of the two names with these suffixes ("" when they do not pair)."""
    if not (input_name.endswith(tail_in) and output_name.endswith(tail_out)):
        return ""
    stem = input_name[: len(input_name) - len(tail_in)]
    return stem if stem == output_name[: len(output_name) - len(tail_out)] else ""


def _paired(input_name: str, output_name: str) -> bool:
    if any(_stem(input_name, output_name, *tails) for tails in _STATE_SUFFIXES):
        return True
    stems = [_stem(input_name, output_name, *tails) for tails in _SUFFIXES]
    for head_in, head_out in _PREFIXES:
        stem = input_name[len(head_in) :]
        if input_name.startswith(head_in) and output_name == head_out + stem:
            stems.append(stem)
    return any(stem and _STATE_STEM.search(stem) for stem in stems)


def _same_tensor(a: TensorSpec, b: TensorSpec) -> bool:
    """One dtype, one rank, and each dim equal where both are known (an exporter often leaves
    the output's dims unnamed: silero's ``state`` [2, ?, 128] gives ``stateN`` [?, ?, ?])."""
    return (
        a.triton_dtype == b.triton_dtype
        and len(a.dims) == len(b.dims) > 0
        and all(x == y or -1 in (x, y) for x, y in zip(a.dims, b.dims, strict=True))
    )


def state_pairs(info: OnnxModelInfo) -> dict[str, str]:
    """State input name -> the output it takes its next value from (one output per input)."""
    pairs: dict[str, str] = {}
    taken: set[str] = set()
    for spec in info.inputs:
        for out in info.outputs:
            if out.name not in taken and _same_tensor(spec, out) and _paired(spec.name, out.name):
                pairs[spec.name] = out.name
                taken.add(out.name)
                break
    return pairs


@dataclass(frozen=True)
class StateTensor:
    """One state pair as served: the input, the output that gives its next value, and the
    state a sequence starts from (zeros of ``shape`` in ``dtype``, a numpy name)."""

    input: str
    output: str
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict[str, object]:
        """As the adapter's config parameter holds it."""
        return {
            "input": self.input,
            "output": self.output,
            "shape": list(self.shape),
            "dtype": self.dtype,
        }


def state_shape(spec: TensorSpec) -> tuple[int, ...]:
    """The shape a state starts at: the graph's dims, each open one at 1 (one stream: in the
    streaming models seen, the open dim of a state is its batch)."""
    return tuple(d if d > 0 else 1 for d in spec.dims)


def state_tensors(info: OnnxModelInfo) -> tuple[StateTensor, ...]:
    """The model's state pairs as served (empty: a stateless model), in input order; ``shape``
    is what one request's engine run takes (with its batch of 1 where the model has a batch
    axis, which ``TensorSpec.dims`` leave out). Only an ONNX graph is read for them: a user's
    repository model is served as its config says."""
    if not info.runs_onnx or info.source is not None:
        return ()
    pairs = state_pairs(info)
    lead = (1,) if info.batched else ()
    return tuple(
        StateTensor(
            s.name, pairs[s.name], (*lead, *state_shape(s)), TRITON_TO_NUMPY[s.triton_dtype]
        )
        for s in info.inputs
        if s.name in pairs
    )


def served_view(info: OnnxModelInfo) -> OnnxModelInfo:
    """``info`` as a client sees it served: without the state inputs and outputs."""
    states = state_tensors(info)
    if not states:
        return info
    hidden = {t.input for t in states} | {t.output for t in states}
    return replace(
        info,
        inputs=tuple(s for s in info.inputs if s.name not in hidden),
        outputs=tuple(s for s in info.outputs if s.name not in hidden),
    )


def refuse_state(info: OnnxModelInfo, command: str) -> None:
    """A one-line ``ConfigError`` where ``command`` (``sweep``, ``tune``) would measure a model
    that carries state: their configurations use the dynamic batcher and their loads send no
    sequences, so the state inputs would be sent as random data and the figures would not be
    the model's. ``tritonlab run`` measures it with sequences (``experiments/sequence_plan``)."""
    if states := state_tensors(info):
        words = ", ".join(f"{t.input} -> {t.output}" for t in states)
        raise ConfigError(
            f"{info.path.name} carries state ({words}): `tritonlab {command}` cannot serve it "
            "through the sequence batcher; measure it with `tritonlab run` (sequences of "
            "requests, its configurations compared by how they share the instances)"
        )
