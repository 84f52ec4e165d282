"""Group stored cells by (variant, load point) and summarise every figure over the repeats."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Annotated

from tritonlab.experiments.store import CellResult
from tritonlab.perf.records import FELL_BEHIND
from tritonlab.perf.settings import PerfSettings
from tritonlab.records import NOT_STORED, Record
from tritonlab.repository.variants import ServingVariant
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import Verdict, compare, not_comparable
from tritonlab.stats.workload import workload_differences

LITTLE_TOLERANCE = 0.2  # |throughput x latency / in-flight - 1| above this flags a cell


class _Repeats:
    """A figure of every repeat as a ``Summary``: the named field of the cells' perf_analyzer
    measurements, or with ``server`` of their server statistics (None where a cell has none)."""

    def __init__(self, name: str, server: bool = False) -> None:
        self.name, self.server = name, server

    def __get__(self, summary: VariantSummary, owner: object = None) -> Summary:
        parts = [c.server if self.server else c.perf.measurement for c in summary.cells]
        values = [getattr(p, self.name) if p else None for p in parts]
        return Summary.of(
            values, summary.rounds, summary.process_sd_log(self.name), summary.process
        )


@dataclass(frozen=True)
class VariantSummary(Record):
    """One variant at one load point, over its repeats; stored (in ``summary.json``) as its
    variant, settings, repeat counts and each figure's summary, not its cells."""

    DERIVED = (
        ("repeats", "repeat_count"),
        ("stable_repeats", "stable_count"),
        "trial_counts",
        ("throughput_infer_per_s", "throughput"),
        ("latency_avg_us", "latency_avg"),
        ("latency_p95_us", "latency_p95"),
        ("latency_p99_us", "latency_p99"),
        ("queue_us_per_request", "queue_us"),
        ("compute_input_us_per_request", "compute_input_us"),
        ("compute_infer_us_per_request", "compute_infer_us"),
        ("compute_output_us_per_request", "compute_output_us"),
        ("overhead_us_per_request", "overhead_us"),
        ("compute_us_per_inference", "compute_per_inference_us"),
        ("mean_batch_size", "mean_batch"),
        ("batch_size_executions", "batch_distribution"),
        ("server_cores_used", "server_cores"),
        ("perf_analyzer_cores_used", "perf_analyzer_cores"),
        "littles_law_ratio",
    )

    variant: ServingVariant
    model_name: str
    load_key: str
    settings: PerfSettings
    cells: Annotated[tuple[CellResult, ...], NOT_STORED]

    # Client side (perf_analyzer), one value per repeat.
    throughput = _Repeats("throughput_infer_per_s")  # served throughput (infer/s)
    latency_avg = _Repeats("latency_avg_us")  # average latency (µs)
    latency_p95 = _Repeats("latency_p95_us")  # p95 latency (µs)
    latency_p99 = _Repeats("latency_p99_us")  # p99 latency (µs)
    perf_queue_us = _Repeats("server_queue_us")  # to cross-check the statistics deltas
    # In the server (Triton's statistics), per request in µs unless named otherwise.
    queue_us = _Repeats("queue_us_per_request", server=True)
    compute_input_us = _Repeats("compute_input_us_per_request", server=True)
    compute_infer_us = _Repeats("compute_infer_us_per_request", server=True)  # model execution
    compute_output_us = _Repeats("compute_output_us_per_request", server=True)
    # input + infer + output: the median of the sums, as the other figures are medians
    compute_us = _Repeats("compute_us_per_request", server=True)
    overhead_us = _Repeats("overhead_us_per_request", server=True)  # outside queue and compute
    compute_per_inference_us = _Repeats("compute_us_per_inference", server=True)
    execution_us = _Repeats("compute_us_per_execution", server=True)  # per execution
    mean_batch = _Repeats("mean_batch_size", server=True)  # samples per execution

    @property
    def repeat_count(self) -> int:
        """How many repeats were measured (cells, stable or not)."""
        return len(self.cells)

    @property
    def rounds(self) -> list[int | str]:
        """The pairing key of every cell: its round (with its node on a cluster)."""
        return [c.block for c in self.cells]

    @property
    def process(self) -> str:
        """Which server process served these cells: the configuration, with the node (or the
        run, as ``check`` tags it) they were measured on."""
        return f"{self.cells[0].node}/{self.variant.name}" if self.cells else ""

    def process_sd_log(self, figure: str) -> float:
        """The spread of this configuration's own server process for ``figure``, in log units
        (``process_term.py``): the packaged term when every cell came from one process that
        served the whole run, else 0."""
        if not self.cells or not all(c.whole_run_process for c in self.cells):
            return 0.0
        from tritonlab.stats.error_rates import process_sd_log

        return process_sd_log(figure)

    def step_figure(self, step: str, name: str) -> Summary:
        """A called model's own server ``name`` (a ``ServerStatsDelta`` figure) per repeat, from
        the statistics each cell took of ``step`` (an ensemble's step, a BLS callee): a
        pipeline's row compared by the step it changes, not the whole pipeline's counters."""
        values = [
            getattr(d, name) if (d := c.steps.get(step)) and d.execution_count else None
            for c in self.cells
        ]
        return Summary.of(values, self.rounds, self.process_sd_log(name), self.process)

    @property
    def load_generator_fell_behind(self) -> bool:
        """perf_analyzer said, in some repeat, that it could not keep up the requested rate;
        under a replayed trace, that it sent more than a few requests late
        (``perf.trace.replay_fell_behind``)."""
        if self.settings.request_intervals is not None:
            from tritonlab.perf.trace import replay_fell_behind

            return any(replay_fell_behind(list(c.perf.warnings)) for c in self.cells)
        return any(FELL_BEHIND in w for c in self.cells for w in c.perf.warnings)

    @property
    def server_cores(self) -> Summary:
        """Cores the server used (CPU-seconds per second), one value per repeat."""
        return Summary.of(
            [c.server_cores_used if c.server_cpu_s else None for c in self.cells], self.rounds
        )

    @property
    def perf_analyzer_cores(self) -> Summary:
        """Cores perf_analyzer used (CPU-seconds per second), one value per repeat."""
        return Summary.of([c.perf_analyzer_cores_used for c in self.cells], self.rounds)

    @property
    def cache_hits(self) -> int:
        """Requests the response cache answered, summed over the repeats."""
        return sum(c.server.cache_hit_count for c in self.cells if c.server)

    @property
    def cache_misses(self) -> int:
        """Requests the response cache was asked for and did not hold, summed over the repeats."""
        return sum(c.server.cache_miss_count for c in self.cells if c.server)

    @property
    def cache_hit_share(self) -> float | None:
        """The share of cache lookups the cache answered (0..1); None where none was made."""
        lookups = self.cache_hits + self.cache_misses
        return self.cache_hits / lookups if lookups else None

    @property
    def batch_distribution(self) -> dict[int, int]:
        """Executions per batch size, summed over the repeats."""
        total: Counter[int] = Counter()
        for cell in self.cells:
            if cell.server:
                total.update(cell.server.batch_size_executions)
        return dict(sorted(total.items()))

    @property
    def stable_count(self) -> int:
        """How many repeats perf_analyzer reported as stable."""
        return sum(1 for c in self.cells if c.perf.stable)

    @property
    def trial_counts(self) -> list[int]:
        """perf_analyzer's trial count of each repeat, in repeat order."""
        return [c.perf.trial_count for c in self.cells]

    @property
    def in_flight(self) -> float | None:
        """Requests in flight for closed-loop load (concurrency); None for request-rate load."""
        return float(self.settings.concurrency) if self.settings.concurrency else None

    @property
    def littles_law_ratio(self) -> float | None:
        """throughput (req/s) x avg latency (s) / concurrency: near 1 when the cell is sound."""
        tput, lat = self.throughput.median, self.latency_avg.median
        if self.in_flight is None or not tput or not lat:
            return None
        return tput / self.settings.batch_size * lat * 1e-6 / self.in_flight  # requests/s x s

    @property
    def littles_law_ok(self) -> bool | None:
        """True when Little's law holds within ``LITTLE_TOLERANCE``; None when unchecked."""
        ratio = self.littles_law_ratio
        return None if ratio is None else abs(ratio - 1.0) <= LITTLE_TOLERANCE


