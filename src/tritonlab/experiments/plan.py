"""Experiment plans: which serving variants, under which loads, measured how, how many times.

A cell is one variant under one load point in one repeat. The seed's comparison is a plan with
four variants and one load point (gRPC, batch 1, concurrency 8); sweeps add load points.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonlab import gateway
from tritonlab.errors import PlanError
from tritonlab.experiments import plan_limits as limits
from tritonlab.experiments.load_kinds import LoadKind, kind_of
from tritonlab.perf.settings import PROTOCOLS, Distribution, PerfSettings
from tritonlab.perf.trace import Trace, TraceStats
from tritonlab.records import Record, later
from tritonlab.repository.variants import ServingVariant, seed_comparison_variants
from tritonlab.run_layout import RunLayout


@dataclass(frozen=True)
class LoadKey:
    """A load point's key as stored on disk: ``{protocol}_b{batch}_{load}[_s{sequence}]``.

    ``load`` is the load kind's letter and level (``load_kinds``): ``c8`` (concurrency 8),
    ``r200`` (200 req/s Poisson), ``k200`` (200 req/s evenly spaced), ``p70`` (70% of peak) or
    ``tbursts`` (the trace named ``bursts`` replayed); the one place keys are built
    (``LoadPoint.key``) and parsed (``LoadKey.parse``).
    """

    protocol: str
    batch_size: int
    load: str
    sequence_length: int | None = None

    def __str__(self) -> str:
        seq = f"_s{self.sequence_length}" if self.sequence_length is not None else ""
        return f"{self.protocol}_b{self.batch_size}_{self.load}{seq}"

    @classmethod
    def parse(cls, key: str) -> LoadKey | None:
        """The key's parts, or None when ``key`` is not in the form ``LoadPoint.key`` builds."""
        found = re.fullmatch(r"([^_]*)_b(\d+)_([^_]+)(?:_s(\d+))?", key)
        if found is None:
            return None
        protocol, batch, load, seq = found.groups()
        return cls(protocol, int(batch), load, int(seq) if seq else None)


def is_open_loop_key(load_key: str) -> bool:
    """Whether a load key names an open-loop load (a rate, a share of the peak, a trace):
    perf_analyzer offers the requests on its own schedule, whatever the server serves."""
    parsed = LoadKey.parse(load_key)
    return parsed is not None and not parsed.load.startswith("c")


def sequence_length_of(load_key: str) -> int | None:
    """The sequence length a load key names (``grpc_b1_c4_s128`` -> 128); None without one."""
    parsed = LoadKey.parse(load_key)
    return parsed.sequence_length if parsed else None


@dataclass(frozen=True)
class LoadPoint(Record):
    """The client side of a cell: protocol, client batch size, and closed- or open-loop load.

    Which fields a load sets makes its kind (``load_kinds``: concurrency, a Poisson or evenly
    spaced rate, a share of each configuration's measured peak, a replayed trace); the kind
    builds its key and words and checks it. A share of the peak keeps its fraction in its key
    (``grpc_b1_p70``), so a variant's open-loop cells line up with the other variants' at the
    same relative load; the runner fills in the absolute rate.
    """

    protocol: str = "grpc"
    batch_size: int = 1
    concurrency: int | None = 8
    request_rate_per_s: float | None = None
    peak_fraction: float | None = later()
    # Every dynamic non-batch dim of every input at this length (a transformer's sequence axis).
    sequence_length: int | None = later()
    trace: TraceStats | None = later()
    # How an open-loop rate's requests are spaced (perf_analyzer's --request-distribution).
    request_distribution: Distribution = later("poisson")

    @property
    def kind(self) -> LoadKind:
        """The load's kind (``load_kinds.LOAD_KINDS``)."""
        return kind_of(self)

    @property
    def open_loop(self) -> bool:
        """Whether the load is a request schedule (a rate or a replayed trace), not a
        concurrency."""
        return self.kind.open_loop

    @property
    def key(self) -> str:
        """The load's stable id in file names and results: ``grpc_b1_c8``, ``grpc_b1_p50``,
        ``..._s128``."""
        kind = self.kind
        load = f"{kind.letter}{kind.level(self)}"
        return str(LoadKey(self.protocol, self.batch_size, load, self.sequence_length))

    @property
    def label(self) -> str:
        """The load in words: protocol, client batch, sequence length and the kind's words."""
        seq = f", sequence {self.sequence_length}" if self.sequence_length is not None else ""
        return f"{self.protocol}, batch {self.batch_size}{seq}, {self.kind.words(self)}"

    def validate(self) -> None:
        """Raise ``PlanError`` naming the setting if perf_analyzer could not run this load."""
        if self.protocol not in PROTOCOLS:
            raise PlanError(
                f"protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}"
            )
        if self.batch_size < 1:
            raise PlanError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.sequence_length is not None and self.sequence_length < 1:
            raise PlanError(f"sequence length must be >= 1, got {self.sequence_length}")
        if (problem := self.kind.problem(self)) is not None:
            raise PlanError(problem)

    def window_ms(self, at_least_ms: int) -> int:
        """The measurement window for this load: ``at_least_ms``, or under a trace the whole
        cycles of it that last at least that long."""
        return self.trace.window_ms(at_least_ms) if self.trace is not None else at_least_ms


