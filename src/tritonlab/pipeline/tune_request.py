"""What ``tritonlab tune`` was asked, checked and made ready to search: the goal (a trace's
offered load makes it latency), the run folder opened against every input, the model chosen
and, for an ensemble, the step that binds; only then does ``--fresh`` move earlier results
aside. The CLI parses its flags into a ``TuneRequest``, calls ``prepare_tune`` and
``run_tune``, and prints; the notes come back through ``say``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tritonlab import gateway
from tritonlab.cpu_split import decide_split
from tritonlab.decisions.search import GOALS, Goal, Knobs
from tritonlab.errors import ConfigError, PlanError
from tritonlab.experiments.blocks import ENGINE_BLOCKS, ENGINE_CLASSIC, ENGINES
from tritonlab.experiments.manifest import available_cores
from tritonlab.experiments.plan import MeasurementSettings
from tritonlab.experiments.plan_checks import PlanChecker
from tritonlab.experiments.repository_plan import own_baseline
from tritonlab.experiments.run_folder import claim, discard_results, open_run_folder
from tritonlab.models.state_pairs import refuse_state
from tritonlab.models.zoo import BUILTIN_MODELS
from tritonlab.perf.settings import PROTOCOLS
from tritonlab.perf.trace import KEPT_TO_PCT, read_trace
from tritonlab.pipeline.model_choice import ChosenModel, RepositoryChoice, bind_step, choose_model
from tritonlab.pipeline.project import check_choice, check_measuring_host
from tritonlab.pipeline.tune import TuneSettings
from tritonlab.repository.knobs import HELD_KNOBS, KNOBS
from tritonlab.repository.variants import ServingVariant
from tritonlab.server.launch import ServerOptions

# The knobs tune holds where the user sets them and never moves (the knob table's
# ``tune_held``): read from a repository's own configuration, or from ``tune --hold name=value``.


def held_of(variant: ServingVariant) -> tuple[tuple[str, Any], ...]:
    """The held knobs (the table's ``tune_held``) ``variant`` sets away from their defaults."""
    default = ServingVariant("", "")
    return tuple(
        (k.field, getattr(variant, k.field))
        for k in KNOBS
        if k.tune_held and getattr(variant, k.field) != getattr(default, k.field)
    )


def parse_holds(holds: list[str]) -> tuple[tuple[str, Any], ...]:
    """``tune --hold name=value`` entries as held knobs: a knob tune holds (``HELD_KNOBS``), its
    value a YAML scalar the knob's value rule accepts; ``PlanError`` in one line otherwise."""
    check, held = PlanChecker("--hold"), {}
    for entry in holds:
        name, sep, text = entry.partition("=")
        if name not in HELD_KNOBS or not sep:
            raise PlanError(
                f"--hold {entry}: give name=value, the name one of {', '.join(HELD_KNOBS)} "
                "(tune moves the other knobs itself)"
            )
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        held[HELD_KNOBS[name].field] = check.knob(name, value, name)
    return tuple(held.items())


@dataclass(frozen=True)
class TuneRequest:
    """``tritonlab tune``'s flags, as given (``docs/tune.md``)."""

    model: str | None
    out_dir: Path
    name: str | None = None
    goal: str = "throughput"
    p99_budget_ms: float | None = None
    target_load: float | None = None
    time_budget_s: float = 900.0
    max_race_rounds: int | None = None  # None: 12 with the block engine, 3 classic
    engine: str = ENGINE_BLOCKS
    keep_protocol: bool = False
    max_instances: int = 16
    hold: tuple[str, ...] = ()  # KNOB=VALUE each
    load_trace: Path | None = None
    protocol: str = "grpc"
    window_ms: int = 2000
    stability_pct: float = 25.0
    max_batch_size: int = 64
    shapes: tuple[str, ...] = ()
    input_data: Path | None = None
    fresh: bool = False
    ray: str | None = None
    repository: RepositoryChoice | None = None


def prepare_tune(
    request: TuneRequest, options: ServerOptions, say: Callable[[str], None]
) -> tuple[ChosenModel, TuneSettings]:
    """Check every argument (one-line ``ConfigError``s), open ``out_dir`` against every input,
    choose and bind the model, then (``--fresh``) move earlier results aside and claim the
    folder; ``say`` tells what was decided for the user. Returns what ``run_tune`` takes: the
    model to search, and how."""
    r = request
    engine = check_choice("--engine", r.engine, ENGINES)
    if engine == ENGINE_BLOCKS and r.ray:
        say("--ray: the search measures on a cluster node with the classic engine")
        engine = ENGINE_CLASSIC
    goal, target_load = r.goal, r.target_load
    trace = None if r.load_trace is None else read_trace(r.load_trace)
    if trace is not None:
        if goal != "latency" or target_load is not None:
            say(
                f"--load-trace: the offered load is the trace's ({trace.stats.words()}); "
                "the goal is the lowest p99 among the configurations that keep to it "
                f"(serve at least {100 - KEPT_TO_PCT:g}% of its mean rate)"
                + (" and hold the p99 budget" if r.p99_budget_ms is not None else "")
            )
        goal = "latency"
        target_load = trace.stats.mean_rate_per_s * (1 - KEPT_TO_PCT / 100)
    check_choice("--goal", goal, GOALS)
    if goal == "latency" and r.p99_budget_ms is None and trace is None:
        raise ConfigError("--goal latency needs --p99-budget-ms (the latency to stay under)")
    check_choice("--protocol", r.protocol, PROTOCOLS)
    held = parse_holds(list(r.hold))
    check_measuring_host(options)
    choice = r.repository
    open_run_folder(
        r.out_dir,
        {
            "the model": None if r.model is None or r.model in BUILTIN_MODELS else Path(r.model),
            "--repository": choice.root if choice else None,
            "--reference": choice.reference if choice else None,
            "--input-data": r.input_data,
            "--load-trace": r.load_trace,
        },
    )
    chosen = choose_model(r.model, r.name, r.out_dir, options, choice, list(r.shapes), r.input_data)
    # an ensemble: tune moves the step that binds first
    concurrency = 1 if goal == "latency" else 8
    chosen = bind_step(chosen, options, r.out_dir, concurrency, r.protocol, r.fresh)
    info = chosen.info
    refuse_state(info, "tune")
    # Every argument checked: only now may --fresh move earlier results aside.
    if r.fresh:
        discard_results(r.out_dir)
    gateway.mkdir(r.out_dir)
    claim(r.out_dir)
    baseline = own_baseline(info)
    if baseline is not None:
        start = Knobs(  # the model's own configuration, and the holds given besides
            instances=baseline.instance_count,
            batching=baseline.dynamic_batching,
            max_batch=baseline.max_batch_size,
            threads=baseline.intra_op_threads,
            protocol=r.protocol,
            held=tuple((dict(held_of(baseline)) | dict(held)).items()),
        )
        o = info.origin
        why = f", the step tune moves first ({o.tuned_reason})" if o.tuned != o.model else ""
        say(f"start: {baseline.description} of `{o.tuned}`{why}")
    else:
        max_batch = r.max_batch_size if info.batched else 0
        start = Knobs(max_batch=max_batch, protocol=r.protocol, held=held)
    return chosen, TuneSettings(
        Goal(
            kind=goal,
            p99_budget_us=None if r.p99_budget_ms is None else r.p99_budget_ms * 1000,
            min_throughput_infer_per_s=target_load,
            cores=available_cores(),
            server_cores=decide_split(
                options.cpu_split, starts_server=not options.url
            ).server_core_count,
            step=info.origin.tuned if info.origin.tuned != info.origin.model else None,
            co_loaded=engine == ENGINE_BLOCKS,
            max_race_rounds=r.max_race_rounds or (12 if engine == ENGINE_BLOCKS else 3),
            start=start,
            switch_protocol=not r.keep_protocol,
            max_instances=r.max_instances,
            window_ms=r.window_ms,
            fixed_load=None if trace is None else f"under trace {trace.stats.name}",
        ),
        time_budget_s=r.time_budget_s,
        measurement=MeasurementSettings(r.window_ms, r.stability_pct, engine=engine),
        trace=trace,
    )
