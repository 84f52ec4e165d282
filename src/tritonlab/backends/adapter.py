"""What tritonlab's Python-based backends share: a Triton model that runs ``model.onnx`` through
an in-process engine (onnxruntime, OpenVINO), batches the requests Triton hands it into one run,
and splits the outputs back into one response per request.

Each backend folder's ``model.py`` subclasses ``EngineModel`` with two methods: ``open_engine``
(load the file with the config's parameters) and ``run`` (one feed in, the outputs in the
config's order). The stub imports this module from the environment the server runs in (the one
tritonlab is installed in), so the hot path lives once.

The hot path (``execute``) avoids work per request: one request is run without concatenation,
names and dtypes are resolved once at load time, and outputs are split as zero-copy views.

With ``TRITONLAB_ADAPTER_PROFILE=1`` in the server's environment, each instance times its three
phases (read inputs, engine run, build responses) and prints the means to the server log when it
is unloaded; the adapter benchmark (benchmarks/adapter_overhead.py) reads them.

A config parameter ``tritonlab_planted_work_iterations`` (default 0: none) adds a fixed amount of
CPU work to every request: that many turns of an empty Python loop in the instance's process.
It exists for the calibration benchmark (benchmarks/calibration.py), which plants effects of
known size next to the configurations it compares; nothing tritonlab serves for a user sets it.

A config parameter ``tritonlab_scalar_tensors`` (a JSON list of names) marks the rank-0 inputs
and outputs of a model without batching: Triton serves them as [1] (it has no scalar tensors),
the engine takes and gives rank 0, and the adapter reshapes between the two.

A config parameter ``tritonlab_sequence`` (JSON) marks a model that carries state, served by
Triton's sequence batcher: its state pairs (input, output, starting shape and dtype) and the names
of the batcher's control inputs (start, end, sequence id). The adapter keeps each sequence's
state between its requests, zeros at a start, and drops it at the end. Triton's implicit state
(``sequence_batching.state``) would keep it in the server, but only backends written against
its C API (the native onnxruntime, TensorRT and PyTorch backends) can use it; the Python backend
has no call for it, so the state stays here, in the instance that serves the sequence.
"""

import json
import os
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils

# Printed to the server log each time a batch of requests is run one by one instead.
FALLBACK_MARKER = "tritonlab-adapter-fallback"
PLANTED_WORK_PARAM = "tritonlab_planted_work_iterations"
SCALARS_PARAM = "tritonlab_scalar_tensors"  # repository/config.py writes it
SEQUENCE_PARAM = "tritonlab_sequence"  # repository/config.py writes it
# The most sequences whose state one instance holds (least recently used dropped past it): far
# more than Triton keeps open per instance (its slots, or max_candidate_sequences).
MAX_HELD_SEQUENCES = 4096


def planted_work(iterations):
    """A fixed amount of CPU work: ``iterations`` turns of an empty loop."""
    for _ in range(iterations):
        pass


def int_param(params, key, default):
    """An integer model-config parameter; a bad value fails the load naming the key."""
    value = params.get(key, {}).get("string_value", "")
    try:
        return int(value) if value != "" else default
    except ValueError as exc:
        raise pb_utils.TritonModelException(
            f"parameter {key} must be an integer, got {value!r}"
        ) from exc


def str_param(params, key, default):
    """A string model-config parameter, ``default`` when absent or empty."""
    return params.get(key, {}).get("string_value", "") or default


