"""Single-step commands: ``serve``, ``infer`` and ``perf`` (of an ONNX file, or of a model of a
Triton repository as it is: ``--repository DIR --model NAME``)."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tritonlab.cli.common import app, out, say, user_errors
from tritonlab.cli.options import (
    BackendOpt,
    BatchSizeOpt,
    ConcurrencyOpt,
    EndpointFlags,
    InputFlags,
    LocalServerFlags,
    NameOpt,
    PrecisionOpt,
    ProtocolOpt,
    StabilityOpt,
    VariantFlags,
    WindowOpt,
    option_groups,
)
from tritonlab.cli.repository_options import RepositoryFlags
from tritonlab.errors import ConfigError, ServerError, TritonlabError
from tritonlab.server.endpoint import RESTRICTED_HEADER
from tritonlab.server.stats import ServerStatsDelta

if TYPE_CHECKING:
    from tritonlab.client.infer import InferCheck
    from tritonlab.models.inspect import OnnxModelInfo
    from tritonlab.server.called_models import CalledWindow
    from tritonlab.server.launch import ServerOptions


def model_to_serve(
    flags: RepositoryFlags,
    model: Path | None,
    options: ServerOptions,
    command: str,
    changed: str = "",
) -> tuple[Path, OnnxModelInfo | None]:
    """The model file a step serves, and the repository model ``--repository DIR --model NAME``
    names (read before any server starts); one-line errors for flags ``command`` has no use
    for, and for serving flags given (``changed``: their names) to a repository model, which is
    served as its own config.pbtxt says."""
    if not flags.given(model):
        if model is None:
            raise ConfigError(
                "give an ONNX file or a model repository folder, or --repository DIR --model NAME"
                if command == "serve"
                else "give the ONNX model file, or --repository DIR --model NAME"
            )
        return model, None
    if flags.step is not None:
        raise ConfigError(
            f"--step chooses the ensemble step that run, sweep and tune vary; {command} serves "
            "the model as its config.pbtxt says, so leave --step out"
        )
    if flags.reference is not None and command != "infer":
        raise ConfigError(
            f"--reference is what infer and run check answers against; {command} checks none, "
            "so leave it out"
        )
    from tritonlab.pipeline.project import load_repository_info

    assert flags.repository is not None and flags.repo_model is not None
    info = load_repository_info(
        flags.repository, flags.repo_model, options, reference=flags.reference
    )
    if changed:
        raise ConfigError(
            f"{changed} configure an ONNX file; a --repository model is served as its own "
            "config.pbtxt says (change it there, or compare one-knob changes with `tritonlab run "
            "--repository`)"
        )
    return info.path, info


def describe_source(info: OnnxModelInfo, url: str | None = None) -> str:
    """A repository model in words: what it is, what it calls, where it came from (with
    ``url``: the server there serves its own copy, which the repository describes)."""
    source = info.origin
    calls = f", calling {', '.join(source.called)}" if source.called else ""
    what = f"{source.model} ({source.kind} model{calls})"
    if url:
        return f"{what} on the server at {url}, as {source.root} describes it"
    return f"{what} of {source.root}, as its config.pbtxt says"


VARIANT_FLAGS = (
    "--dynamic-batching, --max-queue-delay-us, --instances, --kind, --max-batch-size, "
    "--backend and --precision"
)


@app.command()
@option_groups
def serve(
    model: Annotated[
        Path | None,
        typer.Argument(
            help="An ONNX file, or a model repository folder (served as it is, every model)."
        ),
    ] = None,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            help="Where to write the served repository (of an ONNX file, or of the --repository "
            "model's copy); default: a temporary folder.",
        ),
    ] = None,
    name: NameOpt = None,
    http_port: Annotated[int, typer.Option("--http-port", help="0 picks a free port.")] = 8000,
    grpc_port: Annotated[int, typer.Option("--grpc-port", help="0 picks a free port.")] = 8001,
    metrics_port: Annotated[int, typer.Option("--metrics-port", help="0: free port.")] = 8002,
    open_admin_api: Annotated[
        bool,
        typer.Option(
            "--open-admin-api",
            help="With --host beyond loopback: key holders may also use model control (a "
            "loaded model's code runs as you), shared memory, trace and log settings; "
            "refused (403) without it.",
        ),
    ] = False,
    max_request_mib: Annotated[
        int,
        typer.Option(
            "--max-request-mib",
            min=1,
            help="With --host beyond loopback: the largest request body taken (413 above).",
        ),
    ] = 64,
    *,
    served: VariantFlags,
    local: LocalServerFlags,
    repository: RepositoryFlags,
) -> None:
    """Serve an ONNX model (or a whole repository) on Triton until Ctrl-C.

    With --repository DIR --model NAME: that model as its own config.pbtxt says, and the models
    it calls (an ensemble's steps, a BLS model's callees), from a copy (the repository is only
    read), loaded callees first.
    Example: tritonlab serve model.onnx --dynamic-batching --instances 2;
    tritonlab serve --repository models --model pipeline
    """
    from tritonlab.pipeline.steps import serving

    with user_errors("server stopped"):
        options = local.options(
            http_port=http_port,
            grpc_port=grpc_port,
            metrics_port=metrics_port,
            open_admin_api=open_admin_api,
            max_request_bytes=max_request_mib << 20,
        )
        changed = VARIANT_FLAGS if served != VariantFlags() else ""
        path, info = model_to_serve(repository, model, options, "serve", changed)
        with serving(path, name, served.variant(), options, repo, info) as server:
            if info is not None:
                say(f"serving {describe_source(info)} (the repository is only read)")
            http_url, grpc_url = server.public_urls
            if server.exposure is not None:
                out.print(
                    f"listening on {server.exposure.host} through tritonlab's proxy: every request "
                    f"but health needs the header (gRPC: metadata) '{RESTRICTED_HEADER}: "
                    "$TRITONLAB_API_KEY'; model control, shared memory, trace and logging "
                    + ("open to key holders" if open_admin_api else "closed (--open-admin-api)")
                    + "; no TLS (put a TLS terminator in front); metrics stay on 127.0.0.1",
                    highlight=False,
                    markup=False,
                )
            # the ready line comes last: whoever waits for it has read every line before it
            out.print(
                f"Triton ready: HTTP {http_url}, gRPC {grpc_url}, metrics "
                f"{server.metrics_url}; log {server.log_path}; Ctrl-C stops it",
                highlight=False,
            )
            while server.is_alive():
                time.sleep(0.5)
            raise ServerError(f"tritonserver exited unexpectedly: {server.failure_detail()}")


@app.command()
@option_groups
def infer(
    model: Annotated[
        Path | None, typer.Argument(help="The ONNX model file (also the reference).")
    ] = None,
    name: NameOpt = None,
    protocol: Annotated[str, typer.Option("--protocol", help="http, grpc or both.")] = "both",
    batch_size: BatchSizeOpt = 2,
    *,
    server: EndpointFlags,
    inputs: InputFlags,
    backend: BackendOpt = "onnxruntime",
    precision: PrecisionOpt = "f32",
    repository: RepositoryFlags,
) -> None:
    """Send one validated request and compare the output with onnxruntime.

    Starts a server on free loopback ports unless --url is given. With --repository DIR --model
    NAME: that model as its config.pbtxt says, with the models it calls, checked against your
    --reference .npz (its inputs sent, its outputs expected), else against the shapes and dtypes
    its config declares (an ONNX model: against onnxruntime).
    Example: tritonlab infer model.onnx --protocol both;
    tritonlab infer --repository models --model pipeline --reference expected.npz
    """
    from tritonlab.models.input_graph import parse_shape_args
    from tritonlab.pipeline.steps import infer_step, step_variant

    with user_errors():
        if protocol not in ("http", "grpc", "both"):
            raise TritonlabError(f"--protocol must be http, grpc or both, got {protocol!r}")
        protocols = ("http", "grpc") if protocol == "both" else (protocol,)
        shapes = parse_shape_args(inputs.shape or [])
        variant = step_variant(backend=backend, precision=precision)
        options = server.options()
        changed = "--backend and --precision" if variant != step_variant() else ""
        path, info = model_to_serve(repository, model, options, "infer", changed)
        step = infer_step(
            path, name, protocols, batch_size, options, shapes, inputs.input_data, variant, info
        )
        reference = info.origin.reference if info is not None else None
        if info is not None:
            say(f"served {describe_source(info, server.url)}")
        if reference is not None:
            say(f"checked against --reference {reference}: its inputs sent, its outputs expected")
        else:
            for line in step.inputs.describe():
                say(f"input {line}")
        for check in step.checks:
            say(check_line(check))


def check_line(check: InferCheck) -> str:
    """One checked request in words: shapes, what the answer was checked against, and how
    close it came."""
    from tritonlab.client.infer import SHAPES_ONLY

    head = f"{check.protocol} ({check.engine}): {check.input_shapes} -> {check.output_shapes}"
    if check.reference == SHAPES_ONLY:
        against = "checked against the config's shapes and dtypes only (no --reference given)"
    else:
        ref = check.reference
        name = ref if ref == "onnxruntime" else f"--reference {ref}"
        against = (
            f"max abs diff vs {name} {check.max_abs_diff:.3g} (tolerance {check.tolerance_abs:g})"
        )
        if check.sequence_requests:
            against += f" over a {check.sequence_requests}-request sequence"
    return f"{head}, {against}, {check.round_trip_ms:.1f} ms"


def service_note(url: str, delta: ServerStatsDelta) -> str:
    """What a ``--url`` measurement is: a service, whose replicas tritonlab cannot see."""
    head = (
        f"measured the service at {url}, not one server tritonlab started: no server CPU, and "
        "behind a load balancer the per-replica figures are unknown"
    )
    counts = (delta.inference_count, delta.execution_count, delta.request_count)
    if min(counts) < 0 or delta.request_count == 0:
        return head + (
            "; the server statistics changed inconsistently between two calls (different "
            "replicas answered them), so none are shown"
        )
    return head + (
        f"; the replica that answered the statistics calls saw {delta.request_count:,} requests"
        f" (queue {delta.queue_us_per_request:,.0f} µs, compute infer "
        f"{delta.compute_infer_us_per_request:,.0f} µs, mean batch {delta.mean_batch_size:.1f})"
    )


@app.command()
@option_groups
def perf(
    model: Annotated[
        Path | None, typer.Argument(help="The ONNX model file (or --repository DIR --model NAME).")
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for raw perf_analyzer output.")
    ] = Path("perf-out"),
    name: NameOpt = None,
    concurrency: ConcurrencyOpt = 8,
    request_rate: Annotated[
        float | None, typer.Option("--request-rate", min=0.001, help="Open-loop load in req/s.")
    ] = None,
    arrivals: Annotated[
        str,
        typer.Option(
            "--request-distribution",
            help="With --request-rate: poisson (random gaps) or constant (evenly spaced).",
        ),
    ] = "poisson",
    protocol: ProtocolOpt = "grpc",
    batch_size: BatchSizeOpt = 1,
    window_ms: WindowOpt = 2000,
    stability: StabilityOpt = 25.0,
    *,
    served: VariantFlags,
    server: EndpointFlags,
    inputs: InputFlags,
    repository: RepositoryFlags,
) -> None:
    """Measure one configuration with perf_analyzer; print what it and the server saw.

    With --repository DIR --model NAME: that model as its config.pbtxt says; for an ensemble or
    a BLS model also each called model's statistics over the same window, and which of them
    binds (the largest share of their summed server time).
    Example: tritonlab perf model.onnx --dynamic-batching --concurrency 16;
    tritonlab perf --repository models --model pipeline
    """
    from tritonlab.models.input_graph import parse_shape_args
    from tritonlab.pipeline.steps import PerfLoad, perf_step

    with user_errors():
        load = PerfLoad(
            protocol, batch_size, concurrency or 8, request_rate, window_ms, stability, arrivals
        )
        options = server.options()
        changed = VARIANT_FLAGS if served != VariantFlags() else ""
        path, info = model_to_serve(repository, model, options, "perf", changed)
        step = perf_step(
            path,
            name,
            served.variant(),
            load,
            options,
            out_dir,
            parse_shape_args(inputs.shape or []),
            inputs.input_data,
            info,
        )
        result, delta = step.run, step.server
        m = result.measurement
        say("command: " + shlex.join(result.command))
        if m is None:
            raise TritonlabError(f"perf_analyzer measured nothing; see {out_dir}")
        if info is not None:
            say(f"measured {describe_source(info, server.url)}")
        client = (
            f"{'stable' if result.stable else 'UNSTABLE'} after {result.trial_count} windows: "
            f"{m.throughput_infer_per_s:,.0f} infer/s, avg {m.latency_avg_us:,.0f} µs, "
            f"p95 {m.latency_p95_us or 0:,.0f} µs, p99 {m.latency_p99_us or 0:,.0f} µs"
        )
        server_side = (
            f"queue {delta.queue_us_per_request:,.0f} µs, compute infer "
            f"{delta.compute_infer_us_per_request:,.0f} µs, mean batch "
            f"{delta.mean_batch_size:.1f}"
        )
        if server.url:
            out.print(f"{client}; raw output in {out_dir}", highlight=False)
            out.print(service_note(server.url, delta), highlight=False)
        else:
            out.print(f"{client}; server: {server_side}; raw output in {out_dir}", highlight=False)
        for line in called_lines(step.called):
            say(line)


def called_lines(window: CalledWindow) -> list[str]:
    """The called models of a pipeline over the measured window, one line each, and the one
    that binds (none for an ONNX file or a Python model that calls nothing)."""
    if not window.models:
        return []
    if not window.consistent:
        return [
            "called models: their statistics changed inconsistently between two calls "
            "(different replicas answered them), so none are shown"
        ]
    lines = ["called models over the same window (server time: requests x time per request):"]
    lines += [
        f"  {m.name}: {m.delta.request_count:,} requests, queue "
        f"{m.delta.queue_us_per_request:,.0f} µs, compute {m.delta.compute_us_per_request:,.0f} "
        f"µs per request, {m.server_time_share:.0%} of their summed server time"
        for m in window.models
    ]
    if (binding := window.binding) is None:
        lines.append("no called model saw a request in this window, so none binds")
    else:
        lines.append(
            f"binding in this window: {binding.name} ({binding.server_time_share:.0%} of the "
            "called models' summed server time)"
        )
    return lines
