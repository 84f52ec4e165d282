"""Single-step commands: ``serve``, ``infer`` and ``perf``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from tritonlab.cli.common import app, out, user_errors
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
from tritonlab.errors import ServerError, TritonlabError
from tritonlab.server.endpoint import RESTRICTED_HEADER
from tritonlab.server.stats import ServerStatsDelta


@app.command()
@option_groups
def serve(
    model: Annotated[Path, typer.Argument(help="An ONNX file, or a model repository folder.")],
    repo: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--repo", help="Where to write the repository for an ONNX file."),
    ] = None,
    name: NameOpt = None,
    http_port: Annotated[int, typer.Option("--http-port", help="0 picks a free port.")] = 8000,
    grpc_port: Annotated[int, typer.Option("--grpc-port", help="0 picks a free port.")] = 8001,
    metrics_port: Annotated[int, typer.Option("--metrics-port", help="0: free port.")] = 8002,
    *,
    served: VariantFlags,
    local: LocalServerFlags,
) -> None:
    """Serve an ONNX model (or a whole repository) on Triton until Ctrl-C.

    Example: tritonlab serve model.onnx --dynamic-batching --instances 2
    """
    from tritonlab.pipeline.steps import serving

    with user_errors("server stopped"):
        options = local.options(http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port)
        with serving(model, name, served.variant(), options, repo) as server:
            http_url, grpc_url = server.public_urls
            out.print(
                f"Triton ready: HTTP {http_url}, gRPC {grpc_url}, metrics "
                f"{server.metrics_url}; log {server.log_path}; Ctrl-C stops it",
                highlight=False,
            )
            if server.exposure is not None:
                out.print(
                    f"listening on {server.exposure.host} through tritonlab's proxy: every request "
                    f"but health needs the header (gRPC: metadata) '{RESTRICTED_HEADER}: "
                    "$TRITONLAB_API_KEY'; no TLS (put a TLS terminator in front); metrics stay "
                    "on 127.0.0.1",
                    highlight=False,
                    markup=False,
                )
            while server.is_alive():
                time.sleep(0.5)
            raise ServerError(f"tritonserver exited unexpectedly: {server.failure_detail()}")


@app.command()
@option_groups
def infer(
    model: Annotated[Path, typer.Argument(help="The ONNX model file (also the reference).")],
    name: NameOpt = None,
    protocol: Annotated[str, typer.Option("--protocol", help="http, grpc or both.")] = "both",
    batch_size: BatchSizeOpt = 2,
    *,
    server: EndpointFlags,
    inputs: InputFlags,
    backend: BackendOpt = "onnxruntime",
    precision: PrecisionOpt = "f32",
) -> None:
    """Send one validated request and compare the output with onnxruntime.

    Starts a server on free loopback ports unless --url is given.
    Example: tritonlab infer model.onnx --protocol both
    """
    from tritonlab.models.input_graph import parse_shape_args
    from tritonlab.pipeline.steps import infer_step, step_variant

    with user_errors():
        if protocol not in ("http", "grpc", "both"):
            raise TritonlabError(f"--protocol must be http, grpc or both, got {protocol!r}")
        protocols = ("http", "grpc") if protocol == "both" else (protocol,)
        shapes = parse_shape_args(inputs.shape or [])
        variant = step_variant(backend=backend, precision=precision)
        step = infer_step(
            model, name, protocols, batch_size, server.options(), shapes, inputs.input_data, variant
        )
        for line in step.inputs.describe():
            out.print(f"input {line}", highlight=False, soft_wrap=True, markup=False)
        for check in step.checks:
            out.print(
                f"{check.protocol} ({check.engine}): {check.input_shapes} -> "
                f"{check.output_shapes}, max abs diff vs onnxruntime {check.max_abs_diff:.3g} "
                f"(tolerance {check.tolerance_abs:g}), {check.round_trip_ms:.1f} ms",
                highlight=False,
                markup=False,
            )


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
    model: Annotated[Path, typer.Argument(help="The ONNX model file.")],
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for raw perf_analyzer output.")
    ] = Path("perf-out"),
    name: NameOpt = None,
    concurrency: ConcurrencyOpt = 8,
    request_rate: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--request-rate", help="Open-loop load in req/s (Poisson)."),
    ] = None,
    protocol: ProtocolOpt = "grpc",
    batch_size: BatchSizeOpt = 1,
    window_ms: WindowOpt = 2000,
    stability: StabilityOpt = 25.0,
    *,
    served: VariantFlags,
    server: EndpointFlags,
    inputs: InputFlags,
) -> None:
    """Measure one configuration with perf_analyzer; print what it and the server saw.

    Example: tritonlab perf model.onnx --dynamic-batching --concurrency 16
    """
    from tritonlab.models.input_graph import parse_shape_args
    from tritonlab.pipeline.steps import PerfLoad, perf_step

    with user_errors():
        load = PerfLoad(protocol, batch_size, concurrency or 8, request_rate, window_ms, stability)
        step = perf_step(
            model,
            name,
            served.variant(),
            load,
            server.options(),
            out_dir,
            parse_shape_args(inputs.shape or []),
            inputs.input_data,
        )
        result, delta = step.run, step.server
        m = result.measurement
        out.print(
            "command: " + " ".join(result.command), highlight=False, soft_wrap=True, markup=False
        )
        if m is None:
            raise TritonlabError(f"perf_analyzer measured nothing; see {out_dir}")
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
