"""The clauses the instance-count rule (``rules.instances_effect``) builds its "why" from:
slower executions (against the cost model, or a paired change), calls a BLS model waited on,
the fixed cost smaller batches carry, no spare CPU, and the clause where nothing moved.
"""

from __future__ import annotations

from tritonlab.explanation.rule_support import (
    RuleContext,
    cores_text,
    model_misses,
    paired_medians,
    paired_note,
)
from tritonlab.stats.verdicts import HIGHER, LOWER, NO_CLEAR, Verdict, interval_text

CPU_BOUND_SHARE = 0.9  # server + perf_analyzer CPU >= 90% of the cores
# perf_analyzer's share of the cores below which it is not said to compete with the server
CLIENT_SHARE_THAT_MATTERS = 0.05
CONTENTION_SHARE = 0.75  # instances contend: CPU >= 75% of the cores and executions slower ...
CONTENTION_EXCESS = 0.25  # ... by over 25% than the cost model predicts at that batch


def fixed_cost_matters(ctx: RuleContext, slower: bool) -> bool:
    """Whether smaller batches can be named as costing more per request: the cost model puts
    the per-inference cost at the smaller batch 10% or more above the larger's; without a
    model, only where executions were not slower than their batch explains (issue 36 audit:
    compute per inference doubled, slower executions, where the batch size barely moved it)."""
    s, r = ctx.subject, ctx.reference
    b0, b1 = ctx.server_figure(r, "mean_batch").median, ctx.server_figure(s, "mean_batch").median
    if ctx.cost_model is None or b0 is None or b1 is None or b0 <= 0 or b1 <= 0:
        return not slower
    model = ctx.cost_model.for_engine(s.variant.engine)
    k, threads = s.settings.batch_size, s.variant.intra_op_threads
    per0 = model.execution_us(b0 / k, k, threads) / b0
    per1 = model.execution_us(b1 / k, k, threads) / b1
    return per1 >= 1.1 * per0


def slower_executions(ctx: RuleContext) -> str | None:
    """Evidence that executions took longer than their batch explains, or None: over 25% above
    the cost model's prediction, or (without it) slower although batches did not grow."""
    s, r = ctx.subject, ctx.reference
    after = ctx.server_figure(s, "execution_us").median
    before = ctx.server_figure(r, "execution_us").median
    b0, b1 = ctx.server_figure(r, "mean_batch").median, ctx.server_figure(s, "mean_batch").median
    if after is None or b1 is None:
        return None
    k = s.settings.batch_size
    # whose executions: the changed step's, where the figures are its (issue 36 audit: a
    # pipeline row quoted step `cnn`'s execution time as the pipeline's)
    of_step = f" of step `{ctx.step}`" if ctx.step is not None else ""
    if ctx.cost_model is not None and not model_misses(ctx, r):
        # the prediction is evidence only where the model meets the reference: slower than a
        # model that holds there points at this change; a model that misses the reference too
        # is no evidence of what executions should cost (issue 36 audit: contention named from
        # a prediction that missed both sides)
        predicted = ctx.cost_model.for_engine(s.variant.engine).execution_us(
            b1 / k, k, s.variant.intra_op_threads
        )
        if after > (1 + CONTENTION_EXCESS) * predicted:
            return (
                f"an execution{of_step} of {b1:.1f} inferences took {after:,.0f} µs where the "
                f"cost model predicts {predicted:,.0f} µs"
            )
        return None
    if before is not None and b0 is not None and b1 <= b0 and after > 1.1 * before:
        # the medians may rest on different repeats: the paired change must show it (issue 36
        # audit: 3,498 against 2,475 µs over 2 and 3 repeats, +29%, CI -55% to +268%)
        paired = ctx.compare_server("compute per execution", "execution_us")
        if paired.word != HIGHER:
            return None
        # the medians quoted beside the paired change are over the rounds it pairs (issue 36
        # audit: 1,347 against 1,031 µs, a median over 28 repeats beside one over 10 blocks)
        execution0, execution1 = (
            ctx.server_figure(r, "execution_us"),
            ctx.server_figure(s, "execution_us"),
        )
        paired0, paired1 = paired_medians(execution0, execution1)
        before, after = paired0 or before, paired1 or after
        grew = "shrank" if b1 < 0.95 * b0 else "did not grow"  # issue 36 audit: said of 7.7->4
        return (
            f"an execution{of_step} took {after:,.0f} µs (was {before:,.0f}; "
            f"{paired.phrase()}{paired_note(execution0, execution1)}) although batches {grew}"
        )
    return None