@dataclass(frozen=True)
class MeasurementSettings(Record):
    """How perf_analyzer measures each cell (the same for every cell of a plan)."""

    measurement_interval_ms: int = 2000
    stability_percentage: float = 25.0
    max_trials: int = 8
    retries_when_unstable: int = 1
    # "classic": one configuration loaded at a time, each cell perf_analyzer's stable windows;
    # "blocks": every configuration co-loaded, short cells in random block order
    # (experiments/blocks.py), ``measurement_interval_ms`` the longest window it may use.
    engine: str = later("classic")
    # Every cell sends samples drawn afresh for it (models/inputs.FRESH_SAMPLES of them), so no
    # input repeats across cells or within one: traffic a response cache cannot answer.
    fresh_inputs: bool = later(False)
    # A model that carries state (served by the sequence batcher): the requests in each sequence
    # perf_analyzer sends (``PerfSettings.requests_per_sequence``); None for a stateless model.
    requests_per_sequence: int | None = later()


@dataclass(frozen=True)
class ExperimentPlan(Record):
    """Variants x load points x repeats, measured interleaved (A B C D A B C D ...)."""

    model_name: str
    variants: tuple[ServingVariant, ...]
    loads: tuple[LoadPoint, ...] = (LoadPoint(),)
    repeats: int = 3
    measurement: MeasurementSettings = field(default_factory=MeasurementSettings)
    # Why the plan is what it is (variants dropped for this model, the configuration set chosen);
    # the experiment log states them. Not part of the fingerprint.
    notes: tuple[str, ...] = later(())

    def check_limits(self) -> None:
        """``PlanError`` in one line naming the first key of the plan over its bound
        (``plan_limits``): a plan built from flags meets the bounds a plan file does."""
        over = limits.over_limit
        if self.repeats > limits.MAX_REPEATS:
            raise PlanError(f"repeats: {over(self.repeats, limits.MAX_REPEATS)}")
        measured = [v for v in self.variants if not v.control]
        if len(measured) > limits.MAX_VARIANTS:
            what = over(len(measured), limits.MAX_VARIANTS, "configurations")
            raise PlanError(f"variants: {what}")
        for variant in self.variants:
            for name, value in _bounded_values(variant):
                if value > limits.KNOB_CAPS[name]:
                    what = over(value, limits.KNOB_CAPS[name])
                    raise PlanError(f"variant {variant.name!r}: {name}: {what}")
        if len(self.loads) > limits.MAX_LOADS:
            raise PlanError(f"loads: {over(len(self.loads), limits.MAX_LOADS, 'load points')}")
        for load in self.loads:
            if (problem := limits.load_problem(load.batch_size, load.sequence_length)) is not None:
                raise PlanError(f"load {load.key}: {problem[0]}: {problem[1]}")
        m = self.measurement
        for key, value, cap in (
            ("measurement_interval_ms", m.measurement_interval_ms, limits.MAX_WINDOW_MS),
            ("max_trials", m.max_trials, limits.MAX_TRIALS),
            ("retries_when_unstable", m.retries_when_unstable, limits.MAX_RETRIES),
        ):
            if value > cap:
                raise PlanError(f"measurement.{key}: {over(value, cap)}")

    def validate(self, model_batches: bool = True) -> None:
        """Raise ``PlanError`` (or ``ConfigError``) naming the first variant or load Triton or
        perf_analyzer would reject, or the first key over its bound (``plan_limits``)."""
        self.check_limits()
        if not self.variants:
            raise PlanError("a plan needs at least one variant")
        if self.variants[0].name != "baseline":
            raise PlanError(
                "the first variant must be named 'baseline' (comparisons are against it)"
            )
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise PlanError(f"variant names must be unique, got {names}")
        for variant in self.variants:
            variant.validate(model_batches)
        if self.repeats < 1:
            raise PlanError(f"repeats must be >= 1, got {self.repeats}")
        for load in self.loads:
            load.validate()
            smallest = min(v.max_batch_size for v in self.variants)
            if model_batches and load.batch_size > smallest:
                raise PlanError(
                    f"client batch_size {load.batch_size} exceeds max_batch_size {smallest}"
                )

    def perf_settings(
        self,
        load: LoadPoint,
        model_name: str,
        url: str,
        input_shapes: dict[str, tuple[int, ...]],
        input_data: str | None = None,
        request_intervals: str | None = None,
    ) -> PerfSettings:
        """perf_analyzer's settings for one cell: this load on ``model_name`` at ``url``
        (``request_intervals``: the interval file of the load's trace)."""
        m = self.measurement
        if load.trace is not None and request_intervals is None:
            raise PlanError(f"load {load.key} replays a trace: its interval file is needed")
        return PerfSettings(
            model_name=model_name,
            url=url,
            protocol=load.protocol,
            batch_size=load.batch_size,
            concurrency=None if load.open_loop else load.concurrency,
            request_rate_per_s=load.request_rate_per_s,
            request_distribution=load.request_distribution,
            request_intervals=request_intervals if load.trace is not None else None,
            measurement_interval_ms=load.window_ms(m.measurement_interval_ms),
            stability_percentage=m.stability_percentage,
            max_trials=m.max_trials,
            input_shapes=input_shapes,
            input_data=input_data,
            # Open loop needs async requests: sync worker threads cannot keep a Poisson schedule
            # ("Perf Analyzer was not able to keep up with the desired request rate").
            async_mode=load.open_loop,
            requests_per_sequence=m.requests_per_sequence,
        )

    def fingerprint_dict(self) -> dict[str, Any]:
        """The plan as fingerprinted: as stored, without its notes."""
        return {k: v for k, v in self.to_dict().items() if k != "notes"}


