"""``tritonlab ceilings``: measure this machine's roofline ceilings now (not from the cache),
keep them for later runs, and optionally put them into run folders and rebuild their reports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritonlab.cli.common import app, out, user_errors
from tritonlab.run_layout import RunLayout


@app.command()
def ceilings(
    runs: Annotated[
        list[Path] | None,
        typer.Argument(help="Run folders whose roofline should use the new figures."),
    ] = None,
) -> None:
    """Measure memory bandwidth and the GEMM rate on one thread (a few seconds; run it on a
    quiet machine), store them for later runs, and write them into RUNS (rebuilding each
    report).

    Example: tritonlab ceilings demo-out
    """
    from dataclasses import replace

    from tritonlab.errors import TritonlabError
    from tritonlab.experiments.run_folder import open_run_folder
    from tritonlab.perf.machine import measure_ceilings, store_ceilings
    from tritonlab.perf.operator_profile import OperatorsRecord
    from tritonlab.report.build import build_report
    from tritonlab.result_files import load_record, write_result
    from tritonlab.server.locate import default_cache_root

    with user_errors():
        folders = list(runs or [])
        for run_dir in folders:
            layout = RunLayout(run_dir)
            open_run_folder(run_dir)  # its operators and reports are rewritten
            if not layout.operators.exists():
                raise TritonlabError(
                    f"{run_dir} has no {layout.relative(layout.operators)}; pass a run folder that "
                    "`tritonlab run` or `sweep` measured"
                )
        machine = measure_ceilings()
        store_ceilings(default_cache_root(), machine)
        out.print(
            f"{machine.cpu}, one thread: memory bandwidth "
            f"{machine.bandwidth_bytes_per_s / 1e9:.1f} GB/s (triad "
            f"{machine.triad_bytes_per_s / 1e9:.1f}, copy {machine.copy_bytes_per_s / 1e9:.1f}), "
            f"GEMM {machine.gemm_flop_per_s / 1e9:.1f} GFLOP/s ({machine.gemm_size}³), ridge "
            f"{machine.ridge_flop_per_byte:.2f} FLOP/byte",
            highlight=False,
        )
        for run_dir in folders:
            path = RunLayout(run_dir).operators
            record = load_record(path, OperatorsRecord)
            assert record is not None  # checked above: every folder has one
            write_result(path, replace(record, machine_ceilings=machine).to_dict())
            build_report(run_dir)
            out.print(f"{run_dir}: roofline rebuilt with these ceilings", highlight=False)
