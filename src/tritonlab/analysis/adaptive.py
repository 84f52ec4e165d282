"""Which cells need another interleaved round: the verdicts a conclusion rests on, undecided.

A verdict is decided when its interval excludes no change, lies within ±5%, or the loads are
not comparable (``Verdict.decided``). Two policies, one per kind of run:

- a project run (the seed comparison): every configuration's throughput and p99 against the
  baseline and against the configuration it is explained from (the table's words and the
  explanations' "why");
- a sweep: the verdicts behind the two picks (against the baseline at the same load, and
  against the runner-up), so only those few cells are measured again.

Another round re-measures every configuration at that load point (so every pair stays paired
by round) for a project, and the pick, the runner-up and the baseline for a sweep. Each policy
returns the cells and the undecided verdicts, which the runner records in
``results/adaptive.json`` and the log quotes.
"""

from __future__ import annotations

from pathlib import Path

from tritonlab.analysis.aggregate import VariantSummary, summarise
from tritonlab.analysis.explain import analyse
from tritonlab.analysis.verdicts import Verdict
from tritonlab.experiments.store import load_cells

Cells = list[tuple[str, str]]

HEADLINE_FIGURES = ("throughput", "latency_p99")


def _undecided(label: str, verdicts: dict[str, Verdict]) -> list[str]:
    return [
        f"{label} {v.figure} {v.phrase()}"
        for key, v in verdicts.items()
        if key in HEADLINE_FIGURES and not v.decided
    ]


def _summaries(run_dir: Path, variant_order: list[str]) -> list[VariantSummary]:
    return summarise(load_cells(run_dir), variant_order)


def undecided_project(
    run_dir: Path, variant_order: list[str], cores: int
) -> tuple[Cells, list[str]]:
    """Project runs: every load point with an undecided headline verdict, all its variants."""
    targets: Cells = []
    reasons: list[str] = []
    for analysis in analyse(_summaries(run_dir, variant_order), cores):
        found: list[str] = []
        baseline = analysis.reports[0].summary.variant.name
        for r in analysis.reports[1:]:
            name = r.summary.variant.name
            found += _undecided(f"{name} vs {baseline}:", r.verdicts)
            if r.reference and r.reference != baseline:
                found += _undecided(f"{name} vs {r.reference}:", r.reference_verdicts)
        if found:
            reasons += found
            targets += [(r.summary.variant.name, analysis.load_key) for r in analysis.reports]
    return targets, reasons


def undecided_sweep(
    run_dir: Path,
    variant_order: list[str],
    latency_budget_p99_us: float,
    target_load_infer_per_s: float | None,
) -> tuple[Cells, list[str]]:
    """Sweeps: the picks' verdicts against the baseline and the runner-up."""
    from tritonlab.analysis.recommend import BASELINE, recommend

    recs = recommend(
        _summaries(run_dir, variant_order), latency_budget_p99_us, target_load_infer_per_s
    )
    targets: Cells = []
    reasons: list[str] = []
    for pick in (recs.throughput_pick, recs.latency_pick):
        if pick is None:
            continue
        p = pick.point
        found = _undecided(
            f"{pick.kind} pick {p.variant} at {p.load_key} vs baseline:", pick.verdicts
        )
        runner, runner_verdict = pick.runner_up, pick.runner_up_verdict
        if runner is not None and runner_verdict is not None and not runner_verdict.decided:
            found.append(
                f"{pick.kind} pick vs runner-up {runner.variant} at {runner.load_key}: "
                f"{runner_verdict.figure} {runner_verdict.phrase()}"
            )
            targets.append((runner.variant, runner.load_key))
            targets.append((BASELINE, runner.load_key))
        if found:
            reasons += found
            targets += [(p.variant, p.load_key), (BASELINE, p.load_key)]
    return sorted(set(targets)), reasons
