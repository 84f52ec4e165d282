"""Opening a measuring session: the plan's fingerprint, the run's manifest, the server started
on the run's repository and the model's answers checked before anything is measured."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonlab.client.answer_check import check_answer
from tritonlab.cpu_split import CpuSplit, decide_split
from tritonlab.errors import PlanError
from tritonlab.experiments.manifest import (
    MachineInfo,
    Manifest,
    ModelRecord,
    PerfAnalyzerRecord,
    RunEntries,
    ServerRecord,
    ToolInfo,
    package_versions,
    utc_now,
)
from tritonlab.experiments.plan import ExperimentPlan
from tritonlab.experiments.recovery import Recovery, load_faults
from tritonlab.experiments.session import CellSession, InputFiles, Progress
from tritonlab.experiments.store import load_manifest
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.paths import portable_command, portable_file, portable_path
from tritonlab.perf.locate import PerfAnalyzerInstall
from tritonlab.repository.knobs import server_args as knob_server_args
from tritonlab.repository.layout import RepositoryModel, load_order
from tritonlab.result_files import write_result
from tritonlab.run_layout import RunLayout
from tritonlab.server.launch import ServerOptions, running_server
from tritonlab.server.process import TritonServer


def plan_fingerprint(
    plan: ExperimentPlan, model_sha256: str, inputs: ModelInputs | None = None
) -> str:
    """16 hex digits identifying the plan (notes left out), the model file and the data sent."""
    record: dict[str, object] = {"plan": plan.fingerprint_dict(), "model": model_sha256}
    if inputs is not None:
        record["inputs"] = inputs.fingerprint_dict()
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SessionRequest:
    """What opening a measuring session needs, locally (``open_session``) or on a cluster
    (``distributed.ray_session.open_ray_session``)."""

    options: ServerOptions
    run_dir: Path
    info: OnnxModelInfo
    inputs: ModelInputs
    plan: ExperimentPlan
    fingerprint: str
    perf_install: PerfAnalyzerInstall
    entries: RunEntries = field(default_factory=RunEntries)
    progress: Progress = field(default_factory=Progress)
    deadline: float | None = None


def new_manifest(
    request: SessionRequest,
    machine: MachineInfo,
    server: ServerRecord,
    cpu_split: CpuSplit | None = None,
) -> Manifest:
    """A run's manifest as it starts, with the faults an earlier attempt recorded."""
    run_dir, perf_install, info = request.run_dir, request.perf_install, request.info
    manifest = Manifest(
        tool=ToolInfo.current(),
        packages=package_versions(),
        machine=machine,
        created_utc=utc_now(),
        plan=request.plan,
        plan_fingerprint=request.fingerprint,
        model=ModelRecord(
            name=request.plan.model_name,
            onnx_file=info.origin.stored_name(info.path),
            sha256=info.origin.sha256(),
            size_bytes=info.file_size_bytes,
            opset=info.opset or None,  # 0: no graph (a Python model, an ensemble)
            inputs=tuple(info.inputs),
            outputs=tuple(info.outputs),
            repository=info.origin.manifest_entry(),
        ),
        server=server,
        perf_analyzer=PerfAnalyzerRecord(
            binary=portable_path(perf_install.binary, run_dir), version=perf_install.version
        ),
        inputs=request.inputs,
        faults=tuple(load_faults(run_dir)),
        cpu_split=cpu_split,
    )
    return request.entries.apply(manifest)


def check_resume(run_dir: Path, fingerprint: str) -> None:
    """``PlanError`` if ``run_dir``'s results are from another plan or model (a folder
    without a manifest passes)."""
    if not RunLayout(run_dir).manifest.exists():
        return
    previous = load_manifest(run_dir).plan_fingerprint
    if previous and previous != fingerprint:
        raise PlanError(
            f"{run_dir} holds results of a different plan or model; pass another --out, "
            "or --fresh to discard them"
        )


@contextlib.contextmanager
def open_session(
    request: SessionRequest,
    check_model: RepositoryModel,
    engine_models: Sequence[RepositoryModel] = (),
    keep_loaded: bool = False,
) -> Iterator[CellSession]:
    """Start the server on the run folder's ``models``, write the manifest, check
    ``check_model``'s answers on both protocols (``infer_check.json``), and yield a session.

    ``engine_models``: the plan's models; the first of every other engine is checked too (over
    gRPC), so each one's accuracy is on record. ``keep_loaded``: leave the checked models
    loaded (the block engine co-loads them next; a reload costs a stub's stop and start).
    """
    options, run_dir, info, inputs = request.options, request.run_dir, request.info, request.inputs
    plan, perf_install = request.plan, request.perf_install
    log_path = RunLayout(run_dir).server_log
    # the flags the plan's knobs need (a response cache's size), on top of any already given
    needed = tuple(a for a in knob_server_args(plan.variants) if a not in options.server_args)
    split = decide_split(options.cpu_split, starts_server=not options.url)
    options = replace(
        options, server_args=options.server_args + needed, server_cpus=split.server_cpus
    )
    with running_server(
        options, RunLayout(run_dir).models, log_path, explicit_model_control=True
    ) as server:
        manifest = new_manifest(
            request,
            MachineInfo.current(),
            ServerRecord(
                source=options.describe,
                version=server.server_version(),
                command=(
                    tuple(portable_command(server.command(redact=True), run_dir))
                    if isinstance(server, TritonServer)
                    else None
                ),
                http_url=server.http_url,
                grpc_url=server.grpc_url,
            ),
            split,
        )
        session = CellSession(
            server,
            perf_install,
            plan,
            run_dir,
            InputFiles(inputs, info, run_dir, fresh=plan.measurement.fresh_inputs),
            Recovery(
                server,
                run_dir,
                options.ready_timeout_s,
                on_fault=lambda faults: session.save_manifest(faults=tuple(faults)),
            ),
            request.progress,
            request.deadline,
            manifest,
        )
        session.save_manifest()
        to_check: list[tuple[RepositoryModel, tuple[str, ...]]] = [(check_model, ("http", "grpc"))]
        engines = {check_model.variant.engine}
        for other in engine_models:
            if other.variant.engine not in engines:
                engines.add(other.variant.engine)
                to_check.append((other, ("grpc",)))
        for model, protocols in to_check:
            for name in load_order(model):
                server.load_model(name)
            try:
                session.checks += [
                    check_answer(
                        server,
                        model.model_name,
                        info,
                        protocol,
                        inputs=inputs,
                        engine=model.variant.engine,
                        precision=model.variant.precision,
                    )
                    for protocol in protocols
                ]
            except BaseException:
                server.unload_model(model.model_name)
                raise
            if not keep_loaded:
                server.unload_model(model.model_name)
        write_result(RunLayout(run_dir).infer_check, [c.to_dict() for c in session.checks])
        yield session
    portable_file(log_path, run_dir)  # the server log names the repository and the cache