@dataclass(frozen=True)
class PlanBasics:
    """What every built-in configuration set takes (``concurrency`` None: the set's own
    default; ``measurement`` None: the defaults)."""

    model_name: str
    repeats: int = 3
    concurrency: int | None = None
    protocol: str = "grpc"
    max_batch_size: int = 64
    measurement: MeasurementSettings | None = None

    def variant(self, name: str, description: str, **knobs: Any) -> ServingVariant:
        """A configuration of a built-in set: ``knobs`` changed, at the largest batch here."""
        return ServingVariant(name, description, max_batch_size=self.max_batch_size, **knobs)

    def plan(self, variants: Sequence[ServingVariant], concurrency: int) -> ExperimentPlan:
        """``variants`` at one load point: batch 1 at the concurrency given here, else at
        ``concurrency`` (the set's default); ``PlanError`` for a key over its bound
        (``plan_limits``), before anything is built from it."""
        plan = ExperimentPlan(
            model_name=self.model_name,
            variants=tuple(variants),
            loads=(LoadPoint(self.protocol, 1, self.concurrency or concurrency),),
            repeats=self.repeats,
            measurement=self.measurement or MeasurementSettings(),
        )
        plan.check_limits()
        return plan


BATCHING_0MS: dict[str, Any] = {"dynamic_batching": True, "max_queue_delay_us": 0}


def seed_comparison_plan(basics: PlanBasics) -> ExperimentPlan:
    """The seed's comparison: four variants at one load point (gRPC, batch 1, concurrency 8)."""
    return basics.plan(seed_comparison_variants(basics.max_batch_size), 8)


def compute_plan(basics: PlanBasics, cores: int) -> ExperimentPlan:
    """Threads x instances for a compute-bound model, each one change from the baseline.

    The baseline is one instance with one onnxruntime thread; the others give the machine's
    ``cores`` to one instance as threads, or to as many instances with one thread each, or keep
    one thread and batch (0 ms delay). The load keeps two requests per core in flight, so every
    instance has one waiting while another runs.
    """
    n = max(2, cores)
    variants = [
        basics.variant("baseline", "baseline (1 instance x 1 thread)"),
        basics.variant(f"threads_{n}", f"1 instance x {n} threads", intra_op_threads=n),
        basics.variant(f"instances_{n}", f"{n} instances x 1 thread", instance_count=n),
        basics.variant("batch_0ms_x1", "batching (0 ms, 1 instance x 1 thread)", **BATCHING_0MS),
    ]
    return basics.plan(variants, 2 * n)


def backends_plan(basics: PlanBasics) -> ExperimentPlan:
    """onnxruntime against OpenVINO on the same model, server and load, each one change from
    its reference: without batching (the engines' cost of one small execution), with dynamic
    batching at delay 0 (their cost at the batches the load forms), and OpenVINO in bf16 (the
    precision alone; its accuracy against onnxruntime goes in the correctness check)."""
    variant = basics.variant
    # Order matters: each is explained against the earliest configuration it differs from in
    # one field, so OpenVINO with batching is compared with onnxruntime with batching.
    variants = [
        variant("baseline", "baseline (onnxruntime, no batching, count=1)"),
        variant("batch_0ms_x1", "batching (0 ms, count=1), onnxruntime", **BATCHING_0MS),
        variant("openvino", "openvino f32 (no batching, count=1)", backend="openvino"),
        variant(
            "batch_0ms_x1_openvino",
            "batching (0 ms, count=1), openvino f32",
            backend="openvino",
            **BATCHING_0MS,
        ),
        variant(
            "batch_0ms_x1_openvino_bf16",
            "batching (0 ms, count=1), openvino bf16",
            backend="openvino",
            precision="bf16",
            **BATCHING_0MS,
        ),
    ]
    return basics.plan(variants, 8)


