"""The single steps (serve, infer, perf) as library calls: each serves one configuration of one
ONNX file, or a model of a user's Triton repository as its own ``config.pbtxt`` says (with the
models it calls, from a copy: the repository is only read), or reaches a ``--url``, and returns
typed records; the CLI only prints them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonlab import gateway
from tritonlab.client.answer_check import check_answer
from tritonlab.client.infer import InferCheck
from tritonlab.errors import ServerError, TritonlabError
from tritonlab.experiments.repository_plan import own_baseline
from tritonlab.experiments.sequence_plan import REQUESTS_PER_SEQUENCE
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.shape_probe import checked_shapes
from tritonlab.models.state_pairs import state_tensors
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.perf.runner import PerfRun, run_perf
from tritonlab.perf.settings import ARRIVALS, PROTOCOLS, PerfSettings
from tritonlab.pipeline.project import check_choice, check_model_name, load_model_info
from tritonlab.repository.layout import add_model, load_order
from tritonlab.repository.variants import (
    DEFAULT_BACKEND,
    DEFAULT_PRECISION,
    ServingVariant,
    for_model,
)
from tritonlab.run_layout import SERVER_LOG_FILE, RunLayout
from tritonlab.server.called_models import CalledWindow, called_window
from tritonlab.server.endpoint import ServerEndpoint
from tritonlab.server.launch import ServerOptions, running_server
from tritonlab.server.process import TritonServer
from tritonlab.server.stats import ServerStatsDelta, StatsSnapshot, stats_delta


def step_variant(
    batching: bool = False,
    delay_us: int = 0,
    instances: int = 1,
    kind: str = "KIND_CPU",
    max_batch: int = 64,
    backend: str = DEFAULT_BACKEND,
    precision: str = DEFAULT_PRECISION,
) -> ServingVariant:
    """The one configuration a single step serves, from the step's flags."""
    parts = [f"batching {delay_us} µs" if batching else "no batching", f"count={instances}"]
    if (backend, precision) != (DEFAULT_BACKEND, DEFAULT_PRECISION):
        parts.append(f"{backend} {precision}")
    variant = ServingVariant(
        "baseline",
        ", ".join(parts),
        dynamic_batching=batching,
        max_queue_delay_us=delay_us if batching else 0,
        instance_count=instances,
        instance_kind=kind,
        max_batch_size=max_batch,
        backend=backend,
        precision=precision,
    )
    variant.validate()
    return variant


@dataclass(frozen=True)
class ServedModel:
    """A model being served: the endpoint, its name there, what the ONNX file (or the
    repository's config) declares, the configuration served, and the models it calls."""

    server: ServerEndpoint
    model_name: str
    info: OnnxModelInfo
    variant: ServingVariant
    # A repository model's ensemble steps or BLS callees: (name in the user's repository,
    # served name); empty for an ONNX file.
    called: tuple[tuple[str, str], ...] = ()


@contextlib.contextmanager
def served_model(
    model: Path,
    name: str | None,
    variant: ServingVariant,
    options: ServerOptions,
    repo: Path | None = None,
    info: OnnxModelInfo | None = None,
) -> Iterator[ServedModel]:
    """Serve one ONNX file as ``variant`` in ``repo`` (a temporary folder when None), or reach
    ``options.url`` and load it there; the server stops when the block ends.

    ``info``: a model of a user's repository (``load_repository_info``), served instead as its
    own config says (``variant`` is not used), with the models it calls, loaded callees first
    under explicit model control; with ``options.url`` the server's own copies are loaded.
    """
    info = info or load_model_info(model)
    origin = info.origin
    # a repository model is served as its own config says; an ONNX file as ``variant``
    variant = own_baseline(info) or for_model(variant, info.batched)
    model_name = check_model_name(name or origin.model)
    with contextlib.ExitStack() as stack:
        if repo is not None:
            gateway.open_root(repo, {"--repository": origin.root}, "--repo")
        folder = repo or stack.enter_context(gateway.temporary_folder("tritonlab-")).root
        models = RunLayout(folder).models
        called, order = tuple((n, n) for n in origin.called), [*origin.called, model_name]
        if not options.url:
            written = add_model(models, info, model_name, variant)
            called, order = written.called, load_order(written)
        server = stack.enter_context(
            running_server(options, models, folder / SERVER_LOG_FILE, explicit_model_control=True)
        )
        for served in order:
            server.load_model(served)
        yield ServedModel(server, model_name, info, variant, called)


@contextlib.contextmanager
def serving(
    target: Path,
    name: str | None,
    variant: ServingVariant,
    options: ServerOptions,
    repo: Path | None = None,
    info: OnnxModelInfo | None = None,
) -> Iterator[TritonServer]:
    """Start tritonserver on a repository folder as it is, on one ONNX file as ``variant``, or
    on a copy of a repository model (``info``) as its own config says, with the models it
    calls; yields the running server (``serve`` never reaches a ``--url``)."""
    with contextlib.ExitStack() as stack:
        if info is None and target.is_dir():
            log = stack.enter_context(gateway.temporary_folder("tritonlab-")).root / "triton.log"
            server: ServerEndpoint = stack.enter_context(running_server(options, target, log))
        else:
            served = served_model(target, name, variant, options, repo, info)
            server = stack.enter_context(served).server
        if not isinstance(server, TritonServer):
            raise ServerError("serve starts its own tritonserver; it cannot serve a --url")
        yield server


