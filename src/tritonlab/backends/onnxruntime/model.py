"""A Python-based Triton backend named ``onnxruntime``: serves ``<model>/<version>/model.onnx``.

Triton loads this file for every model whose config says ``backend: "onnxruntime"`` when no
native ``libtriton_onnxruntime.so`` is present (on an NGC container the native backend takes
over). Config parameters (the native backend's names): ``intra_op_thread_count``,
``inter_op_thread_count`` (0 = onnxruntime's default), ``allow_spinning`` ("0"/"1", default "0":
spinning threads steal CPU from other instances and the load generator on small machines).
Batching, splitting and profiling live in ``tritonlab.backends.adapter``.
"""

import onnxruntime as ort
import triton_python_backend_utils as pb_utils

from tritonlab.backends.adapter import FALLBACK_MARKER, EngineModel, int_param

__all__ = ["FALLBACK_MARKER", "TritonPythonModel"]


class TritonPythonModel(EngineModel):
    """The ONNX model served by an in-process onnxruntime session."""

    engine_name = "onnxruntime"

    def open_engine(self, path, params, kind, device_id, input_names, output_names):
        """Open an onnxruntime session with the config's thread and spinning parameters.
        Returns the graph's (input, output) names; ``TritonModelException`` for GPU without CUDA."""
        options = ort.SessionOptions()
        intra = int_param(params, "intra_op_thread_count", 0)
        inter = int_param(params, "inter_op_thread_count", 0)
        if intra > 0:
            options.intra_op_num_threads = intra
        if inter > 0:
            options.inter_op_num_threads = inter
        spinning = "1" if int_param(params, "allow_spinning", 0) else "0"
        options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
        options.add_session_config_entry("session.inter_op.allow_spinning", spinning)
        if kind == "GPU":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise pb_utils.TritonModelException(
                    "KIND_GPU instance needs onnxruntime-gpu (CUDAExecutionProvider); "
                    "install onnxruntime-gpu or use KIND_CPU"
                )
            providers = [
                ("CUDAExecutionProvider", {"device_id": device_id}),
                "CPUExecutionProvider",
            ]
        else:
            providers = ["CPUExecutionProvider"]
        self.session = ort.InferenceSession(path, options, providers=providers)
        return (
            {i.name for i in self.session.get_inputs()},
            {o.name for o in self.session.get_outputs()},
        )

    def run(self, feed):
        """The session's outputs for ``feed``, in ``self.output_names`` order."""
        return self.session.run(self.output_names, feed)

    def finalize(self):
        """Report the profile (if any) and drop the session."""
        super().finalize()
        self.session = None
