"""The serving path's own cost, measured in the same server run: a null model.

The null model has the model's inputs and outputs (names, types, shapes) and a graph that does
nothing but fill the outputs with zeros. Served through the same ``onnxruntime`` backend, an
execution of it costs what Triton, the Python backend's stub and IPC, the adapter (reading,
concatenating, splitting, one response per request) and an empty onnxruntime call cost: the
serving path, without the model's compute. (An ``identity`` echo model, the fallback where no
null graph can be built, misses the adapter's own work: measured here at ~60 µs per execution.)

Three cells, measured once after the planned rounds at the run's first closed-loop load, give
the cost model its serving curve: no batching (one request per execution) and dynamic batchers
waiting for half and for all of the requests in flight (a long delay with that preferred size,
so batches fill); about 40 s on 2 cores, kept across resumes. They are stored apart from the
plan's cells (``results/serving_path/``), measured on a session's server
(``engine.ClassicEngine.measure_serving_path``).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from tritonlab import gateway
from tritonlab.errors import PerfAnalyzerError, ServerError
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.experiments.recovery import ATTEMPTS_PER_CELL
from tritonlab.experiments.session import CellSession, together, unload_quietly
from tritonlab.experiments.store import cell_path
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.state_pairs import state_tensors
from tritonlab.repository.config import ModelConfig, config_dict, write_config
from tritonlab.repository.layout import MODEL_VERSION, RepositoryModel, add_model
from tritonlab.repository.variants import ServingVariant, variant_model_name
from tritonlab.run_layout import SERVING_PATH_DIR, RunLayout, cell_id
from tritonlab.server.process import TritonServer

PROBE_DELAY_US = 100_000  # long enough that a batch always fills to the preferred size
PREFIX = "serving_path"


def probe_variants(load: LoadPoint, max_batch_size: int) -> list[ServingVariant]:
    """No batching, then batches of half and of all the requests in flight."""
    in_flight = (load.concurrency or 2) * load.batch_size
    ceiling = max(max_batch_size, in_flight)
    sizes = sorted({max(2, in_flight // 2), in_flight})
    plain = ServingVariant(
        f"{PREFIX}_r1", "null model, no batching", max_batch_size=ceiling, intra_op_threads=1
    )
    return [plain] + [
        replace(
            plain,
            name=f"{PREFIX}_r{size}",
            description=f"null model, batches of {size}",
            dynamic_batching=True,
            max_queue_delay_us=PROBE_DELAY_US,
            preferred_batch_sizes=(size,),
        )
        for size in sizes
    ]


# Triton's type -> ONNX's, for the outputs a null model can fill (the same name but floats').
_ONNX_TYPES = {f"TYPE_{t}": t for t in ("BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64")} | {
    "TYPE_FP16": "FLOAT16",
    "TYPE_FP32": "FLOAT",
    "TYPE_FP64": "DOUBLE",
}


def run_probes(
    plan: ExperimentPlan, info: OnnxModelInfo
) -> tuple[LoadPoint, list[ServingVariant]] | None:
    """The load and the probes a run of ``plan`` on ``info`` measures; None where the
    plan has no closed load or the model no batch axis or ONNX graph, or carries state (the
    dynamic batcher cannot serve it; the cost model times an
    ONNX graph in-process: a Python model's or a pipeline's probes would fit nothing, and the
    log says why the cost model is absent)."""
    closed = [ld for ld in plan.loads if not ld.open_loop and ld.concurrency]
    if not closed or not info.batched or not info.runs_onnx or state_tensors(info):
        return None  # (a model that carries state: its probes would batch, which it cannot)
    # the first closed-loop load, with at least 2 requests in flight
    load = replace(closed[0], concurrency=max(2, closed[0].concurrency or 2))
    return load, probe_variants(load, min(v.max_batch_size for v in plan.variants))


def probes_pending(run_dir: Path, plan: ExperimentPlan, info: OnnxModelInfo) -> bool:
    """Whether a probe cell of the run is still to measure."""
    if (probes := run_probes(plan, info)) is None:
        return False
    load, variants = probes
    return not all(probe_done(run_dir, v, load) for v in variants)


def write_null_model(info: OnnxModelInfo, path: Path) -> bool:
    """A graph with ``info``'s inputs and outputs that only fills the outputs with zeros.

    Each output is ``ConstantOfShape([batch, *dims])`` with the batch taken from the first
    input (dynamic non-batch dims become 1). False when a type has no ONNX constant.
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if not info.batched or any(o.triton_dtype not in _ONNX_TYPES for o in info.outputs):
        return False

    def value_info(spec: Any, batch: str = "batch") -> Any:
        elem = getattr(TensorProto, _ONNX_TYPES[spec.triton_dtype])
        dims = [batch, *[d if d > 0 else f"{spec.name}_d{i}" for i, d in enumerate(spec.dims)]]
        return helper.make_tensor_value_info(spec.name, elem, dims)

    nodes = [helper.make_node("Shape", [info.inputs[0].name], ["null_batch"], end=1)]
    initializers = []
    for i, out in enumerate(info.outputs):
        dims = numpy_helper.from_array(
            np.array([d if d > 0 else 1 for d in out.dims], dtype=np.int64), f"null_dims_{i}"
        )
        initializers.append(dims)
        zero = numpy_helper.from_array(np.zeros(1, dtype=out.numpy_dtype), f"null_zero_{i}")
        nodes += [
            helper.make_node("Concat", ["null_batch", dims.name], [f"null_shape_{i}"], axis=0),
            helper.make_node("ConstantOfShape", [f"null_shape_{i}"], [out.name], value=zero),
        ]
    graph = helper.make_graph(
        nodes,
        "tritonlab_null",
        [value_info(s) for s in info.inputs],
        [value_info(s) for s in info.outputs],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    gateway.write_file(path, lambda target: onnx.save(model, str(target)))
    return True


def add_null_model(
    repo_dir: Path, info: OnnxModelInfo, model_name: str, variant: ServingVariant
) -> RepositoryModel | None:
    """The null model of ``info`` as ``variant`` (served by the onnxruntime backend), or None."""
    null_path = RunLayout(repo_dir.parent).null_model
    if not null_path.exists() and not write_null_model(info, null_path):
        return None
    # an ONNX null model of its own, whatever the measured model is (a repository's included)
    null_info = replace(info, path=null_path, file_size_bytes=null_path.stat().st_size, source=None)
    return add_model(repo_dir, null_info, model_name, variant)


def add_identity_model(
    repo_dir: Path, info: OnnxModelInfo, model_name: str, variant: ServingVariant
) -> RepositoryModel:
    """An identity model with ``info``'s inputs; each output echoes the input at its position."""
    served = variant_model_name(model_name, variant)
    config = config_dict(info, variant, served)
    config["backend"] = "identity"
    config.pop("default_model_filename", None)
    config["output"] = [{**tensor, "name": f"echo_{tensor['name']}"} for tensor in config["input"]]
    folder = repo_dir / served
    gateway.mkdir(folder / MODEL_VERSION)
    write_config(json_format.ParseDict(config, ModelConfig()), folder / "config.pbtxt")
    return RepositoryModel(served, variant, folder)


def probe_done(run_dir: Path, variant: ServingVariant, load: LoadPoint) -> bool:
    """True when the probe's one cell (named like a measured cell's, repeat 1) exists."""
    return cell_path(run_dir, cell_id(variant.name, load.key, 1), SERVING_PATH_DIR).exists()


def measure_serving_path(session: CellSession, server: TritonServer, info: OnnxModelInfo) -> None:
    """The null-model cells the cost model needs (one of each probe), measured with
    ``session``'s perf_analyzer and plan on ``server`` (the session's, which it started).

    Kept across resumes. A live server that cannot load the probe (an external binary without
    tritonlab's backends) leaves the run without them; the log then says the cost model is
    unavailable. A server that dies during a probe is restarted (the session's recovery) and the
    probe measured again, at most ``ATTEMPTS_PER_CELL`` times.
    """
    plan, run_dir = session.plan, session.run_dir
    if (probes := run_probes(plan, info)) is None:
        return
    load, variants = probes
    repo = RunLayout(run_dir).models
    models = [
        add_null_model(repo, info, plan.model_name, v)
        or add_identity_model(repo, info, plan.model_name, v)
        for v in variants
    ]
    pending = [m.model_name for m in models if not probe_done(run_dir, m.variant, load)]
    # Loaded together (Triton loads them in parallel; a later load of a loaded, unchanged model
    # returns at once), measured one by one, unloaded together: a few seconds less per run.
    with contextlib.suppress(ServerError):
        together(server.load_model, pending)
    try:
        _measure_probes(session, server, models, load)
    finally:
        together(lambda name: unload_quietly(server, name), pending)


def _measure_probes(
    session: CellSession, server: TritonServer, models: list[RepositoryModel], load: LoadPoint
) -> None:
    """Each probe's cell, a probe whose server died measured again (see the caller)."""
    run_dir, recovery = session.run_dir, session.recovery
    for model in models:
        for attempt in range(1, ATTEMPTS_PER_CELL + 1):
            if probe_done(run_dir, model.variant, load):
                break
            recovery.mark()
            try:
                server.load_model(model.model_name)  # at once where it is loaded already
                session.measure_cell(model, load, 0, session.plan, SERVING_PATH_DIR)
            except (ServerError, PerfAnalyzerError) as exc:
                if not recovery.server_died():
                    if isinstance(exc, ServerError):
                        return  # a live server that cannot load the probe
                    raise
                # the server died during the probe: restart it and measure the probe again
                last = attempt == ATTEMPTS_PER_CELL
                probe = f"serving-path probe {model.model_name} (repeat 1)"
                recovery.handle(probe, exc, last_attempt=last)
                if last:
                    return
            else:
                break