class EngineModel:
    """A ``TritonPythonModel`` over one in-process engine (subclasses name the engine)."""

    engine_name = "engine"

    def open_engine(self, path, params, kind, device_id, input_names, output_names):
        """Load ``path``; return the graph's input and output names (for the config check)."""
        raise NotImplementedError

    def run(self, feed):
        """One run of ``feed`` (name -> array); the outputs in ``self.output_names`` order."""
        raise NotImplementedError

    def initialize(self, args):
        """Open the engine on the model file; check the config's tensor names against the graph.
        Raises ``TritonModelException`` (the load fails) for a missing file or an unknown name."""
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})
        filename = config.get("default_model_filename") or "model.onnx"
        path = os.path.join(args["model_repository"], args["model_version"], filename)
        if not os.path.exists(path):
            raise pb_utils.TritonModelException(f"model file not found: {path}")
        self.input_names = [i["name"] for i in config.get("input", [])]
        self.output_names = [o["name"] for o in config.get("output", [])]
        self.output_dtypes = [
            pb_utils.triton_string_to_numpy(o["data_type"]) for o in config.get("output", [])
        ]
        self.served_outputs = len(self.output_names)
        self.sequence = self._sequence_setup(params)
        kind = args.get("model_instance_kind", "CPU")
        device_id = int(args.get("model_instance_device_id", "0"))
        graph_inputs, graph_outputs = self.open_engine(
            path, params, kind, device_id, self.input_names, self.output_names
        )
        missing = [n for n in self.input_names if n not in graph_inputs]
        missing += [n for n in self.output_names if n not in graph_outputs]
        if missing:
            raise pb_utils.TritonModelException(
                f"config names tensors the ONNX graph does not have: {', '.join(missing)}"
            )
        # Triton has already checked each request's dtypes and shapes against the config; the
        # outputs are cast only where the graph's type differs from the configured one.
        self.batched = int(config.get("max_batch_size", 0)) > 0
        self.planted = max(0, int_param(params, PLANTED_WORK_PARAM, 0))
        try:
            scalars = set(json.loads(str_param(params, SCALARS_PARAM, "[]")))
        except (TypeError, ValueError) as exc:
            raise pb_utils.TritonModelException(
                f"parameter {SCALARS_PARAM} must be a JSON list of tensor names"
            ) from exc
        self.scalar_inputs = scalars & set(self.input_names)
        # output index -> True where the engine gives rank 0 and Triton expects [1]
        self.scalar_outputs = [name in scalars for name in self.output_names]
        if not any(self.scalar_outputs):
            self.scalar_outputs = []
        profiling = os.environ.get("TRITONLAB_ADAPTER_PROFILE") == "1"
        # batch size -> [executions, ns reading inputs, ns in the engine, ns building responses]
        self.profile: dict[int, list[int]] = {}
        if self.sequence is not None:
            self.execute = self._sequence_execute  # type: ignore[method-assign]
        elif profiling:
            self.execute = self._profiled_execute  # type: ignore[method-assign]
        self.name = args["model_instance_name"]

    def _run(self, feed, requests=1):
        if self.scalar_inputs:
            feed = {k: v.reshape(()) if k in self.scalar_inputs else v for k, v in feed.items()}
        outputs = self.run(feed)
        if self.planted:
            planted_work(self.planted * requests)
        outputs = [
            out if out.dtype == dtype else out.astype(dtype)
            for out, dtype in zip(outputs, self.output_dtypes, strict=True)
        ]
        if self.scalar_outputs:
            outputs = [
                out.reshape((1,)) if scalar else out
                for out, scalar in zip(outputs, self.scalar_outputs, strict=True)
            ]
        return outputs

    def _respond(self, outputs):
        return pb_utils.InferenceResponse(
            output_tensors=[
                pb_utils.Tensor(name, out)
                for name, out in zip(
                    self.output_names[: self.served_outputs],
                    outputs[: self.served_outputs],
                    strict=True,
                )
            ]
        )

    def _sequence_setup(self, params):
        """Read ``SEQUENCE_PARAM``: the state pairs join the engine's outputs (after the served
        ones), and each sequence's state lives in ``self.states``. None for a stateless model."""
        text = str_param(params, SEQUENCE_PARAM, "")
        if not text:
            return None
        try:
            value = json.loads(text)
            states = [
                (s["input"], s["output"], tuple(int(d) for d in s["shape"]), np.dtype(s["dtype"]))
                for s in value["states"]
            ]
            controls = {k: str(value["controls"][k]) for k in ("start", "end", "id")}
        except (TypeError, ValueError, KeyError) as exc:
            raise pb_utils.TritonModelException(
                f"parameter {SEQUENCE_PARAM} must hold states and controls ({exc})"
            ) from exc
        self.output_names += [output for _, output, _, _ in states]
        self.output_dtypes += [dtype for _, _, _, dtype in states]
        # sequence id -> {state input: its value}, least recently used first; a sequence's
        # requests all reach one instance. A sequence that never ends (its client gone, idled
        # out by Triton) would hold its state for ever: past MAX_HELD_SEQUENCES the least
        # recently used is dropped (its next request, if any, is answered with an error)
        self.states = {}
        return states, controls

    def _control(self, request, name):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is None:
            raise ValueError(f"request has no control input {name} (is sequence batching on?)")
        return int(tensor.as_numpy().reshape(-1)[0])

    def _sequence_one(self, request):
        """One request of a sequence: its inputs with the sequence's state, the new state kept
        (dropped at the sequence's end), the served outputs answered."""
        states, controls = self.sequence
        sequence_id = self._control(request, controls["id"])
        start = self._control(request, controls["start"])
        end = self._control(request, controls["end"])
        held = self.states.get(sequence_id)
        if start:
            held = {name: np.zeros(shape, dtype) for name, _, shape, dtype in states}
        elif held is None:
            raise ValueError(
                f"sequence {sequence_id} has no state here: its start was not seen by this "
                "instance, or it idled out (max_sequence_idle_microseconds)"
            )
        feed = {name: pb_utils.get_input_tensor_by_name(request, name) for name in self.input_names}
        missing = [name for name, tensor in feed.items() if tensor is None]
        if missing:
            raise ValueError(f"request has no input {', '.join(missing)}")
        feed = {name: tensor.as_numpy() for name, tensor in feed.items()} | held
        outputs = self._run(feed)
        self.states.pop(sequence_id, None)  # re-inserted last: the most recently used
        if not end:
            self.states[sequence_id] = {
                name: outputs[self.served_outputs + i] for i, (name, *_) in enumerate(states)
            }
            while len(self.states) > MAX_HELD_SEQUENCES:
                self.states.pop(next(iter(self.states)))
        return self._respond(outputs)

    def _sequence_execute(self, requests):
        """One response per request, each run with its own sequence's state, in the order
        Triton hands them over (it keeps a sequence's requests in order)."""
        responses = []
        for request in requests:
            try:
                responses.append(self._sequence_one(request))
            except Exception as exc:  # a bad request gets an error response, the model lives on
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"{exc}")))
        return responses

    def _one(self, request):
        try:
            feed = {t.name(): t.as_numpy() for t in request.inputs()}
            return self._respond(self._run(feed))
        except Exception as exc:  # a bad request gets an error response, the model lives on
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"{exc}"))

    def execute(self, requests):
        """One response per request; several requests run as one batch when they can be
        concatenated, else one by one (a line with ``FALLBACK_MARKER`` on stderr says so)."""
        if len(requests) == 1 or not self.batched:
            return [self._one(r) for r in requests]
        try:
            feeds = [{t.name(): t.as_numpy() for t in r.inputs()} for r in requests]
            feed = {
                name: np.concatenate([f[name] for f in feeds], axis=0)
                for name in self.input_names
                if name in feeds[0]
            }
            outputs = self._run(feed, len(requests))
        except Exception as exc:
            # Requests that cannot share a batch (or one bad request): run them one by one so
            # only the bad one fails. This changes what is measured, so it is said in the log
            # (tritonlab counts these lines per cell).
            print(
                f"{FALLBACK_MARKER} instance={self.name} requests={len(requests)} "
                f"reason={type(exc).__name__}: {' '.join(str(exc).split())[:200]}",
                file=sys.stderr,
                flush=True,
            )
            return [self._one(r) for r in requests]
        sizes = [next(iter(f.values())).shape[0] for f in feeds]
        splits = np.cumsum(sizes)[:-1]
        parts = [np.split(out, splits, axis=0) for out in outputs]
        return [self._respond([p[i] for p in parts]) for i in range(len(requests))]

    def _profiled_execute(self, requests):
        """``execute`` for one request at a time, with its phases timed (benchmark only)."""
        if len(requests) != 1:
            return EngineModel.execute(self, requests)
        t0 = time.perf_counter_ns()
        feed = {t.name(): t.as_numpy() for t in requests[0].inputs()}
        t1 = time.perf_counter_ns()
        outputs = self._run(feed)
        t2 = time.perf_counter_ns()
        response = self._respond(outputs)
        t3 = time.perf_counter_ns()
        batch = next(iter(feed.values())).shape[0] if feed and self.batched else 0
        p = self.profile.setdefault(batch, [0, 0, 0, 0])
        p[0] += 1
        p[1] += t1 - t0
        p[2] += t2 - t1
        p[3] += t3 - t2
        return [response]

    def finalize(self):
        """Print the per-batch phase timings (µs per execution) to stderr when profiling was on."""
        for batch, (n, read, run, respond) in sorted(self.profile.items()):
            print(
                f"tritonlab-adapter-profile instance={self.name} batch={batch} executions={n} "
                f"read_inputs_us={read / n / 1e3:.2f} "
                f"{self.engine_name}_run_us={run / n / 1e3:.2f} "
                f"build_responses_us={respond / n / 1e3:.2f}",
                file=sys.stderr,
                flush=True,
            )
