"""Small ONNX models, built with ``onnx.helper`` (no torch), for tests of "any model a user brings".

tritonlab has to cope with whatever ONNX file a user points it at, not only the built-in demo
model. Each function here writes one model that exercises a shape of input or output users bring:
several integer inputs that index embedding tables (a token classifier), fixed dimensions with no
batch axis, float16 and bfloat16 tensors, several outputs of different types, bool / int32 /
uint8 inputs, string tensors, and index inputs whose valid range differs per input or that reach
their ``Gather`` through a ``Cast``.

Every function has the signature ``def <name>(path: Path) -> Path``: it writes the model to
``path`` and returns it. The models use opset 17 and IR version 8 (loadable by onnxruntime), and
their weights come from a fixed numpy seed, so the same call always writes the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8

BATCH = "batch"
SEQUENCE = "sequence"

# Sizes of the index tables, for tests that build valid and out-of-range inputs.
TOKEN_CLASSIFIER_VOCAB = 1000
TOKEN_CLASSIFIER_TYPES = 2
POSITION_IDS_VOCAB = 500
POSITION_IDS_MAX_POSITIONS = 64
CAST_BEFORE_GATHER_VOCAB = 300

_Dim = int | str


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _weights(
    name: str, shape: tuple[int, ...], seed: int, dtype: type = np.float32
) -> onnx.TensorProto:
    values = (_rng(seed).standard_normal(shape) * 0.1).astype(dtype)
    return numpy_helper.from_array(values, name)


def _const(name: str, values: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(values, name)


def _vi(name: str, elem_type: int, shape: list[_Dim]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def _save(
    path: Path,
    name: str,
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: list[onnx.TensorProto] | None = None,
) -> Path:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers or [])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="tritonlab-tests",
        ir_version=IR_VERSION,
    )
    onnx.checker.check_model(model, full_check=True)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def token_classifier(path: Path) -> Path:
    """BERT-like inputs -> masked mean of token + type embeddings -> ``logits`` [batch, 4].

    ``input_ids`` must be < 1000 and ``token_type_ids`` < 2; onnxruntime rejects an index out of
    range ("indices element out of data bounds").
    """
    ids_shape: list[_Dim] = [BATCH, SEQUENCE]
    nodes = [
        helper.make_node("Gather", ["word_embeddings", "input_ids"], ["word_emb"], axis=0),
        helper.make_node("Gather", ["type_embeddings", "token_type_ids"], ["type_emb"], axis=0),
        helper.make_node("Add", ["word_emb", "type_emb"], ["emb"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis_2"], ["mask_3d"]),
        helper.make_node("Mul", ["emb", "mask_3d"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis_1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask_f", "axis_1"], ["count"], keepdims=1),
        helper.make_node("Max", ["count", "one"], ["count_safe"]),
        helper.make_node("Div", ["summed", "count_safe"], ["pooled"]),
        helper.make_node("MatMul", ["pooled", "classifier"], ["logits"]),
    ]
    initializers = [
        _weights("word_embeddings", (TOKEN_CLASSIFIER_VOCAB, 16), seed=1),
        _weights("type_embeddings", (TOKEN_CLASSIFIER_TYPES, 16), seed=2),
        _weights("classifier", (16, 4), seed=3),
        _const("axis_1", np.array([1], dtype=np.int64)),
        _const("axis_2", np.array([2], dtype=np.int64)),
        _const("one", np.array(1.0, dtype=np.float32)),
    ]
    inputs = [
        _vi("input_ids", TensorProto.INT64, ids_shape),
        _vi("attention_mask", TensorProto.INT64, ids_shape),
        _vi("token_type_ids", TensorProto.INT64, ids_shape),
    ]
    outputs = [_vi("logits", TensorProto.FLOAT, [BATCH, 4])]
    return _save(path, "token_classifier", nodes, inputs, outputs, initializers)


def no_batch_axis(path: Path) -> Path:
    """``y`` [3, 2] = ``x`` [3, 8] @ W: fixed dimensions only, nothing symbolic."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    initializers = [_weights("w", (8, 2), seed=4)]
    return _save(
        path,
        "no_batch_axis",
        nodes,
        [_vi("x", TensorProto.FLOAT, [3, 8])],
        [_vi("y", TensorProto.FLOAT, [3, 2])],
        initializers,
    )