def summarise(
    cells: list[CellResult], variant_order: list[str] | None = None, controls: bool = False
) -> list[VariantSummary]:
    """One summary per (variant, load point), variants in plan order, loads as measured.

    A/A control cells (``ServingVariant.control``) are left out unless ``controls`` is set:
    the control is the noise floor (``noise_floor.py``), never a configuration to compare."""
    order = {name: i for i, name in enumerate(variant_order or [])}
    groups: dict[tuple[str, str], list[CellResult]] = {}
    cells = [c for c in cells if controls or not c.variant.control]
    for cell in sorted(
        cells, key=lambda c: (order.get(c.variant.name, len(order)), c.repeat, c.started_utc)
    ):
        groups.setdefault((cell.variant.name, cell.load_key), []).append(cell)
    return [
        VariantSummary(
            variant=group[0].variant,
            model_name=group[0].model_name,
            load_key=key[1],
            settings=group[0].perf.settings,
            cells=tuple(sorted(group, key=lambda c: c.repeat)),
        )
        for key, group in groups.items()
    ]


def why_not_comparable(a: VariantSummary, b: VariantSummary) -> str | None:
    """Why two summaries' figures cannot be compared, or None when they can: what differs in
    their work (model, input shapes) or offered load, or a rate perf_analyzer did not keep up.

    The client (protocol, client batch size) may differ: a verdict between two clients at the
    same load compares two ways of serving the same work (the picks' runner-ups do)."""
    if differences := workload_differences(a, b, client=False):
        return "; ".join(differences)
    if a.load_generator_fell_behind or b.load_generator_fell_behind:
        if a.settings.request_intervals is not None:
            from tritonlab.perf.trace import KEPT_TO_PCT

            return (
                f"perf_analyzer sent more than {KEPT_TO_PCT:g}% of the requests late in a "
                "repeat: it did not keep to the trace"
            )
        return "perf_analyzer did not keep up the offered rate"
    return None


def compare_figure(
    figure: str, attr: str, reference: VariantSummary, subject: VariantSummary
) -> Verdict:
    """The verdict on one figure (``attr`` of ``VariantSummary``), "not comparable" when the
    work or the loads differ or one was not really offered (``why_not_comparable``)."""
    ref, sub = getattr(reference, attr), getattr(subject, attr)
    why = why_not_comparable(reference, subject)
    return not_comparable(figure, ref, sub, why) if why else compare(figure, ref, sub)
