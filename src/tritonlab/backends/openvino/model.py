"""A Python-based Triton backend named ``openvino``: serves the same ``model.onnx`` with OpenVINO.

OpenVINO reads ONNX directly (no second file in the repository). Config parameters, under
OpenVINO's own property names (what the native Triton OpenVINO backend passes through):
``INFERENCE_PRECISION_HINT`` (``f32``, ``bf16`` or ``f16``; always set by tritonlab, since on a
processor with bf16 units OpenVINO's CPU default is bf16; the precision actually used is printed
to the server log), ``INFERENCE_NUM_THREADS`` (0 = OpenVINO's default) and ``NUM_STREAMS``
(tritonlab writes 1: Triton's instances are the parallelism). Batching, splitting and profiling
are shared with the onnxruntime backend (``tritonlab.backends.adapter``).
"""

import sys

import openvino as ov
import triton_python_backend_utils as pb_utils

from tritonlab.backends.adapter import EngineModel, int_param, str_param

PRECISIONS = ("f32", "bf16", "f16")


class TritonPythonModel(EngineModel):
    """The ONNX model compiled and served by OpenVINO on the CPU."""

    engine_name = "openvino"

    def open_engine(self, path, params, kind, device_id, input_names, output_names):
        """Compile the model for OpenVINO's CPU plugin with the config's precision and threads; the
        graph's (input, output) names (else ``TritonModelException``)."""
        if kind == "GPU":
            raise pb_utils.TritonModelException(
                "the openvino backend runs on the CPU here; use KIND_CPU (or backend onnxruntime "
                "with onnxruntime-gpu for KIND_GPU)"
            )
        precision = str_param(params, "INFERENCE_PRECISION_HINT", "f32")
        if precision not in PRECISIONS:
            raise pb_utils.TritonModelException(
                f"parameter INFERENCE_PRECISION_HINT must be one of {', '.join(PRECISIONS)}, "
                f"got {precision!r}"
            )
        properties = {
            "INFERENCE_PRECISION_HINT": precision,
            "NUM_STREAMS": str(max(1, int_param(params, "NUM_STREAMS", 1))),
            "PERFORMANCE_HINT": "LATENCY",
        }
        threads = int_param(params, "INFERENCE_NUM_THREADS", 0)
        if threads > 0:
            properties["INFERENCE_NUM_THREADS"] = str(threads)
        core = ov.Core()
        compiled = core.compile_model(core.read_model(path), "CPU", properties)
        self.request = compiled.create_infer_request()
        self.ports = {name: port for port in compiled.outputs for name in port.get_names()}
        graph_inputs = {name for port in compiled.inputs for name in port.get_names()}
        used = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
        print(
            f"tritonlab-openvino {self.__class__.__module__} precision asked={precision} "
            f"used={used} threads={compiled.get_property('INFERENCE_NUM_THREADS')} "
            f"streams={compiled.get_property('NUM_STREAMS')} openvino={ov.get_version()}",
            file=sys.stderr,
            flush=True,
        )
        self.compiled = compiled
        return graph_inputs, set(self.ports)

    def run(self, feed):
        """One inference of ``feed``; the outputs in ``self.output_names`` order."""
        results = self.request.infer(feed)
        return [results[self.ports[name]] for name in self.output_names]

    def finalize(self):
        """Report the profile (if any) and drop the compiled model and its request."""
        super().finalize()
        self.request = None
        self.compiled = None
