"""``tritonlab sweep``: run a YAML sweep plan (or the built-in demo plan), resumably.

Progress goes to stderr: a live bar with an ETA on a terminal, one plain line per cell
otherwise, nothing with ``--no-progress``. The ETA is the mean time of the cells measured in
this session times the cells left (cells found on disk from an earlier run cost nothing).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from tritonlab.cli.common import app, err, note, resume_hint, say, user_errors
from tritonlab.cli.options import (
    AdaptiveBudgetOpt,
    LatencyBudgetOpt,
    LoadTraceOpt,
    MaxRepeatsOpt,
    RayOpt,
    ResultFlags,
    ResumableOutOpt,
    ServerFlags,
    SweepEngineOpt,
    SweepTargetLoadOpt,
    option_groups,
)
from tritonlab.run_layout import RunLayout


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class SweepProgress:
    """A progress callback for ``run_experiment``: "rich" (live bar), "plain" lines or "off"."""

    def __init__(self, mode: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.mode = mode
        self.clock = clock
        self.started = clock()
        self._last: float | None = None
        self._durations: list[float] = []
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> SweepProgress:
        if self.mode == "rich":
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA {task.fields[eta]}"),
                console=err,
            )
            self._progress.start()
            self._task = self._progress.add_task("starting the server", total=None, eta="--")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, done: int, total: int, cell: str) -> None:
        now = self.clock()
        if self._last is not None:
            self._durations.append(now - self._last)
        self._last = None if cell == "done" else now
        # the cells left at this session's mean cell time ("--" before one was measured here)
        eta_text = "--"
        if self._durations:
            eta_text = _duration(statistics.fmean(self._durations) * (total - done))
        if self._progress is not None and self._task is not None:
            label = "finished" if cell == "done" else cell
            self._progress.update(
                self._task, description=label, completed=done, total=total, eta=eta_text
            )
        elif self.mode == "plain":
            label = "finished" if cell == "done" else f"measuring {cell}"
            say(
                f"[{done}/{total}] {label} (elapsed {_duration(now - self.started)}, "
                f"ETA {eta_text})",
                err,
            )


def progress_mode(no_progress: bool, is_terminal: bool) -> str:
    """The ``SweepProgress`` mode: "off" with ``--no-progress``, a live bar on a terminal,
    plain lines otherwise (logs)."""
    if no_progress:
        return "off"
    return "rich" if is_terminal else "plain"


def _print_outcome(run_dir: Path, measured: int, reused: int, wall_s: float) -> None:
    from tritonlab.decisions.recommend_records import StoredRecommendations
    from tritonlab.result_files import load_record

    layout = RunLayout(run_dir)
    say(f"measured {measured} cells, reused {reused}, in {_duration(wall_s)} (m:ss)")
    if (recs := load_record(layout.recommendations, StoredRecommendations)) is not None:
        for pick in (p for p in (recs.throughput_pick, recs.latency_pick) if p):
            point = pick.point
            say(
                f"{pick.kind}: {point.description} at {point.load_key}: "
                f"{point.throughput_infer_per_s:,.0f} infer/s, p99 {point.latency_p99_us:,.0f} µs"
            )
        say(recs.summary_line)
    where = f"; recommendations in {layout.recommendations}" if recs else " (no recommendations)"
    say(f"explained in {layout.experiment_log}{where}")


@app.command()
@option_groups
def sweep(
    plan: Annotated[
        str | None,
        typer.Argument(help="A YAML sweep plan, or 'demo' for the built-in plan of the demo MLP."),
    ] = None,
    out_dir: ResumableOutOpt = Path("sweep-out"),
    demo: Annotated[bool, typer.Option("--demo", help="Run the built-in demo plan.")] = False,
    time_budget_s: Annotated[
        float | None,
        typer.Option(
            "--time-budget-s",
            min=1.0,
            help="Stop cleanly (between cells) after this many seconds; re-run to continue.",
        ),
    ] = None,
    *,
    results: ResultFlags,
    engine: SweepEngineOpt = None,
    max_repeats: MaxRepeatsOpt = None,
    adaptive_budget_s: AdaptiveBudgetOpt = None,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="No progress display on stderr.")
    ] = False,
    latency_budget_us: LatencyBudgetOpt = None,
    target_load: SweepTargetLoadOpt = None,
    load_trace: LoadTraceOpt = None,
    server: ServerFlags,
    ray: RayOpt = None,
) -> None:
    """Sweep configurations and loads from a YAML plan, then recommend configurations.

    Closed-loop cells first, then open-loop cells at fractions of each measured peak.

    Every cell is saved at once: re-run the same command to resume (Ctrl-C, --time-budget-s).

    Plan format: docs/sweeps.md. Example: tritonlab sweep demo --out sweep-out
    """
    hint = resume_hint(out_dir)
    with user_errors(hint):
        from tritonlab.experiments.run_folder import open_run_folder
        from tritonlab.pipeline.project import engine_rounds
        from tritonlab.pipeline.sweep import SweepAsked, read_sweep_plan, run_sweep, sweep_model

        asked = SweepAsked(plan, demo, latency_budget_us, target_load, load_trace, engine, ray)
        sweep_plan = read_sweep_plan(asked, note)
        rounds = engine_rounds(
            sweep_plan.engine,
            sweep_plan.experiment.repeats,
            max_repeats,
            adaptive_budget_s,
            classic_budget_s=120.0,
            capped=False,
        )
        open_run_folder(
            out_dir,
            {
                "the plan": asked.plan_file,
                "the plan's model": sweep_plan.model_path,
                "the plan's repository": sweep_plan.repository,
                "--load-trace": load_trace,
            },
        )
        onnx_path, info = sweep_model(sweep_plan, out_dir, server.options())
        exp = sweep_plan.experiment
        cells = len(exp.variants) * len(exp.loads) * exp.repeats
        note(
            f"sweep {sweep_plan.source}: {len(exp.variants)} configurations x "
            f"{len(exp.loads)} loads x {exp.repeats} repeats = {cells} cells -> {out_dir}",
        )
        started = time.monotonic()
        with SweepProgress(progress_mode(no_progress, err.is_terminal)) as progress:
            result = run_sweep(
                sweep_plan,
                onnx_path,
                out_dir,
                server.options(),
                progress,
                results.controls(rounds, time_budget_s=time_budget_s, cluster=ray),
                info=info,
            )
        outcome = result.outcome
        if outcome.stopped_early:
            note(f"stopped early: {outcome.stopped_early}; {hint}")
        for line in outcome.quarantined:
            note(f"warning: {line}")
        if outcome.without_rate:
            note(
                f"{len(outcome.without_rate)} open-loop cells had no measured peak to derive "
                "their rate from (add the protocol/batch size to the closed-loop loads)",
            )
        _print_outcome(
            out_dir, len(outcome.measured), len(outcome.skipped), time.monotonic() - started
        )
