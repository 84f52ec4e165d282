"""Which cells need another interleaved round: the verdicts a conclusion rests on, undecided.

Two policies: a project run re-measures every configuration at a load point where a headline
verdict (against the baseline or the reference it is explained from) is undecided; a sweep
re-measures the pick, the runner-up and the baseline where a verdict behind a pick is. Each
returns the cells and the reasons, which ``results/adaptive.json`` and the log quote.
"""

from __future__ import annotations

from pathlib import Path

from tritonlab.experiments.store import load_cells
from tritonlab.explanation.explain import analyse
from tritonlab.stats.aggregate import summarise
from tritonlab.stats.noise_floor import noise_floors
from tritonlab.stats.verdicts import Verdict

Cells = list[tuple[str, str]]

HEADLINE_FIGURES = ("throughput", "latency_p99")


# The block engine measures on while a headline throughput interval is wider than this
# half-width (exp(h) - 1), whatever its word: a rule that also waited for a "decided" verdict
# would look after every block and stop preferentially on chance exclusions (simulated: 89%
# coverage instead of 95%; tests/unit/test_robust_stats.py). p99 intervals have no target.
# Why 3%: an interval that narrow finds a true 5% change 9 times in 10 (the detectable change is
# about 1.65 half-widths: ``stats/error_rates.py``), the power the calibration asks of a run.
TARGET_HALF_WIDTH_PCT = 3.0


def watched_intervals(sweep: bool) -> str:
    """Which throughput intervals the block engine's stopping rule watches, in words: a run's
    (``undecided_project``) or a sweep's (``undecided_sweep``: its picks only)."""
    if sweep:
        return (
            "a throughput interval behind a pick (each pick against the baseline and against "
            "its runner-up, and the A/A control at the pick's load; the sweep's other "
            "intervals are not watched and keep their planned blocks' width)"
        )
    return (
        "a headline throughput interval (each configuration against the baseline and against "
        "the configuration it is explained from, and the A/A control)"
    )


def _undecided(label: str, verdicts: dict[str, Verdict], precision: bool = False) -> list[str]:
    if not precision:
        return [
            f"{label} {v.figure} {v.phrase()}"
            for key, v in verdicts.items()
            if key in HEADLINE_FIGURES and not v.decided
        ]
    v = verdicts.get("throughput")
    width = None if v is None else v.half_width_pct
    if v is None or not v.comparable or (width is not None and width <= TARGET_HALF_WIDTH_PCT):
        return []
    shown = "no interval" if width is None else f"±{width:.1f}%"
    return [f"{label} {v.figure} {v.phrase()}: {shown}, wider than ±{TARGET_HALF_WIDTH_PCT:g}%"]


def undecided_project(
    run_dir: Path, variant_order: list[str], cores: int, precision: bool = False
) -> tuple[Cells, list[str]]:
    """Project runs: every load point with an undecided headline verdict, all its variants and
    its A/A control; ``precision`` (block engine): a throughput interval over the target width."""
    cells = load_cells(run_dir)
    targets: Cells = []
    reasons: list[str] = []
    floors = {f.load_key: f for f in noise_floors(cells)}
    for analysis in analyse(summarise(cells, variant_order), cores):
        found: list[str] = []
        baseline = analysis.reports[0].summary.variant.name
        for r in analysis.reports[1:]:
            name = r.summary.variant.name
            found += _undecided(f"{name} vs {baseline}:", r.verdicts, precision)
            if r.reference and r.reference != baseline:
                found += _undecided(f"{name} vs {r.reference}:", r.reference_verdicts, precision)
        floor = floors.get(analysis.load_key)
        if floor is not None:
            label = f"A/A control {floor.control} vs {baseline}:"
            found += _undecided(label, {"throughput": floor.throughput}, precision)
        if found:
            reasons += found
            targets += [(r.summary.variant.name, analysis.load_key) for r in analysis.reports]
            if floor is not None:
                targets.append((floor.control, analysis.load_key))
    return targets, reasons


def undecided_sweep(
    run_dir: Path,
    variant_order: list[str],
    latency_budget_p99_us: float,
    target_load_infer_per_s: float | None,
    precision: bool = False,
) -> tuple[Cells, list[str]]:
    """Sweeps: the picks' verdicts against the baseline and the runner-up; ``precision`` (block
    engine): a throughput interval over the target width, the A/A control's at that load too."""
    from tritonlab.decisions.recommend import recommend
    from tritonlab.decisions.recommend_records import BASELINE

    cells = load_cells(run_dir)
    recs = recommend(
        summarise(cells, variant_order), latency_budget_p99_us, target_load_infer_per_s
    )
    floors = {f.load_key: f for f in noise_floors(cells)}
    targets: Cells = []
    reasons: list[str] = []
    for pick in (recs.throughput_pick, recs.latency_pick):
        if pick is None:
            continue
        p = pick.point
        found = _undecided(
            f"{pick.kind} pick {p.variant} at {p.load_key} vs baseline:", pick.verdicts, precision
        )
        runner, runner_verdict = pick.runner_up, pick.runner_up_verdict
        if runner is not None and runner_verdict is not None:
            key = "throughput" if runner_verdict.figure == "throughput" else "latency_p99"
            against = _undecided(
                f"{pick.kind} pick vs runner-up {runner.variant} at {runner.load_key}:",
                {key: runner_verdict},
                precision,
            )
            if against:
                found += against
                targets += [(runner.variant, runner.load_key), (BASELINE, runner.load_key)]
        floor = floors.get(p.load_key)
        if floor is not None and precision:
            label = f"A/A control {floor.control} at {p.load_key}:"
            found += _undecided(label, {"throughput": floor.throughput}, precision)
        if found:
            reasons += found
            targets += [(p.variant, p.load_key), (BASELINE, p.load_key)]
            if floor is not None:
                targets.append((floor.control, p.load_key))
    return sorted(set(targets)), reasons
