"""Explanation rules for one-knob changes of how a model runs: threads per instance, the engine
(backend and precision) and the response cache. Each reads measured figures and says why."""

from __future__ import annotations

from typing import Any

from tritonlab.explanation.cost_model import CostModel
from tritonlab.explanation.fit_check import points_around
from tritonlab.explanation.rule_support import (
    Finding,
    RuleContext,
    changed_fields,
    cores_text,
    missed_sides,
    rounded,
)
from tritonlab.repository.knobs import RESPONSE_CACHE
from tritonlab.stats.aggregate import VariantSummary, compare_figure
from tritonlab.stats.verdicts import Verdict
from tritonlab.stats.workload import same_workload


def times(speedup: float) -> str:
    """A speed ratio in words: ``1.60x faster``, ``1.19x slower`` (never ``0.84x faster``)."""
    return f"{speedup:.2f}x faster" if speedup >= 1 else f"{1 / speedup:.2f}x slower"


def threads_effect(ctx: RuleContext) -> Finding | None:
    """More (or fewer) onnxruntime threads per instance: how much faster one execution ran,
    against the in-process speedup, and what an instance-count change did at the same cores."""
    s, r = ctx.subject, ctx.reference
    if changed_fields(r.variant, s.variant) != ["intra_op_threads"] or not same_workload(r, s):
        return None
    t0, t1 = r.variant.intra_op_threads, s.variant.intra_op_threads
    e0 = ctx.server_figure(r, "execution_us").median
    e1 = ctx.server_figure(s, "execution_us").median
    if e0 is None or e1 is None or not e1:
        return None
    verdict = compare_figure("throughput", "throughput", r, s)
    execution = ctx.compare_server("compute per execution", "execution_us")
    speedup = e0 / e1
    names = {None: "default", 0: "default"}
    label0, label1 = names.get(t0, str(t0)), names.get(t1, str(t1))
    figures: dict[str, Any] = {
        "step": ctx.step,
        "threads_before": t0,
        "threads_after": t1,
        "execution_us_before": rounded(e0),
        "execution_us_after": rounded(e1),
        "served_speedup": rounded(speedup, 2),
        "server_cores_used_before": rounded(r.server_cores.median, 2),
        "server_cores_used_after": rounded(s.server_cores.median, 2),
        "throughput_change_pct": rounded(verdict.change_pct, 1),
    }
    text = (
        f"{label0} -> {label1} onnxruntime threads per instance: throughput {verdict.phrase()}. "
        f"One execution{ctx.whose} took {e0:,.0f} -> {e1:,.0f} µs ({execution.phrase()}), "
        f"{times(speedup)}"
    )
    if ctx.cost_model is not None and ctx.cost_model.speedup(t1) != 1.0:
        in_process = ctx.cost_model.speedup(t1) / ctx.cost_model.speedup(t0)
        figures["in_process_speedup"] = rounded(in_process, 2)
        text += f", where the same threads run it {times(in_process)} in-process"
        if ctx.server_cores is not None and (t1 or 0) > ctx.server_cores:
            text += f" (with the machine's {ctx.cores} cores)"
    if ctx.server_cores is not None and (t1 or 0) > ctx.server_cores:
        text += (
            f"; the server ran on {ctx.server_cores} of the machine's {ctx.cores} cores (the "
            f"CPU split), so its {t1} threads shared "
            f"{'that core' if ctx.server_cores == 1 else 'those cores'}: this row measures "
            "threads on the server's cores, not on the machine's"
        )
    text += (
        f"; the server used {r.server_cores.median or 0:.2f} -> {s.server_cores.median or 0:.2f} "
        f"{cores_text(ctx.server_cores or ctx.cores, ctx.server_cores is not None)}."
    )
    rivals = [
        o
        for o in ctx.others
        if changed_fields(r.variant, o.variant) == ["instance_count"]
        and o.variant.instance_count == (t1 or ctx.server_cores or ctx.cores)
        and same_workload(o, s)
    ]
    if rivals:
        rival = rivals[0]
        versus = compare_figure("throughput", "throughput", rival, s)
        figures["instances_rival"] = rival.variant.name
        figures["versus_instances_change_pct"] = rounded(versus.change_pct, 1)
        text += (
            f" Against {rival.variant.instance_count} instances x {label0} thread (the same "
            f"cores as instances: whole executions in parallel, no synchronisation inside one), "
            f"throughput {versus.phrase()}."
        )
    return Finding("threads-effect", s.variant.name, text, figures)


