"""``tritonlab check``: a regression gate for CI (exit 0 pass, 1 regression, 2 not comparable
or not checkable, 3 undecided)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from tritonlab.cli.common import (
    app,
    err,
    out,
    progress_printer,
    refuse_outputs_inside,
    resume_hint,
    user_errors,
    write_output,
)
from tritonlab.cli.options import (
    FreshOpt,
    JsonOutOpt,
    MarkdownOutOpt,
    ServerFlags,
    option_groups,
)
from tritonlab.cli.repository_options import RepositoryFlags
from tritonlab.errors import ConfigError

# ``analysis.gate.EXIT_ERROR``, not imported: the analysis stack stays out of the command line's
# start-up (a test ties the two)
COULD_NOT_CHECK = 4


def _percent(text: str, flag: str, below: float | None = None) -> float:
    """``5%`` or ``5`` -> 5.0; a one-line error for anything else. Zero is refused: no interval
    of a measured change lies wholly above -0%, so such a gate could never pass."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: give a percentage, e.g. 5%") from None
    if not math.isfinite(value) or value <= 0 or (below is not None and value >= below):
        limit = f" and below {below:g}%" if below is not None else ""
        raise ConfigError(f"{flag} {text!r}: give a percentage above 0%{limit}")
    return value


@app.command()
@option_groups
def check(
    new: Annotated[
        Path | None,
        typer.Argument(
            help="The new run folder (compared as stored), or a new ONNX model to measure now "
            "against the baseline's model (or --repository DIR --model NAME)."
        ),
    ] = None,
    against: Annotated[
        Path | None,
        typer.Option("--against", help="The baseline: a finished tritonlab run folder."),
    ] = None,
    max_regression: Annotated[
        str,
        typer.Option(
            "--max-regression", help="Throughput drop allowed beyond the noise (e.g. 5%)."
        ),
    ] = "5%",
    max_p99_increase: Annotated[
        str, typer.Option("--max-p99-increase", help="p99 increase allowed beyond the noise.")
    ] = "10%",
    expect_change: Annotated[
        list[str] | None,
        typer.Option(
            "--expect-change",
            help="Two stored runs: a difference that is the change under test, not a reason to "
            "stop (model, machine, software, measurement); repeatable.",
        ),
    ] = None,
    config: Annotated[
        str,
        typer.Option(
            "--config", help="Live: the baseline run's configuration both models are served with."
        ),
    ] = "baseline",
    out_dir: Annotated[
        Path, typer.Option("--out", help="Live: the check's own run folder (re-run to resume).")
    ] = Path("check-out"),
    repeats: Annotated[
        int | None,
        typer.Option("--repeats", min=2, help="Live: planned rounds (default: the baseline's)."),
    ] = None,
    max_repeats: Annotated[
        int,
        typer.Option(
            "--max-repeats",
            min=2,
            help="Live: most rounds, while an interval is wider than half its threshold.",
        ),
    ] = 8,
    adaptive_budget_s: Annotated[
        float | None,
        typer.Option(
            "--adaptive-budget-s", min=0.0, help="Live: seconds the extra rounds may take."
        ),
    ] = None,
    window_ms: Annotated[
        int | None,
        typer.Option(
            "--window-ms",
            min=100,
            help="Live: perf_analyzer's window for both sides (default: the baseline's).",
        ),
    ] = None,
    markdown_file: MarkdownOutOpt = None,
    junit_file: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML: one test case per verdict.")
    ] = None,
    json_file: JsonOutOpt = None,
    *,
    fresh: FreshOpt = False,
    server: ServerFlags,
    repository: RepositoryFlags,
) -> None:
    """Did serving get worse than a baseline, beyond a threshold and the noise? Exit 0: no;
    1: a regression; 2: not comparable (says which difference); 3: undecided (says about how
    many more rounds would decide it); 4: could not check (a wrong path, a broken model).

    Example: tritonlab check new-run --against baseline-run --max-regression 5%;
    tritonlab check model_v2.onnx --against baseline-run --out check-out
    """
    # exit 4 for any error: an exit status of 1 would read as "a regression"
    with user_errors(resume_hint(out_dir), code=COULD_NOT_CHECK, internal=True):
        from tritonlab.decisions.check import compare_stored
        from tritonlab.decisions.gate import Thresholds
        from tritonlab.experiments.run_folder import require_run_folder
        from tritonlab.report.check_outputs import WRITERS
        from tritonlab.stats.comparability import KINDS

        if against is None:
            raise ConfigError("--against BASELINE_RUN is required: the run folder to compare with")
        thresholds = Thresholds(
            _percent(max_regression, "--max-regression", below=100.0),
            _percent(max_p99_increase, "--max-p99-increase"),
        )
        expected = set(expect_change or [])
        if unknown := sorted(expected - set(KINDS)):
            raise ConfigError(
                f"--expect-change {', '.join(unknown)}: give one of {', '.join(KINDS)}"
            )
        live_repo = repository.given(new)
        read_only = {"--against": against, "the new run": new if new and new.is_dir() else None}
        refuse_outputs_inside([markdown_file, junit_file, json_file], read_only)
        if new is not None and new.is_dir() and not live_repo:
            require_run_folder(new)
            require_run_folder(against)
            report = compare_stored(new, against, thresholds, expected)
        else:
            from tritonlab.pipeline.check import LiveCheck, run_live_check

            if new is None and not live_repo:
                raise ConfigError(
                    "give the new side: a run folder, an ONNX file, or --repository DIR "
                    "--model NAME"
                )
            live = LiveCheck(
                against, out_dir, config, repeats, max_repeats, adaptive_budget_s, fresh, window_ms
            )
            report = run_live_check(
                live,
                thresholds,
                server.options(),
                new_onnx=None if live_repo else new,
                new_repository=(repository.repository, repository.repo_model)  # type: ignore[arg-type]
                if live_repo
                else None,
                progress=progress_printer(),
            )
        for writer, target in (
            ("markdown", markdown_file),
            ("junit", junit_file),
            ("json", json_file),
        ):
            if target is not None:
                write_output(WRITERS[writer](report), target, inputs=read_only)
        for r in report.results:
            out.print(f"{r.outcome.value:>14}  {r.name}: {r.reason()}", highlight=False)
        for note in report.notes:
            err.print(f"note: {note}", highlight=False, soft_wrap=True)
        err.print(report.headline, highlight=False, soft_wrap=True)
    raise typer.Exit(report.exit_status)
