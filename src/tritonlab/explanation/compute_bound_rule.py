"""The rule for batching that buys little on a model whose own compute dominates an execution.

Its "why" is read off the cost model's in-process line (``F + P x batch``) only where that line
agrees with its points (``fit_check``); otherwise, and for a saving larger than the line allows
or one whose verdict is undecided, the rule names no cause.
"""

from __future__ import annotations

from typing import Any

from tritonlab.explanation.cost_model import CostModel
from tritonlab.explanation.fit_check import LITTLE_GAIN_SHARE, per_sample_text, points_around
from tritonlab.explanation.rule_support import (
    Finding,
    RuleContext,
    changed_fields,
    missed_sides,
    paired_medians,
    paired_note,
    rounded,
)
from tritonlab.stats.aggregate import compare_figure
from tritonlab.stats.verdicts import Verdict
from tritonlab.stats.workload import same_workload

COMPUTE_BOUND_MODEL_SHARE = 0.5  # model work >= 50% of a batch-1 execution (cost model)


def batching_compute_bound(ctx: RuleContext) -> Finding | None:
    """Batching formed batches but per-inference compute barely fell: the model's per-sample work
    dominates each execution and only the fixed part can be shared (needs the cost model's
    in-process split; a serving-path-bound model is ``batching_amortised``'s case)."""
    s, r, model = ctx.subject, ctx.reference, ctx.cost_model
    if model is None or not s.variant.dynamic_batching or r.variant.dynamic_batching:
        return None
    model = model.for_engine(s.variant.engine)
    if changed_fields(r.variant, s.variant) != ["dynamic_batching"] or not same_workload(r, s):
        return None
    b0, b1 = paired_medians(r.mean_batch, s.mean_batch)
    c0, c1 = paired_medians(r.compute_per_inference_us, s.compute_per_inference_us)
    if b0 is None or b1 is None or c0 is None or c1 is None or b1 <= 1.05 * b0 or not c0:
        return None
    k, th = s.settings.batch_size, s.variant.intra_op_threads
    one = model.execution_us(1, k, th)
    model_share = model.model_us(k, th) / one if one else 0.0
    if model_share < COMPUTE_BOUND_MODEL_SHARE or (c0 - c1) / c0 >= LITTLE_GAIN_SHARE:
        return None
    per_inference = compare_figure("compute per inference", "compute_per_inference_us", r, s)
    throughput = compare_figure("throughput", "throughput", r, s)
    fixed = model.model_fixed_us + model.serving_fixed_us
    bound = fixed / one if one else 0.0
    saved = (c0 - c1) / c0
    figures: dict[str, Any] = {
        "mean_batch_before": rounded(b0, 2),
        "mean_batch_after": rounded(b1, 2),
        "compute_us_per_inference_before": rounded(c0),
        "compute_us_per_inference_after": rounded(c1),
        "model_share_of_execution": rounded(model_share, 3),
        "model_per_sample_us": rounded(model.model_per_sample_us, 1),
        "fixed_us_per_execution": rounded(fixed, 1),
        "throughput_change_pct": rounded(throughput.change_pct, 1),
        "measured_saving_share": rounded(saved, 3),
        "fixed_share_of_request": rounded(bound, 3),
    }
    text = (
        f"Batching formed batches of {b1:.1f} on average (was "
        f"{b0:.1f}), yet compute per inference went "
        f"only from {c0:,.0f} to {c1:,.0f} µs ({per_inference.phrase()})"
        f"{paired_note(r.mean_batch, s.mean_batch)}"
    )
    check = model.fit_check()
    # the measured in-process points at batch 1 and around the batch formed, per sample
    measured = dict(model.model_points)
    quoted = sorted(set(points_around(measured, 1) + points_around(measured, b1 * k)))
    points = f"{per_sample_text(quoted)} (the model's own work, less the null model's call)"
    fixed_share = model.model_fixed_us / model.model_us(k) if model.model_us(k) else 0.0
    if check is not None and not check.supports_bound(fixed_share):
        # The line misses its own points by as much as the bound it would set: its fixed part
        # bounds nothing, so the points are quoted and no cause is named.
        figures["fit_miss_pct"] = rounded(100 * check.worst_miss_share, 1)
        figures["fit_miss_batch"] = check.worst_batch
        figures["cause_named"] = False
        text += (
            f". In-process, {model.engine}'s straight line (the cost model's F + P x batch) "
            f"{check.bound_phrase(fixed_share)}, so no cost term is named as the cause; "
            f"measured in-process: {points}"
        )
    else:
        # a split quoted as the cause while the model misses the point (issue 36 audit)
        missed = missed_sides(ctx, "the reference, the batch-1 side")
        figures["model_misses"] = missed
        # whether the text names the cost model's split as the cause: a table note reads it
        figures["cause_named"] = per_inference.clear and not missed
        text += _why_text(
            model, one, model_share, fixed, bound, saved, per_inference, points, missed
        )
    text += f". Throughput {throughput.phrase()}."
    return Finding("batching-compute-bound", s.variant.name, text, figures)


def _why_text(
    model: CostModel,
    one: float,
    model_share: float,
    fixed: float,
    bound: float,
    saved: float,
    per_inference: Verdict,
    points: str,
    missed: list[str],
) -> str:
    """The cost model's reason the saving is small (its line agrees with its points), and what
    it says of a measured saving larger than its bound: no cause, the points quoted. Where the
    model misses this point or its reference, its split is quoted as the model's, not a cause."""
    share = (
        f"the model's own work is {model_share:.0%} of a {one:,.0f} µs batch-1 execution "
        f"({model.model_per_sample_us:,.0f} µs per sample in-process), and batching shares "
        f"only what an execution costs whatever its size: {fixed:,.0f} µs (serving path and the "
        f"model's fixed part in the in-process fit), {bound:.0%} of a request's cost"
    )
    if not per_inference.clear:
        # An undecided change has no cause to name: the fit says what to expect, no more.
        return (
            f". By the cost model, {share}; the served change is not clear, so no cause is "
            "named for it"
        )
    text = (
        f". The cost model's split (it misses {' and '.join(missed)} by more than 25%, in its "
        "throughput or a term: see the cost model's section, so take the parts as its, not as "
        f"measured, and no cause is named): {share}"
        if missed
        else f". Why: {share}"
    )
    if saved > bound + 0.01:
        text += (
            f". The measured saving ({saved:.0%}) is larger than that, and the in-process "
            f"points do not say where the rest comes from ({points}), so no cause is named "
            "for it"
        )
    return text