ENGINE_FIELDS = (["backend"], ["precision"], ["backend", "precision"])
ENGINE_SAME_PCT = 5.0  # predicted whole executions within this of each other: the same cost


def engine_effect(ctx: RuleContext) -> Finding | None:
    """Another backend (or precision) for the same model: how one execution's cost moved, and
    which of the engines' own in-process terms (fixed or per-sample) moved it."""
    s, r = ctx.subject, ctx.reference
    if changed_fields(r.variant, s.variant) not in ENGINE_FIELDS or not same_workload(r, s):
        return None
    e0, e1 = r.execution_us.median, s.execution_us.median
    b0, b1 = r.mean_batch.median, s.mean_batch.median
    if e0 is None or e1 is None or not e0 or b0 is None or b1 is None:
        return None
    before, after = r.variant.engine, s.variant.engine
    throughput = compare_figure("throughput", "throughput", r, s)
    execution = compare_figure("compute per execution", "execution_us", r, s)
    figures: dict[str, Any] = {
        "engine_before": before,
        "engine_after": after,
        "execution_us_before": rounded(e0),
        "execution_us_after": rounded(e1),
        "mean_batch_before": rounded(b0, 2),
        "mean_batch_after": rounded(b1, 2),
        "throughput_change_pct": rounded(throughput.change_pct, 1),
        "execution_change_pct": rounded(execution.change_pct, 1),
    }
    text = (
        f"{before} -> {after}: throughput {throughput.phrase()}. One execution took "
        f"{e0:,.0f} -> {e1:,.0f} µs ({execution.phrase()}) at mean batches of {b0:.1f} and "
        f"{b1:.1f}"
    )
    model = ctx.cost_model
    m0 = model.for_engine(before) if model else None
    m1 = model.for_engine(after) if model else None
    if (
        model is not None
        and r.variant.backend == s.variant.backend
        and model.computes_in(before) == model.computes_in(after)
    ):
        # e.g. bf16 asked on a processor without bf16 units: OpenVINO fell back to f32
        used = model.computes_in(after)
        figures["precision_used"] = used
        text += (
            f". {after} computed in {used} on this processor (OpenVINO's report after "
            f"compiling), as {before} does: both run the same arithmetic, so the difference "
            "between them is noise, not precision"
        )
    elif m0 is not None and m1 is not None and m0.engine == before and m1.engine == after:
        samples = b1  # mean batch, in samples
        if (unfit := _fits_miss_the_effect(m0, m1, before, after, samples)) is not None:
            figures |= unfit[0] | {"dominant_term": None}
            text += unfit[1]
        else:
            terms, terms_text, term = _engine_terms(m0, m1, before, after, samples)
            predicted, predicted_text = _predicted_execution(s, m0, m1, samples, execution, term)
            figures |= terms | predicted
            text += terms_text + predicted_text
            missed = missed_sides(ctx)
            figures["model_misses"] = missed
            if missed and figures.get("dominant_term") is not None:
                # the split is the in-process fit's, not the served figures': where the model
                # misses the served points, say so (issue 36 audit: the engine row named the
                # fixed cost while the model missed both rows' queue term by over 25%)
                text += (
                    f"; the cost model misses {' and '.join(missed)} by more than 25% in a term "
                    "(see its section), so take the split as the model's, not as measured"
                )
    return Finding("engine-effect", s.variant.name, text + ".", figures)


