"""Run a sweep plan: closed-loop cells first, then open-loop cells at fractions of the peak.

The peak of a variant is the highest median throughput (over repeats) of its closed-loop cells
at the protocol and client batch size of the open-loop load. It is read from the STORED cells,
so a resumed sweep derives exactly the rates the interrupted one used, and ``tritonlab report``
can say where every rate came from.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tritonlab.errors import PlanError
from tritonlab.experiments.blocks import ENGINE_BLOCKS, ENGINE_CLASSIC
from tritonlab.experiments.plan import ExperimentPlan
from tritonlab.experiments.plan_file import SweepPlan, load_demo_plan, load_plan
from tritonlab.experiments.session import ProgressCallback
from tritonlab.experiments.store import CellResult, load_cells
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.state_pairs import refuse_state
from tritonlab.models.zoo import export_builtin
from tritonlab.perf.trace import read_trace
from tritonlab.pipeline.project import (
    DEFAULT_CONTROLS,
    ProjectResult,
    RunControls,
    load_model_info,
    load_repository_info,
    run_project,
)
from tritonlab.run_layout import RunLayout
from tritonlab.server.launch import ServerOptions

DEMO_ARGUMENT = "demo"


@dataclass(frozen=True)
class SweepAsked:
    """What ``tritonlab sweep`` was given: the plan (a file, or ``demo``), and the flags that
    override the plan's recommendation, load and engine."""

    plan: str | None
    demo: bool = False
    latency_budget_us: float | None = None
    target_load: float | None = None
    load_trace: Path | None = None
    engine: str | None = None
    ray: str | None = None

    @property
    def plan_file(self) -> Path | None:
        """The plan file given, if any (``demo`` is none)."""
        return None if self.plan in (None, DEMO_ARGUMENT) else Path(str(self.plan))


def read_sweep_plan(asked: SweepAsked, say: Callable[[str], None]) -> SweepPlan:
    """The plan file (or the demo plan) read and checked, with the flags' recommendation
    targets, trace and engine applied (one-line ``PlanError``s)."""
    if asked.demo or asked.plan == DEMO_ARGUMENT:
        if asked.demo and asked.plan_file is not None:
            raise PlanError(f"give either a plan file or --demo, not both ({asked.plan})")
        sweep_plan = load_demo_plan()
    elif asked.plan_file is None:
        raise PlanError("give a plan file (see docs/sweeps.md), or 'demo' for the demo plan")
    else:
        sweep_plan = load_plan(asked.plan_file)
    sweep_plan = sweep_plan.with_recommend(asked.latency_budget_us, asked.target_load)
    if asked.load_trace is not None:
        sweep_plan = sweep_plan.with_trace(read_trace(asked.load_trace))
    # the engine: --engine, else the plan's; a Ray run's is classic (each node measures whole
    # rounds on its own server, so cells paired in one block would come from different machines)
    engine = asked.engine or sweep_plan.engine
    if asked.ray and engine == ENGINE_BLOCKS:
        if asked.engine:
            raise PlanError(
                "--engine blocks needs one server for every configuration; a --ray run measures "
                "whole rounds on separate nodes: use --engine classic"
            )
        say(
            "the plan's block engine is not used across a Ray cluster (each node measures whole "
            "rounds on its own server): measuring with the classic engine"
        )
        engine = ENGINE_CLASSIC
    return sweep_plan.with_engine(engine)


def sweep_model(
    sweep: SweepPlan, run_dir: Path, options: ServerOptions
) -> tuple[Path, OnnxModelInfo | None]:
    """The model the plan names: a repository's (read as it is), a built-in one (exported into
    the run folder) or an ONNX file; with what was read of a repository model."""
    if sweep.repository is not None:
        info = load_repository_info(sweep.repository, sweep.model, options, sweep.step)
        return info.path, info
    if sweep.builtin is not None:
        exported = RunLayout(run_dir).exported_model(sweep.builtin)
        return export_builtin(sweep.builtin, exported).onnx_path, None
    if sweep.model_path is not None:
        return sweep.model_path, None
    raise PlanError(f"{sweep.source}: model: neither a built-in model nor a file")


@dataclass(frozen=True)
class PeakRate:
    """Where one open-loop rate came from."""

    variant: str
    load_key: str
    peak_infer_per_s: float
    peak_load_key: str
    request_rate_per_s: float


def peak_rates(plan: ExperimentPlan, cells: list[CellResult]) -> list[PeakRate]:
    """The request rate of every (variant, fraction-of-peak load), from stored closed-loop cells.

    rate (req/s) = fraction x peak throughput (infer/s) / client batch size, rounded to a whole
    request per second (at least 1). A variant without a closed-loop cell at that protocol and
    batch size gets no rate.
    """
    closed = {ld.key: ld for ld in plan.loads if not ld.open_loop}
    throughputs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cells:
        m = c.perf.measurement
        if c.load_key in closed and m and m.throughput_infer_per_s > 0:
            throughputs[(c.variant.name, c.load_key)].append(m.throughput_infer_per_s)
    out = []
    for variant in plan.variants:
        for load in plan.loads:
            medians = [  # (median throughput, load key) at the load's protocol and batch size
                (statistics.median(throughputs[(variant.name, key)]), key)
                for key, ld in closed.items()
                if (ld.protocol, ld.batch_size) == (load.protocol, load.batch_size)
                and throughputs[(variant.name, key)]
            ]
            if load.peak_fraction is None or not medians:
                continue
            peak, peak_key = max(medians, key=lambda p: p[0])  # the first of equal peaks
            rate = max(1.0, float(round(load.peak_fraction * peak / load.batch_size)))
            out.append(PeakRate(variant.name, load.key, peak, peak_key, rate))
    return out


def open_loop_rates(plan: ExperimentPlan, run_dir: Path) -> dict[tuple[str, str], float]:
    """``peak_rates`` of the cells stored in ``run_dir``, keyed as the runner wants them."""
    return {
        (p.variant, p.load_key): p.request_rate_per_s for p in peak_rates(plan, load_cells(run_dir))
    }


def run_sweep(
    sweep: SweepPlan,
    onnx_path: Path,
    run_dir: Path,
    options: ServerOptions,
    progress: ProgressCallback | None = None,
    controls: RunControls = DEFAULT_CONTROLS,
    info: OnnxModelInfo | None = None,
) -> ProjectResult:
    """Measure every cell of the sweep not yet in ``run_dir`` (``controls.cluster``: on a Ray
    cluster's nodes, whole rounds each), then rebuild its reports. With ``controls.max_repeats``
    above the plan's repeats, the picks' cells (and the baseline's at the same loads) get more
    rounds while a verdict behind a pick is undecided."""
    from tritonlab.decisions.adaptive import undecided_sweep

    plan = sweep.experiment
    budget = sweep.latency_budget_p99_us
    target = sweep.target_load_infer_per_s
    info = info or load_model_info(onnx_path)
    refuse_state(info, "sweep")
    return run_project(
        onnx_path,
        run_dir,
        plan,
        options,
        progress,
        controls if budget else replace(controls, max_repeats=None),
        demo=sweep.builtin,
        info=info,
        traces=sweep.traces,
        sweep=sweep.manifest_entry(),
        open_loop_rates=lambda: open_loop_rates(plan, run_dir),
        undecided=lambda: undecided_sweep(
            run_dir,
            [v.name for v in plan.variants],
            float(budget or 0.0),
            None if target is None else float(target),
            precision=plan.measurement.engine == ENGINE_BLOCKS,
        ),
    )
