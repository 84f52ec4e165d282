"""Serving efficiency: served throughput over the in-process ceiling at the same parallelism.

The ceiling of I instances x T intra-op threads is what I onnxruntime sessions of T threads
deliver in this process with no Triton, network or client (``perf.in_process``). Served /
ceiling says how much of the compute a configuration buys reaches the client; the best ceiling
of any parallelism compares configurations of different parallelism. A batching configuration
can exceed its batch-1 ceiling. The log's words are in ``report.efficiency_text``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonlab.decisions.frontier import at_reference_length
from tritonlab.explanation.fit_check import points_around
from tritonlab.perf.in_process import Ceiling
from tritonlab.perf.operator_profile import OperatorsRecord
from tritonlab.stats.aggregate import VariantSummary, compare_figure
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import Verdict


@dataclass(frozen=True)
class Efficiency:
    """One configuration at one load: served throughput against its ceiling and the best."""

    variant_name: str
    description: str
    load_key: str
    ceiling: Ceiling
    best: Ceiling
    served: Summary  # infer/s per repeat
    efficiency: Summary  # served / own ceiling, per repeat
    of_best: Summary  # served / the machine's best in-process figure, per repeat
    # The engine's own in-process timings (batch -> µs per execution, one session of one
    # thread, the whole call), where the run took them: what batching can save per sample.
    timings_us: tuple[tuple[int, float], ...] = ()
    mean_batch: float | None = None  # samples per execution Triton formed (median over repeats)

    def timed_rate(self) -> float | None:
        """The ceiling's parallelism at the timing of its own batch (infer/s): what its window
        should read; None where the timings are not of its parallelism (more than one thread)
        or were not taken."""
        base = self.ceiling.batch_size
        us = dict(self.timings_us).get(base)
        if not us or self.ceiling.threads != 1:
            return None
        return self.ceiling.instances * base * 1e6 / us

    def fastest_per_sample_us(self) -> float | None:
        """The shortest per-sample time (µs) of the timings at (or beside) the mean batch
        Triton formed; None without batching past the ceiling's batch, or without timings of
        the ceiling's parallelism (one thread)."""
        if self.mean_batch is None or self.mean_batch <= self.ceiling.batch_size:
            return None
        if self.ceiling.threads != 1 or not self.timings_us:
            return None
        around = points_around(dict(self.timings_us), self.mean_batch)
        return min((t / b for b, t in around if t > 0), default=None)

    def timed_rate_at_batch(self) -> float | None:
        """The ceiling's parallelism at the timing of the batch it formed (infer/s), or at the
        ceiling's own batch without batching past it; None where no timing of its parallelism
        says."""
        if self.mean_batch is None or self.mean_batch <= self.ceiling.batch_size:
            return self.timed_rate()
        fastest = self.fastest_per_sample_us()
        return self.ceiling.instances * 1e6 / fastest if fastest else None

    def allowance(self) -> float | None:
        """The most served / ceiling this row's batching can reach: the ceiling's time per
        sample over ``fastest_per_sample_us``, at least 1; 1 where it formed no larger batch
        than the ceiling's; None where no timing of its parallelism says."""
        base = self.ceiling.batch_size
        if self.mean_batch is None or self.mean_batch <= base:
            return 1.0
        us = dict(self.timings_us).get(base)
        fastest = self.fastest_per_sample_us()
        return max(1.0, us / base / fastest) if us and fastest else None


def parse_ceilings(operators: OperatorsRecord | None) -> list[Ceiling]:
    """The in-process ceilings recorded in ``operators.json`` (none when absent)."""
    return list(operators.in_process_ceilings or ()) if operators else []


def parse_timings(operators: OperatorsRecord | None) -> dict[str, dict[int, float]]:
    """Engine -> its in-process timings (batch -> µs per execution, the whole call) recorded in
    ``operators.json`` (onnxruntime's and each other engine's; none when absent)."""
    if operators is None:
        return {}
    timings = {"onnxruntime": dict(operators.in_process_us_per_execution)}
    engines = operators.engines_in_process_us_per_execution or {}
    timings |= {e: dict(t) for e, t in engines.items()}
    return {e: {int(b): float(us) for b, us in t.items()} for e, t in timings.items() if t}


def thread_speedup(ceilings: list[Ceiling]) -> dict[int, float]:
    """Intra-op threads -> in-process speedup of one instance over one thread (0: default)."""
    single = {
        c.threads: c.infer_per_s for c in ceilings if c.instances == 1 and c.engine == "onnxruntime"
    }
    base = single.get(1)
    if not base:
        return {}
    return {t: x / base for t, x in single.items() if t != 1 and x > 0}


def serving_efficiency(
    summaries: list[VariantSummary],
    ceilings: list[Ceiling],
    timings: dict[str, dict[int, float]] | None = None,
) -> list[Efficiency]:
    """Each CPU configuration's efficiency at the client batch size its ceiling was taken at,
    and at the reference sequence length the ceilings were measured with; ``timings``: each
    engine's in-process timings (``parse_timings``)."""
    if not ceilings:
        return []
    summaries = at_reference_length(summaries)
    best = max(ceilings, key=lambda c: c.infer_per_s)
    by_parallelism = {(c.instances, c.threads, c.engine): c for c in ceilings}
    out = []
    for s in summaries:
        v = s.variant
        ceiling = by_parallelism.get((v.instance_count, v.intra_op_threads or 0, v.engine))
        if ceiling is None or v.instance_kind != "KIND_CPU" or not ceiling.infer_per_s:
            continue
        if s.settings.batch_size != ceiling.batch_size and ceiling.batch_size != 1:
            continue
        if s.cache_hits:  # responses from the cache did no model work: no ceiling binds them
            continue
        served = s.throughput
        out.append(
            Efficiency(
                v.name,
                v.description,
                s.load_key,
                ceiling,
                best,
                served,
                Summary(tuple(x / ceiling.infer_per_s for x in served.values), served.rounds),
                Summary(tuple(x / best.infer_per_s for x in served.values), served.rounds),
                tuple(sorted((timings or {}).get(v.engine, {}).items())),
                s.mean_batch.median if v.dynamic_batching else None,
            )
        )
    return out


def best_served(
    efficiencies: list[Efficiency], summaries: list[VariantSummary]
) -> tuple[Efficiency, list[tuple[Efficiency, Verdict]]]:
    """The configuration that served the most, and its throughput verdict against every other
    row at its load, weakest lead first (issue 36 audit: a lead over the next median only, while
    a like-for-like row at the load was not separated from it)."""
    by_key = {(s.variant.name, s.load_key): s for s in summaries}
    ranked = sorted(efficiencies, key=lambda e: -(e.served.median or 0.0))
    top = ranked[0]
    first = by_key.get((top.variant_name, top.load_key))
    against = []
    for e in ranked[1:]:
        other = by_key.get((e.variant_name, e.load_key))
        if e.load_key == top.load_key and first is not None and other is not None:
            against.append((e, compare_figure("throughput", "throughput", other, first)))
    against.sort(key=lambda pair: pair[1].low_pct if pair[1].low_pct is not None else -1e9)
    return top, against