def _fits_miss_the_effect(
    m0: CostModel, m1: CostModel, before: str, after: str, samples: float
) -> tuple[dict[str, Any], str] | None:
    """None when both engines' lines fit their points closer than the difference they put
    between the engines; else the figures and sentence quoting the points, naming no term."""
    w0, w1 = m0.model_us(samples), m1.model_us(samples)
    effect = w1 / w0 - 1 if w0 else 0.0
    checks = [(c, e) for c, e in ((m0.fit_check(), before), (m1.fit_check(), after)) if c]
    off = [(c, e) for c, e in checks if not c.supports(effect)]
    if not off:
        return None
    check, engine = max(off, key=lambda ce: abs(ce[0].worst_miss_share))
    p0, p1 = dict(m0.model_points), dict(m1.model_points)
    quoted = [(b, t, p1[b]) for b, t in points_around(p0, samples) if p1.get(b)]
    figures: dict[str, Any] = {
        "fit_miss_engine": engine,
        "fit_miss_batch": check.worst_batch,
        "fit_miss_pct": rounded(100 * check.worst_miss_share, 1),
        "fitted_difference_pct": rounded(100 * effect, 1),
        "in_process_points_us": {b: [rounded(t0, 1), rounded(t1, 1)] for b, t0, t1 in quoted},
    }
    text = (
        f". In-process, {engine}'s straight line (the cost model's F + P x batch) "
        f"{check.miss_phrase()}, not less than the {100 * effect:+.0f}% it puts between the "
        f"engines at a batch of {samples:.1f}, so no cost term is named as the cause"
    )
    if quoted:
        text += "; the measured points (the model's own work, less the null model's call): " + (
            ", ".join(
                f"{t0:,.0f} µs on {before} against {t1:,.0f} µs on {after} at batch {b} "
                f"({100 * (t1 / t0 - 1):+.0f}%)"
                for b, t0, t1 in quoted
            )
        )
    return figures, text


def _engine_terms(
    m0: CostModel, m1: CostModel, before: str, after: str, samples: float
) -> tuple[dict[str, Any], str, str]:
    """The two engines' in-process cost terms at a batch of ``samples``: their figures, the
    sentence that compares them, and the term (fixed or per-sample) that differs most."""
    f0, p0 = m0.model_fixed_us, m0.model_per_sample_us
    f1, p1 = m1.model_fixed_us, m1.model_per_sample_us
    w0, w1 = f0 + p0 * samples, f1 + p1 * samples
    fixed_part, sample_part = f1 - f0, (p1 - p0) * samples
    term = "fixed cost per execution" if abs(fixed_part) >= abs(sample_part) else "per-sample cost"
    figures: dict[str, Any] = {
        "model_fixed_us_before": rounded(f0, 1),
        "model_per_sample_us_before": rounded(p0, 2),
        "model_fixed_us_after": rounded(f1, 1),
        "model_per_sample_us_after": rounded(p1, 2),
        "model_us_at_batch_before": rounded(w0, 1),
        "model_us_at_batch_after": rounded(w1, 1),
        "dominant_term": term,
    }
    text = (
        f". In the cost model's terms: in-process, the model's own work is "
        f"{f0:,.0f} µs fixed + {p0:,.1f} µs per sample on {before} and {f1:,.0f} µs + "
        f"{p1:,.1f} µs on {after}; at a batch of {samples:.1f} that is {w0:,.0f} against "
        f"{w1:,.0f} µs ({fixed_part:+,.0f} µs from the fixed cost, {sample_part:+,.0f} µs from "
        "the per-sample cost)"
    )
    return figures, text, term


