"""A Python-based Triton backend ``identity``: returns each input as the same-named output.

It measures what the Python backend itself costs (stub IPC, tensor wrapping) so that the
``onnxruntime`` adapter's own cost can be separated out in the adapter benchmark. The config's
outputs are matched to inputs by position.
"""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.pairs = [
            (i["name"], o["name"]) for i, o in zip(config["input"], config["output"], strict=False)
        ]

    def execute(self, requests):
        responses = []
        for request in requests:
            tensors = {t.name(): t for t in request.inputs()}
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor(out, tensors[inp].as_numpy()) for inp, out in self.pairs
                    ]
                )
            )
        return responses