def for_unbatched_model(plan: ExperimentPlan, cores: int) -> ExperimentPlan:
    """``plan`` for a model without a batch axis: Triton cannot batch it, so batching variants
    are dropped and every variant is served with ``max_batch_size: 0``; with only the baseline
    left, an instance-count variant is added so there is still a comparison to explain."""
    kept = [replace(v, max_batch_size=0) for v in plan.variants if not v.dynamic_batching]
    dropped = [v.name for v in plan.variants if v.dynamic_batching]
    if len(kept) == 1:
        n = max(2, cores)
        kept.append(
            ServingVariant(
                f"instances_{n}", f"no batching, count={n}", max_batch_size=0, instance_count=n
            )
        )
    dropped_words = f", and the batching configurations ({', '.join(dropped)}) were dropped"
    note = (
        "The model has no batch axis (its first dim is fixed), so Triton cannot batch its "
        f"requests: it is served with max_batch_size 0{dropped_words if dropped else ''}; "
        "instance counts and threads are still compared."
    )
    loads = tuple(replace(ld, batch_size=1) for ld in plan.loads)
    return replace(plan, variants=tuple(kept), loads=loads, notes=(*plan.notes, note))


def _bounded_values(variant: ServingVariant) -> list[tuple[str, int]]:
    """A variant's bounded knobs as (plan name, value); threads None (the engine's) skipped."""
    values = [
        ("instance_count", variant.instance_count),
        ("max_batch_size", variant.max_batch_size),
        ("max_queue_delay_microseconds", variant.max_queue_delay_us),
    ]
    if variant.intra_op_threads is not None:
        values.append(("intra_op_thread_count", variant.intra_op_threads))
    return values + [("preferred_batch_size", s) for s in variant.preferred_batch_sizes]


# Trace loads: a replayed trace as a load point, and its files copied into the run folder
# before anything is measured (``perf/trace.py`` reads them).


def trace_load(
    trace: Trace, protocol: str = "grpc", batch_size: int = 1, sequence_length: int | None = None
) -> LoadPoint:
    """``trace`` replayed at this protocol, client batch size and sequence length."""
    return LoadPoint(protocol, batch_size, None, sequence_length=sequence_length, trace=trace.stats)


def under_trace(plan: ExperimentPlan, trace: Trace) -> ExperimentPlan:
    """``plan`` with each of its loads' (protocol, batch size, sequence length) replaying
    ``trace`` instead of its concurrency or rate (``run --load-trace``)."""
    shapes = dict.fromkeys((ld.protocol, ld.batch_size, ld.sequence_length) for ld in plan.loads)
    return replace(plan, loads=tuple(trace_load(trace, *shape) for shape in shapes))


def distinct_traces(traces: Sequence[Trace]) -> list[Trace]:
    """``traces`` without repeats; ``PlanError`` when two different files share a name (the
    name is their load key's and their files')."""
    by_name: dict[str, Trace] = {}
    for trace in traces:
        seen = by_name.setdefault(trace.stats.name, trace)
        if seen.stats.sha256 != trace.stats.sha256:
            raise PlanError(
                f"traces {str(seen.path)!r} and {str(trace.path)!r} are both named "
                f"{trace.stats.name!r} (from their file names); rename one"
            )
    return list(by_name.values())


def install_traces(run_dir: Path, traces: Sequence[Trace]) -> None:
    """Copy each trace's CSV into ``run_dir/traces/`` and write its ``--request-intervals``
    file beside it."""
    layout = RunLayout(run_dir)
    for trace in distinct_traces(traces):
        name = trace.stats.name
        target = layout.trace_csv(name)
        if trace.path.resolve() != target.resolve():
            gateway.copy_in(trace.path, target)
        gateway.write_text(layout.trace_intervals(name), trace.interval_file_text())


def plan_traces_missing(plan: ExperimentPlan, traces: Sequence[Trace]) -> list[str]:
    """The names of the plan's trace loads that ``traces`` does not hold."""
    have = {t.stats.name for t in traces}
    return sorted({ld.trace.name for ld in plan.loads if ld.trace and ld.trace.name not in have})