@dataclass(frozen=True)
class InferStep:
    """One validated request per protocol, and the inputs they sent."""

    inputs: ModelInputs
    checks: tuple[InferCheck, ...]


def infer_step(
    model: Path,
    name: str | None,
    protocols: Sequence[str],
    batch_size: int,
    options: ServerOptions,
    shapes: dict[str, tuple[int, ...]],
    input_data: Path | None = None,
    variant: ServingVariant | None = None,
    info: OnnxModelInfo | None = None,
) -> InferStep:
    """Serve ``model`` as ``variant`` (default: one onnxruntime instance) or reach ``--url``,
    send one request per protocol, check each answer against onnxruntime on the same inputs.

    ``info``: a model of a user's repository, served as its config says and checked against
    its ``--reference`` file where it has one, else against the shapes and dtypes its config
    declares (an ONNX model without one: against onnxruntime).
    """
    with served_model(model, name, variant or step_variant(), options, info=info) as served:
        inputs = checked_shapes(served.info, shapes, input_data)
        checks = tuple(
            check_answer(
                served.server,
                served.model_name,
                served.info,
                p,
                batch_size,
                inputs,
                engine=served.variant.engine,
                precision=served.variant.precision,
            )
            for p in protocols
        )
    return InferStep(inputs, checks)


@dataclass(frozen=True)
class PerfStep:
    """One perf_analyzer measurement, what the server's statistics saw during it, and for a
    pipeline (an ensemble, a BLS model) each called model's statistics over the same window."""

    run: PerfRun
    server: ServerStatsDelta
    called: CalledWindow


@dataclass(frozen=True)
class PerfLoad:
    """The load of a single perf step: closed-loop concurrency or an open-loop rate."""

    protocol: str = "grpc"
    batch_size: int = 1
    concurrency: int = 8
    request_rate_per_s: float | None = None
    window_ms: int = 2000
    stability_pct: float = 25.0
    request_distribution: str = "poisson"  # how an open-loop rate's requests are spaced


def perf_step(
    model: Path,
    name: str | None,
    variant: ServingVariant,
    load: PerfLoad,
    options: ServerOptions,
    out_dir: Path,
    shapes: dict[str, tuple[int, ...]],
    input_data: Path | None = None,
    info: OnnxModelInfo | None = None,
) -> PerfStep:
    """Serve ``model`` as ``variant`` (or reach ``--url``) and measure it once with
    perf_analyzer; raw output goes to ``out_dir``. ``info``: a model of a user's repository,
    measured as its config says, with the statistics of every model it calls."""
    check_choice("--protocol", load.protocol, PROTOCOLS)  # before any server starts
    if load.request_distribution not in ARRIVALS:
        raise TritonlabError(
            f"--request-distribution must be one of {', '.join(ARRIVALS)}, "
            f"got {load.request_distribution!r}"
        )
    gateway.open_root(
        out_dir,
        {
            "the model": model,
            "--repository": info.origin.root if info else None,
            "--input-data": input_data,
        },
    )
    perf_install = locate_perf_analyzer()
    with served_model(model, name, variant, options, info=info) as served:
        server, model_name, info = served.server, served.model_name, served.info
        inputs = checked_shapes(info, shapes, input_data)
        data_file = inputs.write_perf_data(out_dir / f"{model_name}.input_data.json")
        dynamic = {s.name for s in info.inputs if -1 in s.dims}
        settings = PerfSettings(
            model_name=model_name,
            url=server.url(load.protocol),
            protocol=load.protocol,
            batch_size=load.batch_size,
            concurrency=None if load.request_rate_per_s else load.concurrency,
            request_rate_per_s=load.request_rate_per_s,
            request_distribution=load.request_distribution,  # narrowed by the check above
            measurement_interval_ms=load.window_ms,
            stability_percentage=load.stability_pct,
            input_shapes={k: v for k, v in inputs.sent_shapes.items() if k in dynamic},
            input_data=str(data_file),
            # open loop needs async requests (as a plan's open-loop cells have them)
            async_mode=load.request_rate_per_s is not None,
            requests_per_sequence=REQUESTS_PER_SEQUENCE if state_tensors(info) else None,
        )
        watched = [model_name, *(s for _, s in served.called)]
        before = {n: StatsSnapshot.from_triton(server.model_statistics(n)) for n in watched}
        result = run_perf(perf_install, settings, out_dir, model_name)
        after = {n: StatsSnapshot.from_triton(server.model_statistics(n)) for n in watched}
    return PerfStep(
        result,
        stats_delta(before[model_name], after[model_name]),
        called_window(served.called, before, after),
    )
