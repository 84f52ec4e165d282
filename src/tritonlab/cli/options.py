"""Every option the commands share, declared once, and the option groups built from them.

Typer has no option groups: each option must be a parameter of the command function. So a
group is a frozen dataclass whose fields carry the typer ``Annotated`` definitions, and
``option_groups`` spreads a parameter annotated with such a record into its fields, in place
(so ``--help`` lists them where the parameter stands), and packs them back into the record
before the command runs. A command therefore takes a handful of records, and the library the
records it needs (``ServerOptions``, a ``ServingVariant``, ...), never long positional lists.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tritonlab.cli.repository_options import RepositoryFlags
from tritonlab.experiments.blocks import DEFAULT_MAX_BLOCKS
from tritonlab.repository.variants import ServingVariant
from tritonlab.server.launch import ServerOptions

if TYPE_CHECKING:
    from tritonlab.pipeline.project import Rounds, RunControls

API_KEY_VARIABLE = "TRITONLAB_API_KEY"

# --- server: where it comes from, where it listens ---------------------------------------------
UrlOpt = Annotated[
    str | None,
    typer.Option("--url", help="Use a running Triton at HOST:PORT (HTTP) instead of starting one."),
]
GrpcUrlOpt = Annotated[
    str | None, typer.Option("--grpc-url", help="gRPC HOST:PORT of --url (default: its port + 1).")
]
ServerBinOpt = Annotated[
    Path | None,
    typer.Option("--server-bin", help="External tritonserver binary (e.g. an NGC container's)."),
]
BackendDirOpt = Annotated[
    Path | None, typer.Option("--backend-dir", help="Backend folder for --server-bin.")
]
HostOpt = Annotated[
    str,
    typer.Option(
        "--host",
        help="Address the server binds to. On 127.0.0.1 (the default) tritonserver has no "
        "authentication: any local user of this machine can call it, load a Python model "
        "through it (code run as you) and reach the 2.51 server's known advisories; measure on a "
        "single-user machine or container (docs/reliability.md, Exposure).",
    ),
]
RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Measure on a Ray cluster: its address (host:port) or 'auto'. Every node that "
        "offers the 'tritonlab' resource measures whole rounds on its own server "
        "(docs/scaling.md); needs tritonlab[ray].",
    ),
]

# --- measurement ---------------------------------------------------------------------------------
# An option several commands take, each with help in its own terms (its defaults differ), is
# declared once here: its flag and its limits; the command gives the help.


def engine_option(help: str) -> Any:
    """``--engine``: blocks or classic."""
    return typer.Option("--engine", help=help)


def target_load_option(help: str) -> Any:
    """``--target-load``: the load (infer/s) a pick must carry."""
    return typer.Option("--target-load", min=1.0, help=help)


EngineOpt = Annotated[
    str,
    engine_option(
        "blocks (every configuration loaded at once, short cells in a shuffled block order, "
        "robust paired intervals, an A/A control in run/demo, an interference monitor; "
        "docs/measuring.md) or classic (one configuration loaded at a time, perf_analyzer's "
        "stable windows)."
    ),
]
SweepEngineOpt = Annotated[
    str | None,
    engine_option(
        "blocks or classic (default: the plan's measurement.engine, itself blocks by "
        "default; docs/measuring.md). A --ray run uses classic."
    ),
]
BlocksOpt = Annotated[
    int | None,
    typer.Option(
        "--repeats",
        min=1,
        help="Rounds (blocks) measured first (default: 10 with --engine blocks, 3 classic).",
    ),
]
MaxRepeatsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-repeats",
        min=1,
        help="Measure more interleaved rounds, up to this many, while a verdict the headline "
        "or the picks rest on is undecided or, with the block engine, wider than its target "
        f"(default: {DEFAULT_MAX_BLOCKS} with the block engine, 5 with the classic one; = the "
        "first rounds "
        "turns it off).",
    ),
]
AdaptiveBudgetOpt = Annotated[
    float | None,
    typer.Option(
        "--adaptive-budget-s",
        min=0.0,
        help="Seconds the extra rounds may take in all; a round starts only if it fits, judged "
        "from the median cell so far (default with the block engine: for a run or demo no "
        "round that would take its measuring in all past 250 s, for a sweep 150; classic: 60 "
        "for a run, 120 for a sweep). A budget given replaces the default.",
    ),
]
LatencyBudgetOpt = Annotated[
    float | None,
    typer.Option(
        "--latency-budget-us",
        min=1.0,
        help="p99 budget for the recommendations (overrides the plan's).",
    ),
]
SweepTargetLoadOpt = Annotated[
    float | None,
    target_load_option("Load (infer/s) the latency-first pick must carry (overrides the plan's)."),
]
ConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        help="Requests in flight (default: 8; 2 per core for threads x instances).",
    ),
]
ConfigsOpt = Annotated[
    str,
    typer.Option(
        "--configs",
        help="auto, seed (batching and instances), compute (threads x instances) or backends "
        "(onnxruntime vs OpenVINO f32/bf16); auto picks compute when one execution takes over "
        "1 ms in-process.",
    ),
]
LoadTraceOpt = Annotated[
    Path | None,
    typer.Option(
        "--load-trace",
        help="Replay this trace CSV (timestamp_s, interarrival_ms or interval_us; see "
        "`tritonlab trace`) as the load, through perf_analyzer's --request-intervals.",
    ),
]
ProtocolOpt = Annotated[str, typer.Option("--protocol", help="grpc or http.")]
CpuSplitOpt = Annotated[
    bool,
    typer.Option(
        "--cpu-split/--no-cpu-split",
        help="Run the server and perf_analyzer on disjoint CPUs (perf_analyzer on a quarter, at "
        "least one) so they do not compete for cores: far less noise, and the server has fewer "
        "cores than the machine. Ignored with --url.",
    ),
]
WindowOpt = Annotated[
    int, typer.Option("--window-ms", min=200, help="perf_analyzer measurement window (ms).")
]
BatchSizeOpt = Annotated[int, typer.Option("--batch-size", min=1)]
StabilityOpt = Annotated[
    float, typer.Option("--stability", min=1.0, help="perf_analyzer stability threshold (%).")
]

# --- results and project folders -----------------------------------------------------------------
OutOpt = Annotated[Path, typer.Option("--out", help="Project folder to write (resumable).")]
ResumableOutOpt = Annotated[
    Path, typer.Option("--out", help="Project folder to write (re-run to resume).")
]
FreshOpt = Annotated[
    bool,
    typer.Option(
        "--fresh",
        help="Move earlier results in --out aside (into --out/.trash/; only in a folder tritonlab "
        "made).",
    ),
]
RemeasureOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--remeasure",
        help="Measure this stored cell again (its id: the file name in results/cells without "
        ".json; globs work; repeatable). The old file is kept as .json.replaced.",
    ),
]

# --- what a command that reads a run folder writes beside its output ------------------------------
JsonOutOpt = Annotated[
    Path | None, typer.Option("--json", help="Write the typed record as JSON here ('-': stdout).")
]
MarkdownOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--markdown",
        help="Write the summary as markdown here ('-': stdout), e.g. $GITHUB_STEP_SUMMARY.",
    ),
]

# --- the model and its inputs --------------------------------------------------------------------
NameOpt = Annotated[
    str | None, typer.Option("--name", help="Model name in Triton (default: the file's stem).")
]
ShapeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--shape",
        help="NAME:D1,D2,... sets an input's dims without the batch dim (repeatable); dynamic "
        "dims default to 128.",
    ),
]
InputDataOpt = Annotated[
    Path | None,
    typer.Option(
        "--input-data",
        help="Send your own samples: an .npz (one array per input, samples on the first axis) "
        "or perf_analyzer's JSON file.",
    ),
]

# --- one serving configuration -------------------------------------------------------------------
MaxBatchOpt = Annotated[int, typer.Option("--max-batch-size", min=1, help="Triton max_batch_size.")]
BatchingOpt = Annotated[
    bool, typer.Option("--dynamic-batching/--no-dynamic-batching", help="Triton dynamic batching.")
]
DelayOpt = Annotated[
    int, typer.Option("--max-queue-delay-us", min=0, help="dynamic_batching queue delay (µs).")
]
InstancesOpt = Annotated[int, typer.Option("--instances", min=1, help="instance_group count.")]
KindOpt = Annotated[str, typer.Option("--kind", help="instance_group kind: KIND_CPU or KIND_GPU.")]
BackendOpt = Annotated[
    str, typer.Option("--backend", help="What runs model.onnx: onnxruntime or openvino.")
]
PrecisionOpt = Annotated[
    str, typer.Option("--precision", help="openvino: f32, bf16 or f16 (onnxruntime: f32 only).")
]


class _ServerSource:
    """A group of server flags (its fields are ``ServerOptions``')."""

    def options(self, **more: Any) -> ServerOptions:
        """The library's record of these flags, and of ``more`` (e.g. the ports of serve), with
        the API key from the environment, never a flag: a command line is visible to every
        user (ps)."""
        return ServerOptions(**vars(self), **more, api_key=os.environ.get(API_KEY_VARIABLE) or None)


# --- the groups ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EndpointFlags(_ServerSource):
    """A server to reach (``--url``) or to start (``--server-bin``), on loopback."""

    url: UrlOpt = None
    grpc_url: GrpcUrlOpt = None
    server_bin: ServerBinOpt = None
    backend_dir: BackendDirOpt = None


@dataclass(frozen=True)
class ServerFlags(EndpointFlags):
    """``EndpointFlags``, the address a started server binds to, and whether the server and
    perf_analyzer run on disjoint CPUs."""

    host: HostOpt = "127.0.0.1"
    cpu_split: CpuSplitOpt = True


@dataclass(frozen=True)
class LocalServerFlags(_ServerSource):
    """The server ``serve`` starts: which binary, and the address it binds to."""

    server_bin: ServerBinOpt = None
    backend_dir: BackendDirOpt = None
    host: HostOpt = "127.0.0.1"


@dataclass(frozen=True)
class InputFlags:
    """The inputs sent: dims of dynamic axes, or the user's own samples."""

    shape: ShapeOpt = None
    input_data: InputDataOpt = None


@dataclass(frozen=True)
class ResultFlags:
    """What happens to results already in the project folder."""

    fresh: FreshOpt = False
    remeasure: RemeasureOpt = None

    def controls(self, rounds: Rounds, **more: Any) -> RunControls:
        """The pipeline's run controls: these flags, the extra rounds ``rounds`` (an
        ``engine_rounds`` result) allows, and ``more`` (``time_budget_s``, ``cluster``)."""
        from tritonlab.pipeline.project import RunControls

        return RunControls(
            fresh=self.fresh,
            max_repeats=rounds.most,
            adaptive_budget_s=rounds.extra_budget_s,
            measuring_budget_s=rounds.measuring_budget_s,
            remeasure=tuple(self.remeasure or ()),
            **more,
        )


@dataclass(frozen=True)
class RoundFlags:
    """How many rounds ``run`` and ``demo`` measure, and with which engine."""

    repeats: BlocksOpt = None
    max_repeats: MaxRepeatsOpt = None
    adaptive_budget_s: AdaptiveBudgetOpt = None
    engine: EngineOpt = "blocks"


@dataclass(frozen=True)
class PlanFlags:
    """The configurations and load of ``run``'s and ``demo``'s default plan."""

    concurrency: ConcurrencyOpt = None
    protocol: ProtocolOpt = "grpc"
    window_ms: WindowOpt = 2000
    stability: StabilityOpt = 25.0
    max_batch_size: MaxBatchOpt = 64
    configs: ConfigsOpt = "auto"
    load_trace: LoadTraceOpt = None


@dataclass(frozen=True)
class VariantFlags:
    """The one serving configuration of ``serve`` and ``perf`` (its fields are
    ``step_variant``'s)."""

    batching: BatchingOpt = False
    delay_us: DelayOpt = 0
    instances: InstancesOpt = 1
    kind: KindOpt = "KIND_CPU"
    max_batch: MaxBatchOpt = 64
    backend: BackendOpt = "onnxruntime"
    precision: PrecisionOpt = "f32"

    def variant(self) -> ServingVariant:
        """The validated ``ServingVariant`` these flags describe."""
        from tritonlab.pipeline.steps import step_variant

        return step_variant(**vars(self))


@dataclass(frozen=True)
class DemoFlags:
    """Everything ``demo`` measures with."""

    rounds: RoundFlags
    plan: PlanFlags
    results: ResultFlags
    server: ServerFlags

    @property
    def inputs(self) -> InputFlags:
        """A built-in model's inputs are its own: no flags."""
        return InputFlags()


@dataclass(frozen=True)
class RunFlags:
    """Everything ``run`` measures with: ``demo``'s, the inputs sent, and a repository."""

    rounds: RoundFlags
    plan: PlanFlags
    inputs: InputFlags
    results: ResultFlags
    server: ServerFlags
    repository: RepositoryFlags


def _options_of(group: Any) -> list[inspect.Parameter]:
    """The options of a group, in order; a field that is itself a group gives its own."""
    hints = typing.get_type_hints(group, include_extras=True)
    params: list[inspect.Parameter] = []
    for field in dataclasses.fields(group):
        if dataclasses.is_dataclass(hints[field.name]):
            params.extend(_options_of(hints[field.name]))
        else:
            params.append(
                inspect.Parameter(
                    field.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=field.default,
                    annotation=hints[field.name],
                )
            )
    return params


def _pack(group: Any, values: dict[str, Any]) -> Any:
    """The ``group`` record of the parsed ``values`` (taken out of them)."""
    hints = typing.get_type_hints(group, include_extras=True)
    return group(
        **{
            f.name: _pack(hints[f.name], values)
            if dataclasses.is_dataclass(hints[f.name])
            else values.pop(f.name)
            for f in dataclasses.fields(group)
        }
    )


def option_groups(command: Callable[..., None]) -> Callable[..., None]:
    """Let typer see the options of ``command``'s group parameters (annotated with a group: a
    dataclass), in place, and call ``command`` with the records packed."""
    hints = typing.get_type_hints(command, include_extras=True)
    params: list[inspect.Parameter] = []  # what typer sees: each group's options in its place
    groups: dict[str, Any] = {}  # the group parameters by name
    for param in inspect.signature(command).parameters.values():
        annotation = hints.get(param.name, param.annotation)
        if dataclasses.is_dataclass(annotation):
            groups[param.name] = annotation
            params.extend(_options_of(annotation))
        else:
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=annotation))
    names = [p.name for p in params]
    if clashes := sorted({n for n in names if names.count(n) > 1}):
        raise TypeError(f"{command.__name__}: options declared twice: {', '.join(clashes)}")

    @functools.wraps(command)
    def packed(**values: Any) -> None:
        for name, group in groups.items():
            values[name] = _pack(group, values)
        command(**values)

    packed.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    packed.__annotations__ = {p.name: p.annotation for p in params}
    return packed