def calls_waited(ctx: RuleContext) -> str | None:
    """Where the measured model calls others and is itself the one changed (a BLS model): its
    executions include its calls, so the called model whose queue grew by at least half the
    executions' growth is named as where the time went (issue 36 audit: a BLS model's slower
    executions were called core contention while `cnn`'s queue rose 38 -> 25,037 µs)."""
    s, r = ctx.subject, ctx.reference
    if ctx.step is not None or not any(c.steps for c in s.cells):
        return None
    after = ctx.server_figure(s, "execution_us").median
    before = ctx.server_figure(r, "execution_us").median
    if after is None or before is None or after <= before:
        return None
    rises = []
    for name in sorted({n for c in s.cells for n in c.steps}):
        q1 = s.step_figure(name, "queue_us_per_request").median
        q0 = r.step_figure(name, "queue_us_per_request").median
        if q1 is not None and q0 is not None:
            rises.append((q1 - q0, name, q0, q1))
    if not rises:
        return None
    rise, name, q0, q1 = max(rises)
    if rise < 0.5 * (after - before):
        return None
    text = (
        f"its executions include its calls, and they waited on them: an execution took "
        f"{after:,.0f} µs (was {before:,.0f}) while `{name}`'s queue rose from {q0:,.0f} to "
        f"{q1:,.0f} µs per request"
    )
    # the calls' own compute that rose too: the rest of the growth (issue 36 audit: a third of
    # it was `cnn`'s and `preprocess`'s slower compute, which the clause did not name)
    slower = []
    for step in sorted({n for c in s.cells for n in c.steps}):
        c1 = s.step_figure(step, "compute_us_per_request").median
        c0 = r.step_figure(step, "compute_us_per_request").median
        if c0 and c1 and c1 > 1.1 * c0 and c1 - c0 >= 0.05 * (after - before):
            slower.append(f"`{step}` {c0:,.0f} -> {c1:,.0f} µs")
    if slower:
        text += (
            "; the calls' own compute per request rose too ("
            + ", ".join(slower)
            + "), the rest of the growth"
        )
    return text


def no_spare_cpu(ctx: RuleContext, cpu: float, cores: int, who: str, verdict: Verdict) -> str:
    """The CPU clause of a count change that did not pay. Where the reference used the cores as
    fully, the full CPU explains why the added instances gained nothing, not a loss (issue 36
    audit: a -10% put down to "no spare CPU" while both sides used 0.91 of the core)."""
    s, r = ctx.subject, ctx.reference
    of = cores_text(cores, ctx.server_cores is not None)
    before, _, _ = ctx.cpu_used(r)
    if before is None or before < CPU_BOUND_SHARE * cores:
        return f"no spare CPU: {who} used {cpu:.2f} {of}"
    n0, n1 = r.variant.instance_count, s.variant.instance_count
    text = (
        f"no spare CPU for {'more' if n1 > n0 else 'the'} instances: {who} used {before:.2f} "
        f"{of} with {n0} instance{'s' if n0 != 1 else ''} and {cpu:.2f} with {n1}, so they "
        "could not run more work side by side"
    )
    if verdict.word == LOWER:
        text += " (that explains no gain, not the loss: these figures do not show its cause)"
    return text


def unmoved_clause(
    batch: Verdict,
    per_inference: Verdict,
    throughput: Verdict | None = None,
    offered: bool = False,
) -> str:
    """The clause where no cause applies. Only "no clear difference" verdicts say a figure did
    not move: a "not comparable" or "no verdict" one says nothing either way (issue 36 audit:
    two trace rows' not comparable figures, compute per inference up 55-137%, read 'did not
    move')."""
    words = (batch.word, per_inference.word)
    if any(w in (HIGHER, LOWER) for w in words):
        if offered:
            # an offered rate sets throughput while both sides keep up: no server change could
            # move it (issue 36 audit: "not enough to change throughput" said under a trace)
            return (
                "the server figures moved as listed; throughput is the offered rate while both "
                "keep up, so it could not show them"
            )
        if throughput is not None and not throughput.decided and throughput.has_interval:
            # a wide interval cannot say the moves were too small (issue 36 audit: said of
            # +15%, CI -15% to +56%)
            low, high = throughput.ci95_change_pct or (0.0, 0.0)
            return (
                "the server figures moved as listed; whether throughput moved with them this "
                f"run cannot tell (CI {interval_text(low, high)})"
            )
        return (
            "the server figures moved as listed, but not enough to change throughput beyond "
            "the noise"
        )
    if all(w == NO_CLEAR for w in words):
        # an unseparated figure may still have moved: no cause is named from it (issue 36
        # audit: "so the instance count was not what limited this load" from CI -40% to +91%)
        return (
            "no server figure moved clearly (batch, compute per inference), so these figures "
            "name no cause"
        )
    return (
        f"no cause is named: the server figures could not be compared (mean batch {batch.word}, "
        f"compute per inference {per_inference.word}), so whether they moved cannot be read"
    )
