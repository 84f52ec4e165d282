"""Run the ONNX model in this process with onnxruntime, to time the bare compute per batch size.

This is the reference the serving numbers are compared with: what one execution costs without
Triton, the Python backend or the network, with the backend's session options (one intra-op
thread, no spinning). Times are medians of a hot loop, so they are a lower bound.

``in_process_ceiling`` runs the served configuration's parallelism (instances x intra-op threads)
without Triton: the throughput a serving configuration would reach if delivering requests cost
nothing. Served throughput over it is the configuration's serving efficiency.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from tritonlab.models.inputs import ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo


def time_in_process(
    info: OnnxModelInfo,
    batch_sizes: list[int],
    iterations: int = 300,
    threads: int = 1,
    inputs: ModelInputs | None = None,
    budget_s: float = 2.0,
) -> dict[int, float]:
    """Median microseconds per execution for each batch size (``inputs``: what to feed).

    Each batch size gets up to ``iterations`` timed runs, stopping after ``budget_s`` (but with
    at least 3), so a model that takes seconds per batch is timed in seconds, not hours.
    """
    session = _session(info, threads)
    names = [o.name for o in info.outputs]
    feeds = inputs or derive_inputs(info)
    result = {}
    for batch in batch_sizes:
        feed = feeds.batch(batch)
        warm_until = time.perf_counter() + budget_s / 4
        for i in range(20):
            session.run(names, feed)
            if i >= 1 and time.perf_counter() > warm_until:
                break
        samples: list[int] = []
        stop_at = time.perf_counter() + budget_s
        while len(samples) < iterations and (len(samples) < 3 or time.perf_counter() < stop_at):
            start = time.perf_counter_ns()
            session.run(names, feed)
            samples.append(time.perf_counter_ns() - start)
        result[batch] = statistics.median(samples) / 1e3
    return result


def _session(info: OnnxModelInfo, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return ort.InferenceSession(str(info.path), options, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class Ceiling:
    """In-process throughput with the serving configuration's parallelism, without Triton."""

    instances: int
    threads: int
    batch_size: int
    infer_per_s: float
    executions: int
    window_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceiling:
        return cls(**data)


def in_process_ceiling(
    info: OnnxModelInfo,
    instances: int,
    threads: int,
    batch_size: int = 1,
    inputs: ModelInputs | None = None,
    window_s: float = 3.0,
) -> Ceiling:
    """Samples per second from ``instances`` sessions of ``threads`` intra-op threads each,
    every session run back to back by its own Python thread (onnxruntime releases the GIL), as
    the served configuration's instances would be if requests cost nothing to deliver."""
    feeds = inputs or derive_inputs(info)
    feed = feeds.batch(batch_size)
    names = [o.name for o in info.outputs]
    sessions = [_session(info, threads) for _ in range(instances)]
    for session in sessions:  # warm every session before the window opens
        session.run(names, feed)
    counts = [0] * instances
    barrier = threading.Barrier(instances + 1)
    stop = threading.Event()

    def work(index: int) -> None:
        barrier.wait()
        while not stop.is_set():
            sessions[index].run(names, feed)
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
    per_sample = batch_size if info.batched else 1
    return Ceiling(
        instances, threads, batch_size, executions * per_sample / elapsed, executions, elapsed
    )
