"""Check a model that carries state over a whole sequence, against onnxruntime carrying it too.

A stateful model (``models/state_pairs.py``) is served by Triton's sequence batcher and its
state kept by the backend adapter, so one request proves little: the answer of a sequence's
first request is the same whether or not the server carries the state. This check sends one
sequence of ``SEQUENCE_CHECK_REQUESTS`` requests (one sequence id, start on the first, end on
the last), each with its own inputs, and compares every answer with onnxruntime run in-process
on the same inputs with the state carried from the previous answer. A server that reset the
state, or kept another sequence's, fails at the request where the answers part.
"""

from __future__ import annotations

import secrets
import statistics
import time

import numpy as np

from tritonlab.client.infer import (
    Against,
    InferCheck,
    check_metadata,
    client_module,
    compare_outputs,
    request_tensors,
    served_metadata,
)
from tritonlab.errors import ClientError
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.state_pairs import served_view, state_tensors
from tritonlab.server.endpoint import ServerEndpoint

SEQUENCE_CHECK_REQUESTS = 6


def sequence_check(
    endpoint: ServerEndpoint,
    model_name: str,
    info: OnnxModelInfo,
    protocol: str,
    inputs: ModelInputs,
    engine: str = "onnxruntime",
    precision: str = "f32",
) -> InferCheck:
    """One sequence over ``protocol``, every answer checked; ``ClientError`` names the request
    and the output where the server and onnxruntime part."""
    from tritonclient.utils import InferenceServerException

    from tritonlab.models.ort_session import cpu_session

    served = served_view(info)
    states = state_tensors(info)
    session = cpu_session(info.path)
    names = [s.name for s in info.outputs]
    held = {t.input: np.zeros(t.shape, dtype=t.dtype) for t in states}
    module = client_module(protocol)
    client = module.InferenceServerClient(endpoint.url(protocol))
    against = Against("onnxruntime", model_name, protocol, engine, precision)
    sequence_id = 1 + secrets.randbelow(2**31)
    trips: list[float] = []
    widest = (0.0, 0.0, 0.0)
    try:
        check_metadata(served_metadata(client, model_name, protocol), served, model_name)
        for k in range(SEQUENCE_CHECK_REQUESTS):
            arrays = inputs.batch(1, seed=k)
            expected = dict(zip(names, session.run(names, arrays | held), strict=True))
            held = {t.input: expected[t.output] for t in states}
            started = time.perf_counter()
            result = client.infer(
                model_name,
                request_tensors(module, served, arrays),
                outputs=[module.InferRequestedOutput(s.name) for s in served.outputs],
                sequence_id=sequence_id,
                sequence_start=k == 0,
                sequence_end=k == SEQUENCE_CHECK_REQUESTS - 1,
            )
            trips.append((time.perf_counter() - started) * 1e3)
            step = f"request {k + 1} of a {SEQUENCE_CHECK_REQUESTS}-request sequence"
            compared = compare_outputs(result, expected, served.outputs, against, step)
            widest = (
                max(widest[0], compared.max_abs_diff),
                max(widest[1], compared.max_rel_diff),
                max(widest[2], compared.tolerance_abs),
            )
    except InferenceServerException as exc:
        raise ClientError(
            f"{protocol} sequence to '{model_name}' failed at request {len(trips) + 1}: "
            f"{exc.message()}"
        ) from exc
    finally:
        client.close()
    return InferCheck(
        protocol,
        model_name,
        {k: list(v) for k, v in inputs.sent_shapes.items()},
        compared.output_shapes,
        widest[0],
        widest[2],
        statistics.median(trips),
        engine=engine,
        max_rel_diff=widest[1],
        sequence_requests=SEQUENCE_CHECK_REQUESTS,
    )
