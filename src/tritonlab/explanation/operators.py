"""The hot operators in the experiment log's words (linking the "two Tritons").

The profile (FLOPs and bytes per sample of every MatMul, Gemm and Conv) is read from the graph
in ``perf/operator_profile.py``. Here: the in-process time per execution as a fixed plus a
per-sample part, and the paragraph that sets the operators' intensity next to the batches formed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tritonlab.explanation.fit_check import check_fit, per_sample_text, points_around
from tritonlab.perf.operator_profile import OperatorProfile


@dataclass(frozen=True)
class ExecutionCostFit:
    """In-process time per execution fitted as ``fixed_us + per_sample_us x batch``: batching
    can only save the fixed part, so its share at batch 1 bounds what it can gain in compute."""

    fixed_us: float
    per_sample_us: float

    max_relative_error: float = 0.0

    @classmethod
    def fit(cls, us_per_execution: dict[int, float]) -> ExecutionCostFit | None:
        """Weighted least squares (weights 1/t², i.e. on relative error) over the batches.

        None with fewer than 2 batches timed. When at most one timed above zero (the times are
        less the empty model's own, and a model as small as it leaves nothing), the compute is
        below what the timing resolves: the fit is zero, not missing."""
        points = sorted((b, t) for b, t in us_per_execution.items() if t > 0)
        if len(points) < 2:
            return cls(0.0, 0.0, 0.0) if len(us_per_execution) >= 2 else None
        weighted = [(1.0 / (t * t), b, t) for b, t in points]
        total = sum(w for w, _, _ in weighted)
        mean_b = sum(w * b for w, b, _ in weighted) / total
        mean_t = sum(w * t for w, _, t in weighted) / total
        var_b = sum(w * (b - mean_b) ** 2 for w, b, _ in weighted)
        cov = sum(w * (b - mean_b) * (t - mean_t) for w, b, t in weighted)
        slope = max(0.0, cov / var_b) if var_b else 0.0
        fixed = max(0.0, mean_t - slope * mean_b)
        worst = max(abs(fixed + slope * b - t) / t for b, t in points)
        return cls(fixed, slope, worst)

    def per_sample_at(self, batch: float) -> float:
        """Cost per sample (µs) of one execution at ``batch`` samples."""
        return self.fixed_us / batch + self.per_sample_us

    @property
    def fixed_share_at_batch_1(self) -> float:
        """The fixed cost's share (0–1) of one batch-1 execution."""
        total = self.fixed_us + self.per_sample_us
        return self.fixed_us / total if total else 0.0


def operator_paragraph(
    profile: OperatorProfile,
    mean_batches: dict[str, float],
    us_per_execution: dict[int, float] | None = None,
) -> str:
    """Tie the batch sizes Triton formed to the operators' bytes, intensity and timings."""
    if not profile.operators:
        return "The graph has no MatMul, Gemm or Conv operators to profile."
    hot = ", ".join(
        f"{o.op_type} `{o.name}` ({o.flops_per_sample / 1e6:.2f} MFLOP per sample, "
        f"{o.weight_bytes / 1e6:.3g} MB of weights)"
        for o in profile.hottest()
    )
    weights, acts = profile.weight_bytes, profile.activation_bytes_per_sample
    weight_share = weights / (weights + acts) if weights + acts else 0.0
    parts = [
        f"Hot operators: {hot}. Per sample the model does {profile.flops_per_sample / 1e6:.2f} "
        f"MFLOP; each execution reads {weights / 1e6:.3g} MB of weights once and moves "
        f"{_bytes_text(acts)} of activations per sample, so at batch 1 weights are "
        f"{weight_share:.0%} of the bytes and the intensity is "
        f"{profile.intensity(1):.2f} FLOP/byte."
    ]
    if weight_share >= 0.5:
        parts.append(
            "Because the weights are read once per execution however many samples it carries, "
            f"batching raises the intensity (batch 8: {profile.intensity(8):.2f} FLOP/byte, "
            f"batch 64: {profile.intensity(64):.2f})."
        )
    else:
        parts.append(
            "Activations dominate the bytes, so batching barely raises the intensity "
            f"(batch 64: {profile.intensity(64):.2f} FLOP/byte); it can only amortise the fixed "
            "cost of each call."
        )
    if (fit := ExecutionCostFit.fit(us_per_execution or {})) is not None:
        parts.append(_fit_sentences(fit, profile, mean_batches, us_per_execution or {}))
    return " ".join(parts)


def _fit_sentences(
    fit: ExecutionCostFit,
    profile: OperatorProfile,
    mean_batches: dict[str, float],
    us_per_execution: dict[int, float],
) -> str:
    """The in-process line and the bound on batching its fixed part sets, where the line agrees
    with its points (``fit_check``); otherwise how far it misses and the measured points."""
    line = (
        f"Measured in-process, an execution costs {fit.fixed_us:.1f} µs fixed + "
        f"{fit.per_sample_us:.1f} µs per sample (the whole call, the empty call a null model "
        "also makes included, which the cost model counts in the serving path instead; "
        "fitted over the batch sizes below"
    )
    check = check_fit(fit.fixed_us, fit.per_sample_us, us_per_execution)
    if check is not None and not check.supports_bound(fit.fixed_share_at_batch_1):
        # the line misses its points by as much as the bound it would set: quote the points
        def at(batch: float) -> str:
            return "measured in-process (the whole call) " + per_sample_text(
                points_around(us_per_execution, batch)
            )

        one = at(1)
        text = (
            f"{line}; the line {check.bound_phrase(fit.fixed_share_at_batch_1)}, so its fixed "
            "part is not read as a bound on what batching can save in compute)."
        )
    else:

        def at(batch: float) -> str:
            return f"{fit.per_sample_at(batch):.1f} µs per sample"

        one = f"{fit.per_sample_at(1):.1f} µs at batch 1"
        text = (
            f"{line}, within {_bound_pct(fit.max_relative_error)}% of each): the fixed part is "
            f"{fit.fixed_share_at_batch_1:.0%} of a batch-1 run, and that is all batching can "
            "save in compute."
        )
    if batched := {k: v for k, v in mean_batches.items() if v and v > 1.05}:
        listed = "; ".join(
            f"{name}: mean batch {b:.1f} -> {at(b)} ({profile.intensity(b):.2f} FLOP/byte)"
            for name, b in batched.items()
        )
        text += f" At the batches Triton formed ({listed}) against {one}."
    return text


def _bound_pct(share: float) -> str:
    """A worst miss as a bound, rounded up (issue 36 audit: a 10.4% miss read "within 10%")."""
    return f"{math.ceil(100 * share - 1e-9):.0f}"


def _bytes_text(count: float) -> str:
    """'512 B', '393 KB' or '33 MB' (three significant digits, no exponent)."""
    for unit, size in (("MB", 1e6), ("KB", 1e3)):
        if count >= size:
            return (
                f"{count / size:,.3g} {unit}"
                if count / size < 1000
                else f"{count / size:,.0f} {unit}"
            )
    return f"{count:,.0f} B"
