"""Named explanation rules: each reads measured figures and, if it applies, says why.

A rule returns a ``Finding`` that names itself and the figures it used, so a reader can check
the sentence against the table. Rules never estimate: they read queue and compute times from
Triton's statistics extension, batch sizes from its batch statistics, CPU from the processes.
"""

from __future__ import annotations

from collections.abc import Callable

from tritonlab.explanation.batching_rule import batching_amortised
from tritonlab.explanation.compute_bound_rule import batching_compute_bound
from tritonlab.explanation.knob_rules import cache_effect, engine_effect, threads_effect
from tritonlab.explanation.measurement_rules import (
    backend_fallback,
    littles_law,
    perf_analyzer_warnings,
    queue_cross_check,
    unstable_measurement,
)
from tritonlab.explanation.rule_support import (
    Finding,
    RuleContext,
    change_text,
    changed_fields,
    cores_text,
    model_misses,
    paired_medians,
    rounded,
)
from tritonlab.explanation.sequence_rules import sequence_backlog, strategy_effect
from tritonlab.repository.variants import batch_target
from tritonlab.stats.aggregate import compare_figure
from tritonlab.stats.verdicts import HIGHER, LOWER, NO_CLEAR, NO_VERDICT, NOT_COMPARABLE, Verdict
from tritonlab.stats.workload import same_workload

# Thresholds, named so the docs and tests can quote them.
TRAP_QUEUE_SHARE_OF_DELAY = 0.6  # queue time >= 60% of max_queue_delay ...
TRAP_QUEUE_MAX_SHARE_OF_DELAY = 1.2  # ... and not above it: longer waits are a busy instance
TRAP_BATCH_SHARE_OF_IN_FLIGHT = 0.75  # mean batch >= 75% of the requests in flight
SATURATED_QUEUE_SHARE = 0.5  # queue >= half of the time a request spends in the server
SATURATED_MIN_CORES_PER_INSTANCE = 0.8  # a busy single-threaded instance uses about a core
CPU_BOUND_SHARE = 0.9  # server + perf_analyzer CPU >= 90% of the cores
# perf_analyzer's share of the cores below which it is not said to compete with the server
CLIENT_SHARE_THAT_MATTERS = 0.05
CONTENTION_SHARE = 0.75  # instances contend: CPU >= 75% of the cores and executions slower ...
CONTENTION_EXCESS = 0.25  # ... by over 25% than the cost model predicts at that batch


def queue_delay_trap(ctx: RuleContext) -> Finding | None:
    """With a queue delay and fewer requests in flight than the batch target, every batch waits."""
    s, v = ctx.subject, ctx.subject.variant
    # inferences in flight at the client: requests in flight x batch size
    in_flight = None if s.in_flight is None else s.in_flight * s.settings.batch_size
    if not v.dynamic_batching or v.max_queue_delay_us <= 0 or in_flight is None:
        return None
    target, source = batch_target(v)
    queue, batch = s.queue_us.median, s.mean_batch.median
    if in_flight >= target or queue is None or batch is None:
        return None
    if (
        queue < TRAP_QUEUE_SHARE_OF_DELAY * v.max_queue_delay_us
        or queue > TRAP_QUEUE_MAX_SHARE_OF_DELAY * v.max_queue_delay_us
        or batch < TRAP_BATCH_SHARE_OF_IN_FLIGHT * in_flight
    ):
        return None  # not waiting for the delay (or waiting longer: behind a busy instance)
    execution = s.execution_us.median
    if execution is not None and execution >= v.max_queue_delay_us:
        return None  # an instance busy longer than the delay: saturation, not the batcher
    zero_delay = [
        o
        for o in ctx.others
        if o.variant.dynamic_batching
        and o.variant.max_queue_delay_us == 0
        and same_workload(o, s)
        and o.mean_batch.median
    ]
    evidence = (
        f" (the 0 µs variant formed batches of {zero_delay[0].mean_batch.median:.1f} "
        f"with {zero_delay[0].queue_us.median:.0f} µs of queueing)"
        if zero_delay and zero_delay[0].queue_us.median is not None
        else ""
    )
    text = (
        f"Queue-delay trap: only {in_flight:g} inferences are ever in flight, fewer than the "
        f"batcher's target of {target} ({source}), so a batch never fills and every batch waits "
        f"out the full max_queue_delay: queue {queue:.0f} µs against a delay of "
        f"{v.max_queue_delay_us} µs, mean batch {batch:.1f} against {in_flight:g} in flight. "
        f"Fix: a smaller max_queue_delay_microseconds{evidence}, preferred_batch_size of "
        f"{in_flight:g} or less, or more than {target} requests in flight."
    )
    return Finding(
        "queue-delay-trap",
        v.name,
        text,
        {
            "queue_us": rounded(queue),
            "max_queue_delay_us": v.max_queue_delay_us,
            "mean_batch_size": rounded(batch, 2),
            "in_flight": in_flight,
            "batch_target": target,
            "batch_target_field": source,
            "execution_us": rounded(execution),
        },
    )


