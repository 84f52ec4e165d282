"""Run the ONNX model in this process, to time the bare compute per batch size.

This is the reference the serving numbers are compared with: what one execution costs without
Triton, the Python backend or the network, with the backend's session options (onnxruntime: one
intra-op thread, no spinning; OpenVINO: one stream, the precision pinned, as the served backends
open them). Times are medians of a hot loop, so they are a lower bound.

``in_process_ceiling`` runs the served configuration's parallelism (instances x intra-op threads)
without Triton: the throughput a serving configuration would reach if delivering requests cost
nothing. Served throughput over it is the configuration's serving efficiency.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tritonlab.errors import TritonlabError
from tritonlab.models.inputs import ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.ort_session import cpu_session
from tritonlab.records import Record, later


def time_in_process(
    info: OnnxModelInfo,
    batch_sizes: list[int],
    iterations: int = 300,
    inputs: ModelInputs | None = None,
    budget_s: float = 2.0,
    backend: str = "onnxruntime",
    precision: str = "f32",
) -> dict[int, float]:
    """Median microseconds per execution for each batch size (``inputs``: what to feed), from
    up to ``iterations`` timed runs, stopping after ``budget_s`` (but with at least 3)."""
    run = engine_runner(info, 1, backend, precision)  # one intra-op thread, as served
    feeds = inputs or derive_inputs(info)
    result = {}
    for batch in batch_sizes:
        feed = feeds.batch(batch)
        warm_until = time.perf_counter() + budget_s / 4
        for i in range(20):
            run(feed)
            if i >= 1 and time.perf_counter() > warm_until:
                break
        samples: list[int] = []
        stop_at = time.perf_counter() + budget_s
        while len(samples) < iterations and (len(samples) < 3 or time.perf_counter() < stop_at):
            start = time.perf_counter_ns()
            run(feed)
            samples.append(time.perf_counter_ns() - start)
        result[batch] = statistics.median(samples) / 1e3
    return result


Runner = Callable[[dict[str, Any]], Any]


def engine_runner(
    info: OnnxModelInfo, threads: int, backend: str = "onnxruntime", precision: str = "f32"
) -> Runner:
    """One engine instance opened as the served backend opens it: a call runs one feed."""
    if backend == "openvino":
        request = _openvino_compiled(info, threads, precision).create_infer_request()
        return lambda feed: request.infer(feed)
    session = ort_session(str(info.path), threads)
    names = [o.name for o in info.outputs]
    return lambda feed: session.run(names, feed)


def ort_session(model: str | bytes, threads: int, **options: Any) -> Any:
    """An onnxruntime CPU session with the backend's options: ``threads`` intra-op threads, no
    spinning (``options``: further ``SessionOptions`` attributes)."""
    import onnxruntime as ort

    settings = ort.SessionOptions()
    settings.intra_op_num_threads = threads
    settings.add_session_config_entry("session.intra_op.allow_spinning", "0")
    settings.add_session_config_entry("session.inter_op.allow_spinning", "0")
    for name, value in options.items():
        setattr(settings, name, value)
    return cpu_session(model, settings)


def openvino_precision_used(info: OnnxModelInfo, precision: str) -> str:
    """The precision OpenVINO compiles ``info`` in when asked for ``precision`` on this
    processor (bf16 falls back to f32 on one without bf16 units)."""
    used = _openvino_compiled(info, 1, precision).get_property("INFERENCE_PRECISION_HINT")
    return str(getattr(used, "get_type_name", lambda: used)())


def _openvino_compiled(info: OnnxModelInfo, threads: int, precision: str) -> Any:
    try:
        import openvino as ov
    except ImportError as exc:
        raise TritonlabError(
            "backend openvino needs the openvino package: pip install 'tritonlab[openvino]'"
        ) from exc
    properties = {
        "INFERENCE_PRECISION_HINT": precision,
        "NUM_STREAMS": "1",
        "PERFORMANCE_HINT": "LATENCY",
    }
    if threads > 0:
        properties["INFERENCE_NUM_THREADS"] = str(threads)
    core = ov.Core()
    return core.compile_model(core.read_model(str(info.path)), "CPU", properties)


@dataclass(frozen=True)
class Ceiling(Record):
    """In-process throughput with the serving configuration's parallelism, without Triton."""

    instances: int
    threads: int
    batch_size: int
    infer_per_s: float
    executions: int
    window_s: float
    engine: str = later("onnxruntime")  # ServingVariant.engine of the configuration it bounds


def in_process_ceiling(
    info: OnnxModelInfo,
    instances: int,
    threads: int,
    batch_size: int = 1,
    inputs: ModelInputs | None = None,
    window_s: float = 3.0,
    backend: str = "onnxruntime",
    precision: str = "f32",
) -> Ceiling:
    """Samples per second from ``instances`` sessions of ``threads`` intra-op threads each,
    every session run back to back by its own Python thread (onnxruntime releases the GIL), as
    the served configuration's instances would be if requests cost nothing to deliver."""
    feed = (inputs or derive_inputs(info)).batch(batch_size)
    runners = [engine_runner(info, threads, backend, precision) for _ in range(instances)]
    for run in runners:  # warm every engine before the window opens
        run(feed)
    counts = [0] * instances
    barrier = threading.Barrier(instances + 1)
    stop = threading.Event()

    def work(index: int) -> None:
        barrier.wait()
        while not stop.is_set():
            runners[index](feed)
            counts[index] += 1

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(instances)]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    time.sleep(window_s)
    stop.set()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    executions = sum(counts)
    rate = executions * (batch_size if info.batched else 1) / elapsed
    engine = "onnxruntime" if backend == "onnxruntime" else f"{backend} {precision}"
    return Ceiling(instances, threads, batch_size, rate, executions, elapsed, engine)
