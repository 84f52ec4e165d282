"""``operators.json``: the heavy operators' profile, in-process timings, the parallel ceilings and
the roofline's per-operator times of one model, measured once per run folder (kept across
resumes). A local run records it after its server stopped; a cluster run on one of its nodes
(``distributed/measurer.py``), which is why it lives below ``pipeline/``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from tritonlab.errors import ConfigError
from tritonlab.experiments.plan import ExperimentPlan
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.perf.in_process import in_process_ceiling, openvino_precision_used, time_in_process
from tritonlab.perf.machine import machine_ceilings
from tritonlab.perf.op_timing import ROOFLINE_BATCHES, time_operators
from tritonlab.perf.operator_profile import OperatorsRecord, profile_operators
from tritonlab.result_files import write_result
from tritonlab.run_layout import RunLayout
from tritonlab.server.locate import default_cache_root

CEILING_WINDOW_ENV = "TRITONLAB_CEILING_WINDOW_S"
DEFAULT_CEILING_WINDOW_S = 3.0


def ceiling_window_s() -> float:
    """Seconds each in-process ceiling is measured for: 3 s, or ``$TRITONLAB_CEILING_WINDOW_S``
    (the behaviour tests use 1 s; the window is recorded with each ceiling)."""
    text = os.environ.get(CEILING_WINDOW_ENV, "")
    try:
        value = float(text) if text else DEFAULT_CEILING_WINDOW_S
    except ValueError as exc:
        raise ConfigError(
            f"{CEILING_WINDOW_ENV} must be a number of seconds, got {text!r}"
        ) from exc
    if not 0.1 <= value <= 60:
        raise ConfigError(f"{CEILING_WINDOW_ENV} must be between 0.1 and 60 s, got {value:g}")
    return value


def record_operator_profile(
    run_dir: Path, info: OnnxModelInfo, plan: ExperimentPlan, inputs: ModelInputs
) -> None:
    """Profile the heavy operators and time in-process runs once; kept across resumes."""
    path = RunLayout(run_dir).operators
    if path.exists():
        return
    largest = min(v.max_batch_size for v in plan.variants) if info.batched else 1
    batches = [b for b in (1, 2, 4, 8, 16, 32, 64) if b <= max(1, largest)]
    profile = profile_operators(info.path, inputs.shapes, info.batched)
    in_process = time_in_process(info, batches, inputs=inputs)
    # Every other engine (backend and precision) the plan serves, timed the same way: the cost
    # model's fixed and per-sample terms are per engine.
    engines = sorted({(v.backend, v.precision) for v in plan.variants if v.engine != "onnxruntime"})
    engines_us = {
        f"{backend} {precision}": time_in_process(
            info, batches, inputs=inputs, backend=backend, precision=precision
        )
        for backend, precision in engines
    }
    precision_used = {
        f"{backend} {precision}": openvino_precision_used(info, precision)
        for backend, precision in engines
        if backend == "openvino"
    }
    client_batch = plan.loads[0].batch_size if info.batched else 1
    parallelism = sorted(
        {
            (v.instance_count, v.intra_op_threads or 0, v.backend, v.precision)
            for v in plan.variants
            if v.instance_kind == "KIND_CPU"
        }
    )
    window_s = ceiling_window_s()
    ceilings = tuple(
        in_process_ceiling(info, n, threads, client_batch, inputs, window_s, backend, precision)
        for n, threads, backend, precision in parallelism
    )
    # The roofline: this machine's per-thread ceilings, and each heavy operator's own time at
    # the batch sizes it is drawn at (onnxruntime's profiler).
    machine = machine_ceilings(default_cache_root())
    operator_us = time_operators(
        info,
        [o.name for o in profile.operators],
        [b for b in ROOFLINE_BATCHES if b <= max(1, largest)],
        inputs,
    )
    null_us: dict[int, float] | None = None
    null_path = RunLayout(run_dir).null_model
    if null_path.exists():
        # The serving-path cells already contain an empty onnxruntime call; the cost model
        # subtracts its in-process time so the model's own terms do not count it twice.
        null_us = time_in_process(replace(info, path=null_path), batches, inputs=inputs)
    record = OperatorsRecord(
        profile=profile,
        in_process_us_per_execution=in_process,
        null_in_process_us_per_execution=null_us,
        engines_in_process_us_per_execution=engines_us or None,
        engines_precision_used=precision_used if engines else None,
        in_process_ceilings=ceilings,
        machine_ceilings=machine,
        operator_us_per_execution=operator_us,
    )
    write_result(path, record.to_dict())
