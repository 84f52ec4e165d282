"""Which step of an ensemble the variants change: the one that binds, found by measuring.

Before a run or a tune of an ensemble (without ``--step``), the user's pipeline is served as it
is in a temporary repository and measured once with perf_analyzer at the run's load; Triton's
statistics of each step over that window say where a request spends its server time (queue and
compute per request, times calls per request). The step with the largest share is the one whose
knobs are varied, and the reason (the probe's figures) goes into the run's manifest and log. A
resumed run keeps the choice its manifest records, so its configurations stay the same.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tritonlab import gateway
from tritonlab.errors import ResultFileError
from tritonlab.experiments.repository_plan import repository_baseline
from tritonlab.experiments.store import load_manifest
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.source import KIND_ENSEMBLE, RepositorySource
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.perf.runner import run_perf
from tritonlab.perf.settings import PerfSettings
from tritonlab.repository.layout import add_model, load_order
from tritonlab.repository.user_repo import ENSEMBLE, read_user_model
from tritonlab.run_layout import RunLayout
from tritonlab.server.called_models import server_time_shares
from tritonlab.server.launch import ServerOptions, running_server
from tritonlab.server.stats import ServerStatsDelta, StatsSnapshot, stats_delta

PROBE_WINDOW_MS = 1000
PROBE_STABILITY_PCT = 50.0


def _stored_choice(run_dir: Path, source: RepositorySource) -> dict[str, object] | None:
    """The step a run folder's manifest records for the same model, if any."""
    if not RunLayout(run_dir).manifest.exists():
        return None
    try:
        repository = load_manifest(run_dir).model.repository or {}
    except ResultFileError:
        return None
    if repository.get("model") != source.model or not repository.get("tuned"):
        return None
    return dict(repository)


def probe_steps(
    info: OnnxModelInfo,
    model_name: str,
    options: ServerOptions,
    inputs: ModelInputs,
    concurrency: int,
    protocol: str = "grpc",
) -> dict[str, ServerStatsDelta]:
    """Serve the pipeline as the user configured it and measure one perf_analyzer run; each
    step's statistics over it, by name (the measured model's own under ``model_name``)."""
    with gateway.temporary_folder("tritonlab-probe-") as tmp:
        work = RunLayout(tmp.root)  # a scratch folder laid out like a run folder
        model = add_model(work.models, info, model_name, repository_baseline(info))
        with running_server(
            options, work.models, work.server_log, explicit_model_control=True
        ) as server:
            for name in load_order(model):
                server.load_model(name)
            data = inputs.write_perf_data(work.perf_data())
            dynamic = {s.name for s in info.inputs if -1 in s.dims}
            settings = PerfSettings(
                model_name=model.model_name,
                url=server.url(protocol),
                protocol=protocol,
                concurrency=concurrency,
                measurement_interval_ms=PROBE_WINDOW_MS,
                stability_percentage=PROBE_STABILITY_PCT,
                input_shapes={k: v for k, v in inputs.shapes.items() if k in dynamic},
                input_data=str(data),
            )
            names = [(model_name, model.model_name), *model.called]
            before = {n: StatsSnapshot.from_triton(server.model_statistics(s)) for n, s in names}
            run_perf(locate_perf_analyzer(), settings, work.benchmark_dir("probe"), "probe")
            after = {n: StatsSnapshot.from_triton(server.model_statistics(s)) for n, s in names}
    return {n: stats_delta(before[n], after[n]) for n, _ in names}


def choose_binding_step(
    info: OnnxModelInfo,
    model_name: str,
    options: ServerOptions,
    inputs: ModelInputs,
    run_dir: Path,
    concurrency: int,
    protocol: str = "grpc",
    fresh: bool = False,
) -> OnnxModelInfo:
    """``info`` with the ensemble's binding step as the one the variants change (unchanged for
    any other model, or where ``--step`` chose it); a run folder's earlier choice is kept."""
    source = info.source
    if source is None or source.kind != KIND_ENSEMBLE or source.tuned_reason.startswith("chosen"):
        return info
    stored = None if fresh else _stored_choice(run_dir, source)
    if stored is not None:
        step, reason = str(stored["tuned"]), str(stored.get("tuned_reason", ""))
    else:
        deltas = probe_steps(info, model_name, options, inputs, concurrency, protocol)
        top = deltas.pop(model_name)
        shares = server_time_shares(deltas)
        candidates = [n for n in shares if read_user_model(source.root, n).backend != ENSEMBLE]
        step = max(candidates, key=lambda n: shares[n])
        figures = "; ".join(
            f"`{n}` {shares[n]:.0%} (queue {deltas[n].queue_us_per_request:,.0f} µs "
            f"+ compute {deltas[n].compute_us_per_request:,.0f} µs per request)"
            for n in shares
        )
        reason = (
            f"it held the largest share of a request's server time in an opening probe (the "
            f"pipeline as configured, one perf_analyzer run at concurrency {concurrency}, "
            f"{top.request_count:,} requests): {figures}"
        )
    backend = read_user_model(source.root, step).backend
    return replace(
        info, source=replace(source, tuned=step, tuned_backend=backend, tuned_reason=reason)
    )
