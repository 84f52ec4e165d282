"""Small Triton repositories for the repository-input tests, written with protobuf.

``scorer``: a user-written ONNX config (non-default tensor names, max_batch_size 8, 2 instances
already, dynamic batching at 100 µs, ``platform: "onnxruntime_onnx"``); ``double``: a Python
model (y = 2x); ``chain``: an ensemble double -> scorer; ``bls_chain``: a Python model that
calls double then scorer through BLS; ``engine_plan``: a TensorRT plan the bundled server
cannot serve. Each is small, so a test on the real server stays short.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

FEATURES = 256
CLASSES = 10

DOUBLE_PY = '''"""y = 2 x, one response per request."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            out = pb_utils.Tensor("Y", (2.0 * x).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
'''

BLS_PY = '''"""double, then scorer, through BLS."""
import triton_python_backend_utils as pb_utils

STEPS = ("double", "scorer")


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            doubled = pb_utils.InferenceRequest(
                model_name="double", requested_output_names=["Y"], inputs=[x]
            ).exec()
            if doubled.has_error():
                raise pb_utils.TritonModelException(doubled.error().message())
            y = pb_utils.get_output_tensor_by_name(doubled, "Y")
            features = pb_utils.Tensor("features_in", y.as_numpy())
            scored = pb_utils.InferenceRequest(
                model_name="scorer", requested_output_names=["output"], inputs=[features]
            ).exec()
            if scored.has_error():
                raise pb_utils.TritonModelException(scored.error().message())
            out = pb_utils.get_output_tensor_by_name(scored, "output")
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("SCORES", out.as_numpy())]
                )
            )
        return responses
'''


def _write_config(folder: Path, config: dict[str, object]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    message = json_format.ParseDict(config, model_config_pb2.ModelConfig())
    (folder / "config.pbtxt").write_text(text_format.MessageToString(message))


def _tensor(name: str, dims: list[int]) -> dict[str, object]:
    return {"name": name, "data_type": "TYPE_FP32", "dims": dims}


def write_scorer_onnx(path: Path) -> None:
    """[batch, 256] ``features_in`` -> [batch, 10] ``output`` (MatMul, fixed weights)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(
        rng.standard_normal((FEATURES, CLASSES)).astype(np.float32), name="W"
    )
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["features_in", "W"], ["output"])],
        "scorer",
        [helper.make_tensor_value_info("features_in", TensorProto.FLOAT, ["batch", FEATURES])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", CLASSES])],
        initializer=[w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def write_test_repository(root: Path) -> Path:
    """Write every model named in the module docstring into ``root``; return ``root``."""
    write_scorer_onnx(root / "scorer" / "1" / "model.onnx")
    _write_config(
        root / "scorer",
        {
            "name": "scorer",
            "platform": "onnxruntime_onnx",
            "max_batch_size": 8,
            "input": [_tensor("features_in", [FEATURES])],
            "output": [_tensor("output", [CLASSES])],
            "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
            "dynamic_batching": {"max_queue_delay_microseconds": 100},
            "parameters": {"intra_op_thread_count": {"string_value": "1"}},
        },
    )
    (root / "double" / "1").mkdir(parents=True, exist_ok=True)
    (root / "double" / "1" / "model.py").write_text(DOUBLE_PY)
    _write_config(
        root / "double",
        {
            "name": "double",
            "backend": "python",
            "max_batch_size": 8,
            "input": [_tensor("X", [FEATURES])],
            "output": [_tensor("Y", [FEATURES])],
            "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
        },
    )
    _write_config(
        root / "chain",
        {
            "name": "chain",
            "platform": "ensemble",
            "max_batch_size": 8,
            "input": [_tensor("X", [FEATURES])],
            "output": [_tensor("SCORES", [CLASSES])],
            "ensemble_scheduling": {
                "step": [
                    {
                        "model_name": "double",
                        "model_version": -1,
                        "input_map": {"X": "X"},
                        "output_map": {"Y": "doubled"},
                    },
                    {
                        "model_name": "scorer",
                        "model_version": -1,
                        "input_map": {"features_in": "doubled"},
                        "output_map": {"output": "SCORES"},
                    },
                ]
            },
        },
    )
    (root / "chain" / "1").mkdir(parents=True, exist_ok=True)
    (root / "bls_chain" / "1").mkdir(parents=True, exist_ok=True)
    (root / "bls_chain" / "1" / "model.py").write_text(BLS_PY)
    _write_config(
        root / "bls_chain",
        {
            "name": "bls_chain",
            "backend": "python",
            "max_batch_size": 8,
            "input": [_tensor("X", [FEATURES])],
            "output": [_tensor("SCORES", [CLASSES])],
            "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
        },
    )
    (root / "engine_plan" / "1").mkdir(parents=True, exist_ok=True)
    (root / "engine_plan" / "1" / "model.plan").write_bytes(b"not a real engine")
    _write_config(
        root / "engine_plan",
        {
            "name": "engine_plan",
            "platform": "tensorrt_plan",
            "max_batch_size": 8,
            "input": [_tensor("x", [4])],
            "output": [_tensor("y", [4])],
        },
    )
    return root


def write_reference(path: Path, root: Path, samples: int = 3) -> Path:
    """An .npz of ``X`` and the ``SCORES`` ``chain`` must answer (2x, then the scorer's
    MatMul, computed here in numpy from the scorer's ONNX weights)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(root / "scorer" / "1" / "model.onnx")).graph
    w = numpy_helper.to_array(graph.initializer[0])
    x = np.random.default_rng(5).standard_normal((samples, FEATURES)).astype(np.float32)
    np.savez(path, X=x, SCORES=((2.0 * x) @ w).astype(np.float32))
    return path


def tree_digest(root: Path) -> str:
    """The sha256 of every file under ``root`` (names, contents, modes): the byte-identity check
    of a repository given as input."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
            digest.update(oct(path.stat().st_mode).encode())
    return digest.hexdigest()