def fp16_mlp(path: Path) -> Path:
    """float16 end to end: ``y`` [batch, 16] = Relu(``x`` [batch, 32] @ W16)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["hidden"]),
        helper.make_node("Relu", ["hidden"], ["y"]),
    ]
    initializers = [_weights("w", (32, 16), seed=5, dtype=np.float16)]
    return _save(
        path,
        "fp16_mlp",
        nodes,
        [_vi("x", TensorProto.FLOAT16, [BATCH, 32])],
        [_vi("y", TensorProto.FLOAT16, [BATCH, 16])],
        initializers,
    )


def multi_output(path: Path) -> Path:
    """Three outputs: ``y`` float [batch, 8], ``argmax`` int64 [batch], ``norm`` [batch, 1]."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["y"]),
        helper.make_node("ArgMax", ["y"], ["argmax"], axis=1, keepdims=0),
        helper.make_node("ReduceL2", ["y"], ["norm"], axes=[1], keepdims=1),
    ]
    initializers = [_weights("w", (16, 8), seed=6)]
    return _save(
        path,
        "multi_output",
        nodes,
        [_vi("x", TensorProto.FLOAT, [BATCH, 16])],
        [
            _vi("y", TensorProto.FLOAT, [BATCH, 8]),
            _vi("argmax", TensorProto.INT64, [BATCH]),
            _vi("norm", TensorProto.FLOAT, [BATCH, 1]),
        ],
        initializers,
    )


