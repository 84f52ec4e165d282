"""Per-operator timings from onnxruntime's own profiler, for the roofline's achieved rates.

The model runs in this process with the backend's session options (one intra-op thread, no
spinning, default graph optimisations) and ``enable_profiling``; onnxruntime writes one
``Node`` event per kernel run, named after the node (``<name>_kernel_time``). Graph
optimisations fuse nodes (Gemm + Relu into FusedGemm, Conv + Relu into FusedConv); a fused
node's event is named ``fused <name>`` after the node it grew from (or that name with a suffix),
so the heavy operators are found by name (the fused kernel's time then includes the fused
activation, a few per cent of it). onnxruntime's NCHWc layout names a Conv's kernel after
the tensor it writes, which is traced back through the graph. A heavy operator with no event
(optimised away, or renamed beyond recognition) is left out and said so by the caller.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from tritonlab import gateway
from tritonlab.models.inputs import ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.perf.in_process import ort_session

RUNS_PER_BATCH = 3
ROOFLINE_BATCHES = (1, 8, 64)  # the batch sizes the roofline draws each operator at


class _Graph:
    """Which node made each tensor, and each node's inputs, to trace an event back to the heavy
    operator it runs (fused and re-laid-out kernels are named after a tensor or a neighbour)."""

    def __init__(self, info: OnnxModelInfo, names: list[str]) -> None:
        import onnx

        graph = onnx.load(str(info.path), load_external_data=False).graph
        self.names = set(names)
        self.producer: dict[str, str] = {}
        self.inputs: dict[str, list[str]] = {}
        for node in graph.node:
            self.inputs[node.name] = list(node.input)
            for out in node.output:
                self.producer[out] = node.name

    def heavy_behind(self, node: str, depth: int = 3) -> str | None:
        """``node`` if heavy, else the heavy operator feeding it through at most ``depth``
        element-wise nodes (a Conv's fused BatchNormalization, Relu or residual Add)."""
        if node in self.names:
            return node
        if depth == 0:
            return None
        for tensor in self.inputs.get(node, []):
            upstream = self.producer.get(tensor)
            if upstream is not None and (found := self.heavy_behind(upstream, depth - 1)):
                return found
        return None

    def match(self, event_name: str) -> str | None:
        base = event_name.removesuffix("_kernel_time").removeprefix("fused ")
        base = base.removesuffix("_nchwc")  # onnxruntime's NCHWc layout renames by output
        if base in self.names:
            return base
        if base in self.producer:  # named after the tensor it writes
            return self.heavy_behind(self.producer[base])
        if base in self.inputs:  # a fused node named after its last member
            return self.heavy_behind(base)
        # a suffixed copy of a node's name ("MatMul_0/MatMulAddFusion")
        hits = [n for n in self.names if base.startswith(n) and base[len(n) : len(n) + 1] in "/_"]
        return max(hits, key=len) if hits else None


def time_operators(
    info: OnnxModelInfo,
    names: list[str],
    batch_sizes: list[int],
    inputs: ModelInputs | None = None,
    runs: int = RUNS_PER_BATCH,
) -> dict[int, dict[str, float]]:
    """Batch size -> operator name -> median µs per kernel run, for the ``names`` found."""
    feeds = inputs or derive_inputs(info)
    outputs = [o.name for o in info.outputs]
    with gateway.temporary_folder("tritonlab-ortprof-") as folder:
        prefix = str(folder.root / "ort")
        session = ort_session(str(info.path), 1, enable_profiling=True, profile_file_prefix=prefix)
        for batch in batch_sizes:
            feed = feeds.batch(batch)
            for _ in range(runs + 1):  # the first warms: its events are skipped below
                session.run(outputs, feed)
        events = json.loads(Path(session.end_profiling()).read_text())
    # Each session.run emits one "model_run" event; nodes between two of them belong to it.
    per_run: list[list[dict[str, Any]]] = [[]]
    for event in events:
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            per_run[-1].append(event)
        elif event.get("cat") == "Session" and event.get("name") == "model_run":
            per_run.append([])
    runs_done = [r for r in per_run if r]  # one list of kernel events per session.run
    graph = _Graph(info, names)
    result: dict[int, dict[str, float]] = {}
    for i, batch in enumerate(batch_sizes):  # runs + 1 each, the first of them the warm-up
        samples: dict[str, list[float]] = {}
        for run in runs_done[i * (runs + 1) + 1 : (i + 1) * (runs + 1)]:
            totals: dict[str, float] = {}
            for event in run:
                if (name := graph.match(str(event["name"]))) is not None:
                    totals[name] = totals.get(name, 0.0) + float(event.get("dur", 0.0))
            for name, us in totals.items():
                samples.setdefault(name, []).append(us)
        result[batch] = {n: statistics.median(v) for n, v in samples.items() if v}
    return result