def _fixed_cost_matters(ctx: RuleContext, slower: bool) -> bool:
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


def _slower_executions(ctx: RuleContext) -> str | None:
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
        paired0, paired1 = paired_medians(
            ctx.server_figure(r, "execution_us"), ctx.server_figure(s, "execution_us")
        )
        before, after = paired0 or before, paired1 or after
        grew = "shrank" if b1 < 0.95 * b0 else "did not grow"  # issue 36 audit: said of 7.7->4
        return (
            f"an execution{of_step} took {after:,.0f} µs (was {before:,.0f}; "
            f"{paired.phrase()}) although batches {grew}"
        )
    return None


def _calls_waited(ctx: RuleContext) -> str | None:
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


def _instances_causes(
    ctx: RuleContext, verdict: Verdict, batch: Verdict, per_inference: Verdict
) -> list[str]:
    """Why the instance change moved throughput as it did: one clause per cause, never empty
    (where no cause applies, the clause says that no server figure moved enough)."""
    if verdict.word == NO_VERDICT:  # no direction to explain: one repeat gives no interval
        return [f"no cause is named: throughput has {verdict.phrase()}"]
    if verdict.word == NOT_COMPARABLE:  # the loads differ or were not kept: nothing to explain
        return [
            "no cause is named: throughput and the server figures could not be compared, so "
            "whether they moved cannot be read"
        ]
    s, r = ctx.subject, ctx.reference
    used, used_before = s.server_cores.median, r.server_cores.median
    n0, n1 = r.variant.instance_count, s.variant.instance_count
    trap = queue_delay_trap(ctx)  # it reads the subject and the others only
    causes: list[str] = []
    if trap is not None and n1 > n0 and verdict.word != HIGHER:
        causes.append(
            "the batcher, not the instances, sets the pace: every batch waits out the queue "
            "delay, so the added instances have nothing more to execute"
            + (
                # that explains no gain; a loss needs its own figure (issue 36 audit)
                f"; that explains no gain, not the loss, which goes with slower executions: "
                f"compute per inference {per_inference.phrase()}"
                if verdict.word == LOWER and per_inference.word == HIGHER
                else "; that explains no gain, not the loss: these figures do not show its cause"
                if verdict.word == LOWER
                else ""
            )
        )
    else:
        slower = _slower_executions(ctx)
        if (
            n1 > n0
            and batch.word == LOWER
            and per_inference.word == HIGHER  # the added per-request cost must show (issue 36)
            and _fixed_cost_matters(ctx, slower is not None)
        ):
            causes.append(
                "the instances split the waiting requests into smaller batches, so each request "
                "carries more of an execution's fixed cost"
            )
        if slower and (waited := _calls_waited(ctx)):
            causes.append(waited)  # the slower executions held their calls' queues
            slower = None
        if slower and s.in_flight is not None and s.in_flight <= 1:
            # one request in the server at a time: the instances never ran side by side, so
            # they cannot have contended (issue 36 audit: said at concurrency 1)
            causes.append(
                f"{slower}, with one request in flight: the instances never ran side by side, "
                "so not from contending with each other"
            )
            slower = None
        cpu, cores, who = ctx.cpu_used(s)
        of = cores_text(cores, ctx.server_cores is not None)
        if slower and cpu is not None and cpu >= CONTENTION_SHARE * cores:
            causes.append(
                f"the instances contend for the cores: {slower} ({who} used {cpu:.2f} {of})"
            )
        elif cpu is not None and cpu >= CPU_BOUND_SHARE * cores and verdict.word != HIGHER:
            causes.append(_no_spare_cpu(ctx, cpu, cores, who, verdict))
        if verdict.word == HIGHER and n1 > n0:
            causes.append(
                "executions ran in parallel"
                + (
                    f": the server used {used:.2f} cores (was {used_before:.2f})"
                    if used and used_before
                    else ""
                )
            )
    if not causes:
        causes.append(_unmoved_clause(batch, per_inference))
    return causes


def _no_spare_cpu(ctx: RuleContext, cpu: float, cores: int, who: str, verdict: Verdict) -> str:
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