def fp16_multi_output(path: Path) -> Path:
    """FP16 in, three outputs of three dtypes: ``y`` FP16 [batch, 16] = Relu(x @ W16),
    ``argmax`` INT64 [batch] and ``norm`` FP32 [batch, 1] of ``y`` cast to float."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["hidden"]),
        helper.make_node("Relu", ["hidden"], ["y"]),
        helper.make_node("Cast", ["y"], ["y32"], to=TensorProto.FLOAT),
        helper.make_node("ArgMax", ["y32"], ["argmax"], axis=1, keepdims=0),
        helper.make_node("ReduceL2", ["y32"], ["norm"], axes=[1], keepdims=1),
    ]
    initializers = [_weights("w", (32, 16), seed=7, dtype=np.float16)]
    return _save(
        path,
        "fp16_multi_output",
        nodes,
        [_vi("x", TensorProto.FLOAT16, [BATCH, 32])],
        [
            _vi("y", TensorProto.FLOAT16, [BATCH, 16]),
            _vi("argmax", TensorProto.INT64, [BATCH]),
            _vi("norm", TensorProto.FLOAT, [BATCH, 1]),
        ],
        initializers,
    )


def mixed_dtypes(path: Path) -> Path:
    """bool, int32 and uint8 inputs: ``out`` = pixels / 255 + count * flag, float32 [batch, 4]."""
    nodes = [
        helper.make_node("Cast", ["pixels"], ["pixels_f"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["pixels_f", "scale"], ["pixels_scaled"]),
        helper.make_node("Cast", ["count"], ["count_f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["flag"], ["flag_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["count_f", "flag_f"], ["counted"]),
        helper.make_node("Add", ["pixels_scaled", "counted"], ["out"]),
    ]
    initializers = [_const("scale", np.array(255.0, dtype=np.float32))]
    return _save(
        path,
        "mixed_dtypes",
        nodes,
        [
            _vi("flag", TensorProto.BOOL, [BATCH, 4]),
            _vi("count", TensorProto.INT32, [BATCH, 4]),
            _vi("pixels", TensorProto.UINT8, [BATCH, 4]),
        ],
        [_vi("out", TensorProto.FLOAT, [BATCH, 4])],
        initializers,
    )


def string_input(path: Path) -> Path:
    """A STRING input passed through ``Identity`` (for tests that refuse string tensors)."""
    nodes = [helper.make_node("Identity", ["text"], ["text_out"])]
    return _save(
        path,
        "string_input",
        nodes,
        [_vi("text", TensorProto.STRING, [BATCH, 1])],
        [_vi("text_out", TensorProto.STRING, [BATCH, 1])],
    )


def bf16_input(path: Path) -> Path:
    """A BFLOAT16 input cast to float: ``y`` float32 [batch, 4]."""
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)]
    return _save(
        path,
        "bf16_input",
        nodes,
        [_vi("x", TensorProto.BFLOAT16, [BATCH, 4])],
        [_vi("y", TensorProto.FLOAT, [BATCH, 4])],
    )


def position_ids_model(path: Path) -> Path:
    """Two index inputs with different ranges: ``input_ids`` < 500, ``position_ids`` < 64.

    ``h`` [batch, 8] = mean over the sequence of token + position embeddings.
    """
    ids_shape: list[_Dim] = [BATCH, SEQUENCE]
    nodes = [
        helper.make_node("Gather", ["token_table", "input_ids"], ["tok"], axis=0),
        helper.make_node("Gather", ["position_table", "position_ids"], ["pos"], axis=0),
        helper.make_node("Add", ["tok", "pos"], ["emb"]),
        helper.make_node("ReduceMean", ["emb"], ["h"], axes=[1], keepdims=0),
    ]
    initializers = [
        _weights("token_table", (POSITION_IDS_VOCAB, 8), seed=7),
        _weights("position_table", (POSITION_IDS_MAX_POSITIONS, 8), seed=8),
    ]
    return _save(
        path,
        "position_ids_model",
        nodes,
        [
            _vi("input_ids", TensorProto.INT64, ids_shape),
            _vi("position_ids", TensorProto.INT64, ids_shape),
        ],
        [_vi("h", TensorProto.FLOAT, [BATCH, 8])],
        initializers,
    )


def cast_before_gather(path: Path) -> Path:
    """``ids`` int32 reaches ``Gather`` (table [300, 8]) through a ``Cast`` to int64.

    Output ``h`` [batch, 8] is the mean over the sequence of the gathered rows.
    """
    nodes = [
        helper.make_node("Cast", ["ids"], ["ids64"], to=TensorProto.INT64),
        helper.make_node("Gather", ["table", "ids64"], ["emb"], axis=0),
        helper.make_node("ReduceMean", ["emb"], ["h"], axes=[1], keepdims=0),
    ]
    initializers = [_weights("table", (CAST_BEFORE_GATHER_VOCAB, 8), seed=9)]
    return _save(
        path,
        "cast_before_gather",
        nodes,
        [_vi("ids", TensorProto.INT32, [BATCH, SEQUENCE])],
        [_vi("h", TensorProto.FLOAT, [BATCH, 8])],
        initializers,
    )


ALL_MODELS = {
    "token_classifier": token_classifier,
    "no_batch_axis": no_batch_axis,
    "fp16_mlp": fp16_mlp,
    "multi_output": multi_output,
    "mixed_dtypes": mixed_dtypes,
    "string_input": string_input,
    "bf16_input": bf16_input,
    "position_ids_model": position_ids_model,
    "cast_before_gather": cast_before_gather,
}


def scalar_control(path: Path) -> Path:
    """A rank-0 int64 input in a model without a batch axis, as a VAD's sample rate is:
    ``y`` [1, 64] = ``x`` [1, 64] * float(``sr``), and a rank-0 output ``energy`` = sum(y)."""
    nodes = [
        helper.make_node("Cast", ["sr"], ["sr_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "sr_f"], ["y"]),
        helper.make_node("ReduceSum", ["y"], ["energy"], keepdims=0),
    ]
    return _save(
        path,
        "scalar_control",
        nodes,
        [_vi("x", TensorProto.FLOAT, [1, 64]), _vi("sr", TensorProto.INT64, [])],
        [_vi("y", TensorProto.FLOAT, [1, 64]), _vi("energy", TensorProto.FLOAT, [])],
    )


SAMPLE_RATE = 16000


def sample_rate_branch(path: Path) -> Path:
    """A VAD-like branch on a rank-0 int64 ``sr``: ``If(Equal(sr, 16000))`` doubles ``x``
    [1, 64]; any other rate takes a branch that reads column 100 of ``x``, which fails (it has
    64), as a branch meant for other input sizes does."""
    then_graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["doubled"])],
        "expected_rate",
        [],
        [_vi("doubled", TensorProto.FLOAT, [1, 64])],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Gather", ["x", "column"], ["picked"], axis=1)],
        "other_rate",
        [],
        [_vi("picked", TensorProto.FLOAT, [1, 1])],
        initializer=[_const("column", np.array([100], dtype=np.int64))],
    )
    nodes = [
        helper.make_node("Equal", ["sr", "rate"], ["is_rate"], name="is_16k"),
        helper.make_node("If", ["is_rate"], ["y"], then_branch=then_graph, else_branch=else_graph),
    ]
    return _save(
        path,
        "sample_rate_branch",
        nodes,
        [_vi("x", TensorProto.FLOAT, [1, 64]), _vi("sr", TensorProto.INT64, [])],
        [_vi("y", TensorProto.FLOAT, ["rows", "columns"])],
        [_const("rate", np.array(SAMPLE_RATE, dtype=np.int64))],
    )


OPEN: Any = None  # an unnamed dynamic dim, as exporters often leave them


def streaming_state(path: Path) -> Path:
    """A streaming model that carries state as a VAD does: ``x`` [?, 32] (an open leading dim,
    the stream's batch) and ``state`` [2, ?, 16] in, ``prob`` [?, 1] and ``stateN`` [?, ?, ?]
    out. ``stateN = tanh(state * 0.9 + mean(x) per row)`` and ``prob = sigmoid(sum of the new
    state's first layer)``, so each answer depends on every earlier request of its sequence."""
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["x_mean"], axes=[1], keepdims=1),  # [?, 1]
        helper.make_node("Mul", ["state", "decay"], ["decayed"]),  # [2, ?, 16]
        helper.make_node("Add", ["decayed", "x_mean"], ["mixed"]),
        helper.make_node("Tanh", ["mixed"], ["stateN"]),
        helper.make_node("Gather", ["stateN", "first"], ["layer"], axis=0),  # [?, 16]
        helper.make_node("ReduceSum", ["layer", "axes_1"], ["logit"], keepdims=1),  # [?, 1]
        helper.make_node("Sigmoid", ["logit"], ["prob"]),
    ]
    return _save(
        path,
        "streaming_state",
        nodes,
        [_vi("x", TensorProto.FLOAT, [OPEN, 32]), _vi("state", TensorProto.FLOAT, [2, OPEN, 16])],
        [_vi("prob", TensorProto.FLOAT, [OPEN, 1]), _vi("stateN", TensorProto.FLOAT, [OPEN] * 3)],
        [
            _const("axes_1", np.array([1], dtype=np.int64)),
            _const("decay", np.array(0.9, dtype=np.float32)),
            _const("first", np.array(0, dtype=np.int64)),
        ],
    )


def batched_state(path: Path) -> Path:
    """A recurrent cell with a batch axis: ``x`` and ``h`` [batch, 8] in, ``y`` [batch, 1] and
    ``hn`` [batch, 8] out, ``hn = tanh(h * 0.5 + x)``, ``y = sum(hn)``."""
    nodes = [
        helper.make_node("Mul", ["h", "half"], ["decayed"]),
        helper.make_node("Add", ["decayed", "x"], ["mixed"]),
        helper.make_node("Tanh", ["mixed"], ["hn"]),
        helper.make_node("ReduceSum", ["hn", "axes_1"], ["y"], keepdims=1),
    ]
    return _save(
        path,
        "batched_state",
        nodes,
        [_vi("x", TensorProto.FLOAT, ["batch", 8]), _vi("h", TensorProto.FLOAT, ["batch", 8])],
        [_vi("y", TensorProto.FLOAT, ["batch", 1]), _vi("hn", TensorProto.FLOAT, ["batch", 8])],
        [
            _const("half", np.array(0.5, dtype=np.float32)),
            _const("axes_1", np.array([1], dtype=np.int64)),
        ],
    )
