"""Commands that produce a project folder: ``demo``, ``run`` and ``report``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tritonlab.cli.common import (
    app,
    note,
    out,
    print_results,
    progress_printer,
    resume_hint,
    user_errors,
)
from tritonlab.cli.options import DemoFlags, NameOpt, OutOpt, RunFlags, option_groups
from tritonlab.experiments.run_folder import open_run_folder
from tritonlab.run_layout import RunLayout

if TYPE_CHECKING:
    from tritonlab.pipeline.model_choice import RepositoryChoice


def _run_pipeline(
    model: Path | None,
    out_dir: Path,
    name: str | None,
    demo: str | None,
    flags: RunFlags | DemoFlags,
    repository: RepositoryChoice | None = None,
) -> None:
    """Measure ``model`` (``demo``: the built-in model it is; ``repository``: a model of the
    user's repository instead) into ``out_dir``, and print what came out."""
    from tritonlab.experiments.plan import MeasurementSettings
    from tritonlab.pipeline.model_choice import RunAsked, prepare_run
    from tritonlab.pipeline.project import engine_rounds, run_project

    rounds, plan, inputs, results = flags.rounds, flags.plan, flags.inputs, flags.results
    counts = engine_rounds(
        rounds.engine, rounds.repeats, rounds.max_repeats, rounds.adaptive_budget_s
    )
    asked = RunAsked(
        model,
        out_dir,
        name,
        repository,
        tuple(inputs.shape or ()),
        inputs.input_data,
        results.fresh,
        plan.configs,
        counts.first,
        plan.concurrency,
        plan.protocol,
        plan.max_batch_size,
        MeasurementSettings(plan.window_ms, plan.stability, engine=rounds.engine),
        plan.load_trace,
    )
    options = flags.server.options()
    chosen, measured_plan, traces = prepare_run(asked, options, note)
    started = time.monotonic()
    result = run_project(
        chosen.info.path,
        out_dir,
        measured_plan,
        options,
        progress_printer(),
        results.controls(counts),
        demo=demo,
        inputs=chosen.inputs,
        info=chosen.info,
        traces=list(traces),
    )
    outcome = result.outcome
    for line in outcome.quarantined:
        note(f"warning: {line}")
    print_results(out_dir, result.report.analyses)
    out.print(
        f"measured {len(outcome.measured)} cells, reused {len(outcome.skipped)}, in "
        f"{time.monotonic() - started:.0f} s; explained in {result.report.experiment_log}",
        highlight=False,
    )


@app.command()
@option_groups
def demo(
    out_dir: OutOpt = Path("demo-out"),
    model: Annotated[
        str,
        typer.Option("--model", help="Built-in model: simple_mlp, resnet18_cnn or bert_encoder."),
    ] = "simple_mlp",
    *,
    flags: DemoFlags,
) -> None:
    """Export a built-in model (default: the MLP 256 -> 1024 -> 10) and run the whole loop on it.

    Example: tritonlab demo --out demo-out;  tritonlab demo --model resnet18_cnn --out cnn-out
    """
    with user_errors(resume_hint(out_dir)):
        from tritonlab.models.zoo import builtin_model

        builtin = builtin_model(model)
        open_run_folder(out_dir)
        check = builtin.export(RunLayout(out_dir).exported_model(builtin.name))
        note(
            f"exported {check.onnx_path}: {builtin.summary} "
            f"(max abs diff vs PyTorch {check.max_abs_diff:.2g})"
        )
        _run_pipeline(check.onnx_path, out_dir, builtin.name, builtin.name, flags)


@app.command()
@option_groups
def run(
    out_dir: OutOpt,
    model: Annotated[
        Path | None, typer.Argument(help="The ONNX model file (or --repository DIR --model NAME).")
    ] = None,
    name: NameOpt = None,
    *,
    flags: RunFlags,
) -> None:
    """Deploy, check, measure and explain your ONNX model, or a model of your Triton repository.

    The configurations compared fit the model (--configs auto): batching and instance counts for
    a model whose requests are cheap, threads x instances for a compute-bound one; a model
    without a batch axis is compared without batching. A repository's model (an ONNX or Python
    model, an ensemble, a BLS model) is compared from its own config.pbtxt, one knob at a time.
    Example: tritonlab run model.onnx --out my-project --shape input_ids:256;
    tritonlab run --repository models --model pipeline --out pipeline-run
    """
    with user_errors(resume_hint(out_dir)):
        repo = flags.repository
        open_run_folder(
            out_dir,
            {
                "the model": model,
                "--repository": repo.repository,
                "--reference": repo.reference,
                "--input-data": flags.inputs.input_data,
                "--load-trace": flags.plan.load_trace,
            },
        )
        _run_pipeline(model, out_dir, name, None, flags, repo.choice(model))


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A folder written by run, demo or sweep.")],
) -> None:
    """Rebuild docs/experiment_log.md, plots/, report.html, results/summary.json and README.md.

    Everything is rebuilt from the stored results alone; nothing is measured.

    Example: tritonlab report demo-out
    """
    with user_errors():
        from tritonlab.report.build import build_report

        open_run_folder(run_dir)
        built = build_report(run_dir)
        print_results(run_dir, built.analyses)
        out.print(f"wrote {built.experiment_log} and {built.html_report}", highlight=False)
