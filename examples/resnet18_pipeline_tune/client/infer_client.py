#!/usr/bin/env python3
"""Minimal Triton inference client: one request, shapes checked, output compared with onnxruntime.

Usage (with the server from scripts/start_server.sh running):
    python client/infer_client.py                      # gRPC, model from this project
    python client/infer_client.py --protocol http --url 127.0.0.1:8000

It reads the server's model metadata, takes the samples perf_analyzer sent
(inputs/perf_data.json: valid token ids, masks, the shapes the run used) or else random values of
the right shape and dtype, sends one request, checks every output's shape, and compares the
values with onnxruntime run in this process on the same input (models/<model>/1/model.onnx).
A model that carries state is sent a sequence of one request (its state starts from zeros).
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = 'pipeline'
NUMPY_TYPES = {
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "BOOL": np.bool_,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    parser.add_argument(
        "--url", default=None, help="host:port (default 127.0.0.1:8001 gRPC, :8000 HTTP)"
    )
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()

    if args.protocol == "grpc":
        import tritonclient.grpc as client_module
    else:
        import tritonclient.http as client_module
    url = args.url or ("127.0.0.1:8001" if args.protocol == "grpc" else "127.0.0.1:8000")
    client = client_module.InferenceServerClient(url)
    if args.protocol == "grpc":
        meta = client.get_model_metadata(args.model, as_json=True)
        config = client.get_model_config(args.model, as_json=True)["config"]
    else:
        meta = client.get_model_metadata(args.model)
        config = client.get_model_config(args.model)
    batched = int(config.get("max_batch_size", 0)) > 0

    rng = np.random.default_rng(0)
    samples_file = HERE / "inputs" / "perf_data.json"
    samples = json.loads(samples_file.read_text())["data"] if samples_file.exists() else None
    feed, request_inputs = {}, []
    for tensor in meta["inputs"]:
        shape = [int(d) for d in tensor["shape"]]
        if batched:
            shape = [args.batch_size, *shape[1:]]
        shape = [d if d > 0 else 1 for d in shape]
        dtype = NUMPY_TYPES[tensor["datatype"]]
        if samples:
            picked = [samples[i % len(samples)][tensor["name"]] for i in range(args.batch_size)]
            arrays = [
                np.frombuffer(base64.b64decode(p["b64"]), dtype=dtype).reshape(p["shape"])
                for p in picked
            ]
            data = np.stack(arrays) if batched else arrays[0]
        elif dtype is np.bool_:
            data = rng.random(shape) > 0.5
        elif np.issubdtype(dtype, np.floating):
            data = rng.standard_normal(shape).astype(dtype)
        else:
            data = rng.integers(0, 8, size=shape).astype(dtype)
        feed[tensor["name"]] = data
        request = client_module.InferInput(tensor["name"], list(data.shape), tensor["datatype"])
        request.set_data_from_numpy(data)
        request_inputs.append(request)
    # A model that carries state (served by the sequence batcher, its state kept in the server)
    # is sent one sequence of one request: it starts (state from zeros) and ends there.
    sequence = json.loads(
        config.get("parameters", {}).get("tritonlab_sequence", {}).get("string_value") or "{}"
    )
    if "sequence_batching" in config:
        # a random id: a fixed one would join a sequence another client (perf_analyzer numbers
        # its sequences from 1) holds open on the same server
        sequence_id = 1 + secrets.randbelow(2**31)
        result = client.infer(
            args.model,
            request_inputs,
            sequence_id=sequence_id,
            sequence_start=True,
            sequence_end=True,
        )
    else:
        result = client.infer(args.model, request_inputs)

    onnx_file = HERE / "models" / args.model / "1" / "model.onnx"
    reference = None
    if onnx_file.exists():
        import onnxruntime as ort

        session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
        names = [t["name"] for t in meta["outputs"]]
        # a per-sample scalar is declared [1] to Triton but is [] per sample in the graph
        ranks = {i.name: len(i.shape) for i in session.get_inputs()}
        graph_feed = {
            k: v.reshape(v.shape[: ranks[k]]) if v.ndim > ranks[k] else v for k, v in feed.items()
        }
        for state in sequence.get("states", []):  # the state a sequence starts from
            graph_feed[state["input"]] = np.zeros(state["shape"], dtype=state["dtype"])
        reference = dict(zip(names, session.run(names, graph_feed), strict=True))
    worst = 0.0
    for tensor in meta["outputs"]:
        got = result.as_numpy(tensor["name"])
        expected_rank = len(tensor["shape"])
        if got is None or got.ndim != expected_rank:
            print(f"FAIL: output {tensor['name']} has shape {None if got is None else got.shape}")
            return 1
        line = f"output {tensor['name']}: shape {list(got.shape)} {tensor['datatype']}"
        if reference is not None:
            want = reference[tensor["name"]]
            if got.size == want.size:
                got = got.reshape(want.shape)
            diff = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
            worst = max(worst, diff)
            line += f", max abs diff vs onnxruntime {diff:.3g}"
        print(line)
    if worst > args.tolerance:
        print(f"FAIL: differs from onnxruntime by {worst:.3g} (tolerance {args.tolerance:g})")
        return 1
    print(f"OK: {args.protocol} request to {args.model} at {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
