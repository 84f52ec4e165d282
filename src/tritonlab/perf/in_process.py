"""Run the ONNX model in this process with onnxruntime, to time the bare compute per batch size.

This is the reference the serving numbers are compared with: what one execution costs without
Triton, the Python backend or the network, with the backend's session options (one intra-op
thread, no spinning). Times are medians of a hot loop, so they are a lower bound.
"""

from __future__ import annotations

import statistics
import time

from tritonlab.client.infer import make_inputs
from tritonlab.models.inspect import OnnxModelInfo


def time_in_process(
    info: OnnxModelInfo, batch_sizes: list[int], iterations: int = 300, threads: int = 1
) -> dict[int, float]:
    """Median microseconds per execution for each batch size."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(info.path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in info.outputs]
    result = {}
    for batch in batch_sizes:
        feed = make_inputs(info, batch_size=batch)
        for _ in range(20):
            session.run(names, feed)
        samples = []
        for _ in range(iterations):
            start = time.perf_counter_ns()
            session.run(names, feed)
            samples.append(time.perf_counter_ns() - start)
        result[batch] = statistics.median(samples) / 1e3
    return result