def _unmoved_clause(batch: Verdict, per_inference: Verdict) -> str:
    """The clause where no cause applies. Only "no clear difference" verdicts say a figure did
    not move: a "not comparable" or "no verdict" one says nothing either way (issue 36 audit:
    two trace rows' not comparable figures, compute per inference up 55-137%, read 'did not
    move')."""
    words = (batch.word, per_inference.word)
    if any(w in (HIGHER, LOWER) for w in words):
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


def instances_effect(ctx: RuleContext) -> Finding | None:
    """More (or fewer) instances: explained from what changed in the server and the CPU."""
    s, r = ctx.subject, ctx.reference
    if changed_fields(r.variant, s.variant) != ["instance_count"] or not same_workload(r, s):
        return None
    verdict = compare_figure("throughput", "throughput", r, s)
    per_inference = ctx.compare_server("compute per inference", "compute_per_inference_us")
    batch = ctx.compare_server("mean batch", "mean_batch")
    batch0, batch1 = ctx.server_figure(r, "mean_batch"), ctx.server_figure(s, "mean_batch")
    cpi0 = ctx.server_figure(r, "compute_per_inference_us")
    cpi1 = ctx.server_figure(s, "compute_per_inference_us")
    used, used_before = s.server_cores.median, r.server_cores.median
    client = s.perf_analyzer_cores.median
    cpu, cores, _ = ctx.cpu_used(s)
    cpu_before = ctx.cpu_used(r)[0]
    apart = ctx.server_cores is not None
    n0, n1 = r.variant.instance_count, s.variant.instance_count
    figures = {
        "instances_before": n0,
        "instances_after": n1,
        "cores": ctx.cores,
        "server_cores": ctx.server_cores,
        "step": ctx.step,
        "mean_batch_before": rounded(batch0.median, 2),
        "mean_batch_after": rounded(batch1.median, 2),
        "compute_us_per_inference_before": rounded(cpi0.median),
        "compute_us_per_inference_after": rounded(cpi1.median),
        "server_cores_used": rounded(used, 2),
        "server_cores_used_before": rounded(used_before, 2),
        "perf_analyzer_cores_used": rounded(client, 2),
        "throughput_change_pct": rounded(verdict.change_pct, 1),
    }
    # what moved: the mean batch and compute per inference (with their verdicts' words), the CPU
    changed = "; ".join(
        [
            change_text(f"mean batch{ctx.whose}", *paired_medians(batch0, batch1))
            + f" ({batch.word})",
            change_text(
                f"compute per inference{ctx.whose}",
                *paired_medians(cpi0, cpi1),
                " µs",
                digits=0,
            )
            + f" ({per_inference.word})",
            change_text("server CPU" if apart else "server + client CPU", cpu_before, cpu, digits=2)
            + f" {cores_text(cores, apart)}",
        ]
    )
    head = f"{n0} -> {n1} instances: throughput {verdict.phrase()}. What changed: {changed}"
    causes = _instances_causes(ctx, verdict, batch, per_inference)
    text = f"{head}. Why: {'; and '.join(causes)}."
    if ctx.cost_model is not None:
        before, after = ctx.cost_model.predict(r), ctx.cost_model.predict(s)
        figures["predicted_throughput_before"] = rounded(before.throughput_infer_per_s)
        figures["predicted_throughput_after"] = rounded(after.throughput_infer_per_s)
        text += (
            f" The cost model predicts {before.throughput_infer_per_s:,.0f} -> "
            f"{after.throughput_infer_per_s:,.0f} infer/s ({after.regime}; batches of "
            f"{before.requests_per_execution:.1f} -> {after.requests_per_execution:.1f} "
            f"requests, {before.execution_us:,.0f} -> {after.execution_us:,.0f} µs per "
            "execution, instances limited by "
            + (
                f"the server's {ctx.cost_model.cores} "
                f"core{'s' if ctx.cost_model.cores != 1 else ''})"
                if ctx.cost_model.client_apart
                else "the cores perf_analyzer leaves free)"
            )
        )
        missed = [
            which
            for which, point in (("this point", s), ("the reference", r))
            if model_misses(ctx, point)
        ]  # a prediction quoted without its miss read as a cause (issue 36 audit)
        text += (
            f", and it misses {' and '.join(missed)} by more than 25% in its throughput or a "
            "term (see the cost model's section), so take it as the model's, not as measured."
            if missed
            else "."
        )
    return Finding("instances-effect", s.variant.name, text, figures)


