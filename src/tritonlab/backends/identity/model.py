"""A Python-based Triton backend ``identity``: echoes each input as the output at its position.

It measures what the Python backend itself costs (stub IPC, tensor wrapping), so that the
``onnxruntime`` adapter's own cost can be separated out in the adapter benchmark. When an
output's configured last dim is smaller than its input's, the echo is truncated to it (a view,
no copy), so the identity model can move exactly the bytes the model under test moves.
"""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The ``identity`` backend's model: each input echoed as the output at its position."""

    def initialize(self, args):
        """Pair each configured input with its output and that output's last dim (to cut to)."""
        config = json.loads(args["model_config"])
        self.pairs = [
            (i["name"], o["name"], int(o["dims"][-1]) if o.get("dims") else None)
            for i, o in zip(config["input"], config["output"], strict=False)
        ]

    def execute(self, requests):
        """One response per request: each input returned as its paired output, cut to its dim."""
        responses = []
        for request in requests:
            arrays = {t.name(): t.as_numpy() for t in request.inputs()}
            outputs = []
            for inp, out, last in self.pairs:
                data = arrays[inp]
                if last is not None and 0 < last < data.shape[-1]:
                    data = data[..., :last]
                outputs.append(pb_utils.Tensor(out, data))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