def _predicted_execution(
    s: VariantSummary, m0: CostModel, m1: CostModel, samples: float, execution: Verdict, term: str
) -> tuple[dict[str, Any], str]:
    """Each engine's predicted whole execution against the served change: the figures
    (``dominant_term`` None where no term is the cause) and whether ``term`` explains it."""
    k = s.settings.batch_size
    # the whole execution the served figure measures: the same serving path plus each model
    threads = s.variant.intra_op_threads
    x0 = m0.execution_us(samples / k, k, threads)
    x1 = m1.execution_us(samples / k, k, threads)
    predicted_pct = 100 * (x1 / x0 - 1) if x0 else 0.0
    figures: dict[str, Any] = {
        "predicted_execution_us_before": rounded(x0),
        "predicted_execution_us_after": rounded(x1),
        "predicted_execution_change_pct": rounded(predicted_pct, 1),
    }
    text = f"; with the serving path, one execution is predicted at {x0:,.0f} against {x1:,.0f} µs"
    if abs(predicted_pct) < ENGINE_SAME_PCT:
        figures["dominant_term"] = None
        text += (
            f" ({predicted_pct:+.0f}%), within {ENGINE_SAME_PCT:g}%: at this batch the "
            "engines cost the same, so the cost model puts no difference on the engine"
        )
    elif execution.clear and (execution.change_pct or 0.0) * predicted_pct > 0:
        text += (
            f" ({predicted_pct:+.0f}%), and the served executions moved "
            f"{execution.change_pct:+.0f}%: by the in-process fit, the {term} is what the engine "
            "change moved (served executions at one batch size cannot split the fixed cost from "
            "the per-sample one)"
        )
    elif execution.has_interval and not (
        (execution.low_pct or 0.0) <= predicted_pct <= (execution.high_pct or 0.0)
    ):
        figures["dominant_term"] = None
        text += (
            f" ({predicted_pct:+.0f}%), but the served executions moved "
            f"{execution.phrase()}, which excludes it: the in-process difference between the "
            "engines does not carry over to serving here, so no term is named as the cause"
        )
    else:
        text += (
            f" ({predicted_pct:+.0f}%), within the served executions' noise "
            f"({execution.phrase()}): the {term} is where the engines differ, but this run "
            "cannot show it in the served figures"
        )
    if k > 1:
        text += f" (client batch {k})"
    return figures, text


def cache_effect(ctx: RuleContext) -> Finding | None:
    """The response cache switched on (or off): the share of lookups it answered, from Triton's
    statistics (cache hits and misses), and what that did to throughput and the model's runs."""
    s, r = ctx.subject, ctx.reference
    cache = RESPONSE_CACHE.field
    if changed_fields(r.variant, s.variant) != [cache] or not same_workload(r, s):
        return None
    cached = s if getattr(s.variant, cache) else r
    hits, misses, share = cached.cache_hits, cached.cache_misses, cached.cache_hit_share
    if share is None:
        return None  # no lookup counted: nothing measured to explain with
    throughput = compare_figure("throughput", "throughput", r, s)
    figures: dict[str, Any] = {
        "cache_hits": hits,
        "cache_misses": misses,
        "cache_hit_share": rounded(share, 3),
        "throughput_change_pct": rounded(throughput.change_pct, 1),
    }
    where = "" if cached is s else " (before, with the cache)"
    if share < 0.01:
        found = (
            f"no stored response ({hits or 0:,} hits in {(hits or 0) + (misses or 0):,} lookups"
            if not hits
            else f"almost no stored response ({hits:,} hits, {share:.1%} of the lookups"
        )
        text = (
            f"The response cache found {found}{where}, Triton's counts), as with inputs that do "
            "not repeat: whatever the "
            "throughput change shows is the cost of looking up and storing responses that are "
            "never reused."
        )
        return Finding("cache-effect", s.variant.name, text, figures)
    text = (
        f"The response cache answered {share:.0%} of the lookups{where} (Triton's counts): "
        "a hit returns the stored response without running the model, so the model ran "
        "for the misses only."
    )
    if share > 0.9:
        text += (
            " This is the figure for traffic whose inputs repeat as perf_analyzer's do (it cycles "
            "through a few distinct samples); requests that do not repeat would all miss."
        )
    return Finding("cache-effect", s.variant.name, text, figures)