def saturated_server(ctx: RuleContext) -> Finding | None:
    """Requests mostly wait for a busy instance (not for a batch to fill)."""
    s = ctx.subject
    queue = s.queue_us.median
    compute = s.compute_us.median  # the median of each repeat's sum, as the log's figures are
    if queue is None or not compute:
        return None
    share = queue / (queue + compute)
    if share < SATURATED_QUEUE_SHARE or queue_delay_trap(ctx) is not None:
        return None
    if sequence_backlog(ctx) is not None:
        return None  # the wait is for a sequence slot, not for a busy instance
    v = s.variant
    execution = s.execution_us.median
    if (
        v.dynamic_batching
        and v.max_queue_delay_us > 0
        and queue <= TRAP_QUEUE_MAX_SHARE_OF_DELAY * v.max_queue_delay_us
        and (execution is None or execution < v.max_queue_delay_us)
    ):
        return None  # the wait can be the batcher's own delay, not a busy instance
    n, used = v.instance_count, s.server_cores.median
    cores = ctx.server_cores or ctx.cores  # the cores the server could run on
    if used is not None and used < min(n, cores) * SATURATED_MIN_CORES_PER_INSTANCE:
        return None  # the server was not busy enough for its instances to be the queue's cause
    of = cores_text(cores, ctx.server_cores is not None)
    evidence = f" (the server used {used:.2f} {of})" if used is not None else ""
    text = (
        f"Saturated: requests spend {share:.0%} of their queue and compute time queued "
        f"({queue:.0f} µs) against {compute:.0f} µs of compute; the {n} "
        f"instance{'s' if n > 1 else ''} {'are' if n > 1 else 'is'} kept busy{evidence} and "
        "the other requests in flight wait behind it."
    )
    return Finding(
        "saturated-server",
        s.variant.name,
        text,
        {
            "queue_us": rounded(queue),
            "compute_us": rounded(compute),
            "queue_share": rounded(share, 2),
        },
    )


def cpu_bound(ctx: RuleContext) -> Finding | None:
    """Flag cells where the load generator may have set the pace: server and perf_analyzer
    together used up the machine's cores, or under the CPU split perf_analyzer its own."""
    s = ctx.subject
    used, client = s.server_cores.median, s.perf_analyzer_cores.median
    if used is None or client is None:
        return None
    if ctx.server_cores is not None:  # the CPU split: perf_analyzer had the other CPUs alone
        client_cores = max(1, ctx.cores - ctx.server_cores)
        if client < CPU_BOUND_SHARE * client_cores:
            return None
        noun = "core" if client_cores == 1 else "cores"
        text = (
            f"Load-generator-bound: perf_analyzer used {client:.2f} of its own {client_cores} "
            f"{noun} (the server {used:.2f} {cores_text(ctx.server_cores, True)}); the load "
            "generator may set the pace, so these numbers can understate the server."
        )
    elif used + client < CPU_BOUND_SHARE * ctx.cores:
        return None
    elif client < CLIENT_SHARE_THAT_MATTERS * ctx.cores:
        # perf_analyzer took next to nothing: the cores are the server's limit, not a load
        # generator's (issue 36 audit: "understate a dedicated server" at 0.02 of a core)
        text = (
            f"CPU-bound: the server used {used:.2f} and perf_analyzer {client:.2f} of "
            f"{ctx.cores} cores; the server had the cores nearly to itself, so the machine's "
            "cores, not the load generator, set the pace."
        )
    else:
        text = (
            f"CPU-bound: the server used {used:.2f} and perf_analyzer {client:.2f} of "
            f"{ctx.cores} cores; the load generator competes with the server, so these "
            "numbers understate a dedicated server."
        )
    return Finding(
        "client-bound" if ctx.server_cores is not None else "cpu-bound",
        s.variant.name,
        text,
        {
            "server_cores_used": rounded(used, 2),
            "perf_analyzer_cores_used": rounded(client, 2),
            "cores": ctx.cores,
            "server_cores": ctx.server_cores,
        },
        kind="flag",
    )


RULES: tuple[Callable[[RuleContext], Finding | None], ...] = (
    batching_amortised,
    batching_compute_bound,
    queue_delay_trap,
    instances_effect,
    threads_effect,
    engine_effect,
    cache_effect,
    strategy_effect,
    sequence_backlog,
    saturated_server,
    cpu_bound,
    littles_law,
    unstable_measurement,
    queue_cross_check,
    perf_analyzer_warnings,
    backend_fallback,
)


def apply_rules(ctx: RuleContext) -> list[Finding]:
    """Every rule's finding for ``ctx`` (rules that do not apply say nothing)."""
    return [f for rule in RULES if (f := rule(ctx)) is not None]
