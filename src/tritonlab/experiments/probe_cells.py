"""The serving-path probes' cells: the null models the cost model needs, measured on a
session's server (``engine.ClassicEngine.measure_serving_path`` calls ``measure_serving_path``)."""

from __future__ import annotations

import contextlib

from tritonlab.errors import PerfAnalyzerError, ServerError
from tritonlab.experiments.plan import LoadPoint
from tritonlab.experiments.recovery import ATTEMPTS_PER_CELL
from tritonlab.experiments.serving_path import (
    PROBE_REPEATS,
    add_identity_model,
    add_null_model,
    probe_done,
    run_probes,
)
from tritonlab.experiments.session import CellSession, measure_cell, together, unload_quietly
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.repository.layout import RepositoryModel
from tritonlab.run_layout import SERVING_PATH_DIR, RunLayout
from tritonlab.server.process import TritonServer


def measure_serving_path(session: CellSession, server: TritonServer, info: OnnxModelInfo) -> None:
    """The null-model cells the cost model needs (``PROBE_REPEATS`` of each probe), measured
    with ``session``'s perf_analyzer and plan on ``server`` (the session's, which it started).

    Kept across resumes. A live server that cannot load the probe (an external binary without
    tritonlab's backends) leaves the run without them; the log then says the cost model is
    unavailable. A server that dies during a probe is restarted (the session's recovery) and the
    probe measured again, at most ``ATTEMPTS_PER_CELL`` times.
    """
    plan, run_dir = session.plan, session.run_dir
    probes = run_probes(plan, info)
    if probes is None:
        return
    load, variants = probes
    repo = RunLayout(run_dir).models
    models = [
        add_null_model(repo, info, plan.model_name, v)
        or add_identity_model(repo, info, plan.model_name, v)
        for v in variants
    ]
    pending = [
        m.model_name
        for m in models
        if not all(probe_done(run_dir, m.variant, load, r) for r in range(PROBE_REPEATS))
    ]
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
    """Each probe's cells, a probe whose server died measured again (see the caller)."""
    run_dir, recovery = session.run_dir, session.recovery
    for repeat in range(PROBE_REPEATS):
        for model in models:
            for attempt in range(1, ATTEMPTS_PER_CELL + 1):
                if probe_done(run_dir, model.variant, load, repeat):
                    break
                recovery.mark()
                try:
                    _measure_probe(session, server, model, load, repeat)
                except (ServerError, PerfAnalyzerError) as exc:
                    if not recovery.server_died():
                        if isinstance(exc, ServerError):
                            return  # a live server that cannot load the probe
                        raise
                    # the server died during the probe: restart it and measure the probe again
                    last = attempt == ATTEMPTS_PER_CELL
                    probe = f"serving-path probe {model.model_name} (repeat {repeat + 1})"
                    recovery.handle(probe, exc, last_attempt=last)
                    if last:
                        return
                else:
                    break


def _measure_probe(
    session: CellSession, server: TritonServer, model: RepositoryModel, load: LoadPoint, repeat: int
) -> None:
    """Load a probe (at once where it is loaded already), measure its cell with ``session``'s
    perf_analyzer and plan; the caller unloads the probes."""
    server.load_model(model.model_name)
    measure_cell(
        server,
        session.perf_install,
        session.plan,
        model,
        load,
        repeat,
        session.run_dir,
        session.input_files.for_load(load),
        SERVING_PATH_DIR,
    )
