"""A serving cost model fitted from the run's own measurements, and what it predicts.

One execution that carries ``r`` requests of ``k`` samples each costs

    T(r) = S_exec + S_req * r  +  F + P * r * k

- ``S_exec``, ``S_req``: the serving path (Triton, the Python backend's stub and IPC, the
  adapter, one response per request, an empty onnxruntime call), measured in the same server
  run on a null model with the model's inputs and outputs (``experiments/serving_path.py``)
  without batching and with batches of half and of all the requests in flight. The
  explanations cite the least-squares line through those points; predictions interpolate.
- ``F``, ``P``: the model's own fixed and per-sample cost, fitted on in-process runs at the
  backend's thread count (``operators.json``; a lower bound), less the null model's in-process
  time; each other engine has its own (``CostModel.for_engine``) behind the same serving path.

With ``N`` instances, ``M = min(N, cores - client cores)`` (with the CPU split, the server's
cores and no client cores: ``cpu_split.py``) and the client's round trip outside
the server ``L0``, a closed loop of ``c`` requests in flight gives:

- no batching: ``r = 1``, throughput ``min(M / (T(1) + G(1)), c / (T(1) + L0))``, where
  ``G(r)`` is the hand-off between a busy instance's executions that Triton's compute timers
  miss (cycle time minus compute on the null-model cells);
- dynamic batching with no delay: ``r = c / (N + 1)`` (at least 1, at most the batch target);
- a delay ``D`` longer than one execution with fewer than the batch target in flight (the
  queue-delay trap): every batch waits out ``D`` and takes all ``c``, throughput
  ``c / (D + T(c) + L0)``; at or above the target, batches of the target leave at once;
- queue per request from Little's law: ``c / X - T(r) - L0``.

Open-loop loads at rate ``λ``: the offered rate below capacity; queue ``ρ / (2 (1 - ρ)) · T``
for ``ρ = λ T / M`` (M/D/1), plus, with a delay, the wait for ``r = min(target, 1 + λ D)``.

The log prints predicted against measured at the input shapes the terms were timed at
(``fits``), and names the term that was off where the error is large.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Annotated

from pydantic import Field, PlainSerializer

from tritonlab.experiments.store import CellResult
from tritonlab.explanation.cost_prediction import Prediction
from tritonlab.explanation.fit_check import FitCheck, check_fit
from tritonlab.explanation.operators import ExecutionCostFit
from tritonlab.records import NOT_STORED, Record, later
from tritonlab.repository.variants import batch_target
from tritonlab.stats.aggregate import VariantSummary


@dataclass(frozen=True)
class ServingPathPoint:
    """One serving-path probe: requests per execution and what an execution cost."""

    requests_per_execution: float
    compute_us_per_execution: float
    client_overhead_us: float
    # One instance's cycle (requests per execution / requests per second) minus its compute:
    # the hand-off between executions that Triton's compute timers do not see.
    gap_us: float = 0.0

    @classmethod
    def from_cells(cls, cells: list[CellResult]) -> ServingPathPoint | None:
        """The median probe over ``cells`` (requests per execution, µs); None when no cell has
        server statistics and a throughput."""
        points = [p for c in cells if (p := _point(c)) is not None]
        if not points:
            return None
        return cls(*(statistics.median(p[i] for p in points) for i in range(4)))


def _point(cell: CellResult) -> tuple[float, float, float, float] | None:
    s, m = cell.server, cell.perf.measurement
    if s is None or m is None or not s.execution_count or not s.request_count:
        return None
    if not m.throughput_infer_per_s:
        return None
    requests = s.request_count / s.execution_count
    per_execution = s.compute_us_per_execution
    client = max(0.0, m.latency_avg_us - s.request_us_per_request)
    requests_per_s = m.throughput_infer_per_s / cell.perf.settings.batch_size
    cycle = requests / requests_per_s * 1e6 / max(1, cell.variant.instance_count)
    return requests, per_execution, client, max(0.0, cycle - per_execution)


# Stored forms: thread speedups as {threads: speedup}, engines as {engine: {F, P}}.
_AS_MAPPING = PlainSerializer(lambda pairs: {str(k): v for k, v in pairs})
_AS_ENGINES = PlainSerializer(
    lambda terms: {e: {"model_fixed_us": f, "model_per_sample_us": p} for e, f, p in terms}
)


@dataclass(frozen=True)
class CostModel(Record):
    """The fitted terms (µs) and the machine's cores (stored in ``cost_model.json`` without the
    points and shapes the fit checks read)."""

    DERIVED = ("gap_us_at_1",)

    serving_fixed_us: float
    serving_per_request_us: float
    model_fixed_us: float
    model_per_sample_us: float
    client_overhead_us: float
    cores: int
    serving_points: tuple[ServingPathPoint, ...] = ()
    # onnxruntime intra-op threads -> in-process speedup over one thread (not measured: 1).
    thread_speedup: Annotated[tuple[tuple[int, float], ...], _AS_MAPPING] = ()
    # Other engines (``ServingVariant.engine``) -> their own (F, P) in µs (stored as "engines").
    engine_terms: Annotated[
        tuple[tuple[str, float, float], ...], Field(alias="engines"), _AS_ENGINES
    ] = later(())
    # perf_analyzer ran on CPUs of its own (``cpu_split.py``): ``cores`` are the server's
    # alone, and the client's CPU takes none of them.
    client_apart: bool = later(False)
    # Whose F and P model_fixed_us / model_per_sample_us are.
    engine: Annotated[str, NOT_STORED] = "onnxruntime"
    # engine -> the precision it really computed in on this processor (OpenVINO's own report)
    precision_used: Annotated[tuple[tuple[str, str], ...], NOT_STORED] = ()
    # Input name -> the non-batch shape the terms were timed at (None: they hold for every row).
    input_shapes: Annotated[tuple[tuple[str, tuple[int, ...]], ...] | None, NOT_STORED] = None
    # The in-process points (batch, µs per execution) F and P, and each other engine's, fit.
    model_points: Annotated[tuple[tuple[int, float], ...], NOT_STORED] = ()
    engine_points: Annotated[tuple[tuple[str, tuple[tuple[int, float], ...]], ...], NOT_STORED] = ()

    @property
    def gap_us_at_1(self) -> float:
        """The serving gap (µs) at one request per execution."""
        return self.gap_us(1.0)

    @classmethod
    def fit(
        cls,
        serving_points: Iterable[ServingPathPoint],
        in_process_us_per_execution: dict[int, float],
        cores: int,
        thread_speedup: dict[int, float] | None = None,
        engines_us_per_execution: dict[str, dict[int, float]] | None = None,
        precision_used: dict[str, str] | None = None,
    ) -> CostModel | None:
        """Fit the terms; None without a serving-path measurement or an in-process fit. The serving
        terms are the least-squares line (what the explanations cite); predictions interpolate the
        points themselves (``serving_us``): the serving path is not linear on every machine."""
        points = sorted(serving_points, key=lambda p: p.requests_per_execution)
        model = ExecutionCostFit.fit(in_process_us_per_execution)
        if not points or model is None:
            return None
        xs = [p.requests_per_execution for p in points]
        ys = [p.compute_us_per_execution for p in points]
        if xs[-1] - xs[0] > 0.5:
            mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
            slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
                (x - mean_x) ** 2 for x in xs
            )
            per_request = max(0.0, slope)
            fixed = max(0.0, mean_y - per_request * mean_x)
        else:
            per_request, fixed = 0.0, ys[0]
        return cls(
            serving_fixed_us=fixed,
            serving_per_request_us=per_request,
            model_fixed_us=model.fixed_us,
            model_per_sample_us=model.per_sample_us,
            client_overhead_us=points[0].client_overhead_us,
            cores=cores,
            serving_points=tuple(points),
            thread_speedup=tuple(sorted((thread_speedup or {}).items())),
            engine_terms=tuple(
                (engine, fit.fixed_us, fit.per_sample_us)
                for engine, timings in sorted((engines_us_per_execution or {}).items())
                if (fit := ExecutionCostFit.fit(timings)) is not None
            ),
            precision_used=tuple(sorted((precision_used or {}).items())),
            model_points=tuple(sorted(in_process_us_per_execution.items())),
            engine_points=tuple(
                (engine, tuple(sorted(timings.items())))
                for engine, timings in sorted((engines_us_per_execution or {}).items())
            ),
        )

    def fits(self, s: VariantSummary) -> bool:
        """True when ``s`` sent every dynamic input at the shape the terms were timed at: another
        sequence length does other work per inference, so the model says nothing of it."""
        if self.input_shapes is None:
            return True
        fitted = dict(self.input_shapes)
        return all(fitted.get(k) == tuple(v) for k, v in s.settings.input_shapes.items())

    def computes_in(self, engine: str) -> str:
        """The precision ``engine`` ("openvino bf16") really computed in here."""
        asked = engine.split(" ")[-1] if " " in engine else "f32"
        return dict(self.precision_used).get(engine, asked)

    def for_engine(self, engine: str) -> CostModel:
        """This model with ``engine``'s own F and P (itself for onnxruntime or an engine whose
        in-process runs were not timed: then its predictions say onnxruntime's terms)."""
        for name, fixed, per_sample in self.engine_terms:
            if name == engine:
                # threads speedups were measured on onnxruntime's ceilings only
                return replace(
                    self,
                    model_fixed_us=fixed,
                    model_per_sample_us=per_sample,
                    engine=engine,
                    thread_speedup=(),
                    model_points=dict(self.engine_points).get(engine, ()),
                )
        return self

    def fit_check(self) -> FitCheck | None:
        """How far F + P x batch misses the in-process points it was fitted to; None for a
        model built without them (then nothing says the line is off)."""
        return check_fit(self.model_fixed_us, self.model_per_sample_us, dict(self.model_points))

    def serving_us(self, requests: float) -> float:
        """The serving path for one execution of ``requests``: between the measured points,
        linear interpolation; outside them, the nearest segment (or the fitted line)."""
        pts = [(p.requests_per_execution, p.compute_us_per_execution) for p in self.serving_points]
        if len(pts) < 2 or pts[-1][0] - pts[0][0] <= 0.5:
            return self.serving_fixed_us + self.serving_per_request_us * requests
        segments = list(itertools.pairwise(pts))
        # the segment that holds ``requests``, or the nearest end segment to extrapolate from
        (x0, y0), (x1, y1) = next((seg for seg in segments if requests <= seg[1][0]), segments[-1])
        if x1 - x0 <= 1e-9:
            return y1
        return max(0.0, y0 + (y1 - y0) * (requests - x0) / (x1 - x0))

    def gap_us(self, requests: float) -> float:
        """The hand-off between one execution and the next in a busy instance: measured on every
        probe but the one taking all the requests in flight (its gap holds the clients' round
        trip too), interpolated in the batch size and held beyond the last one."""
        pts = [(p.requests_per_execution, p.gap_us) for p in self.serving_points]
        if len(pts) >= 3:
            pts = pts[:-1]
        if not pts:
            return 0.0
        if requests <= pts[0][0] or len(pts) == 1:
            return pts[0][1]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            if requests <= x1 and x1 - x0 > 1e-9:
                return y0 + (y1 - y0) * (requests - x0) / (x1 - x0)
        return pts[-1][1]

    def speedup(self, threads: int | None) -> float:
        """In-process speedup of one execution on ``threads`` intra-op threads (1: none)."""
        return dict(self.thread_speedup).get(threads or 0, 1.0) if threads != 1 else 1.0

    def served_speedup(self, threads: int | None) -> float:
        """The in-process speedup the server's cores allow: threads past ``cores`` (the
        server's own under the CPU split) share them and add none (issue 36 audit: a 1.81x
        speedup timed on 2 cores was predicted for a server on 1)."""
        if threads and threads > self.cores:
            return self.speedup(self.cores)
        return self.speedup(threads)

    def model_us(self, samples: float, threads: int | None = 1) -> float:
        """The model's own cost (µs) of one execution of ``samples`` on ``threads`` threads."""
        return (self.model_fixed_us + self.model_per_sample_us * samples) / self.served_speedup(
            threads
        )

    def execution_us(
        self, requests: float, samples_per_request: int = 1, threads: int | None = 1
    ) -> float:
        """One execution's cost (µs): the serving path for ``requests`` plus the model's samples."""
        return self.serving_us(requests) + self.model_us(requests * samples_per_request, threads)

    def serving_share(self, requests: float, samples_per_request: int = 1) -> float:
        """The serving path's share of one execution's cost."""
        total = self.execution_us(requests, samples_per_request)
        return self.serving_us(requests) / total if total else 0.0

    def predict(self, s: VariantSummary) -> Prediction:
        """Predicted batch, execution cost, throughput and queue for one measured summary."""
        if s.variant.engine != self.engine and self.engine == "onnxruntime":
            engine_model = self.for_engine(s.variant.engine)
            if engine_model is not self:
                return engine_model.predict(s)
        v, st = s.variant, s.settings
        k = st.batch_size
        client_cores = 0.0 if self.client_apart else (s.perf_analyzer_cores.median or 0.0)
        # an instance whose threads run it faster occupies that many cores
        per_instance = (
            max(1, v.intra_op_threads or 1) if self.speedup(v.intra_op_threads) > 1 else 1
        )
        parallel = max(
            0.25, min(float(v.instance_count), (self.cores - client_cores) / per_instance)
        )
        samples, _ = batch_target(v)
        target = max(1.0, samples / max(1, k))  # the batch the batcher waits for, in requests
        if st.request_rate_per_s is not None:
            regime, requests, throughput, queue = self._open_loop(s, parallel, target)
        else:
            regime, requests, throughput, queue = self._closed_loop(s, parallel, target)
        measured_requests = s.mean_batch.median / k if s.mean_batch.median else None
        return Prediction(
            variant=v.name,
            description=v.description,
            load_key=s.load_key,
            regime=regime,
            requests_per_execution=requests,
            execution_us=self.execution_us(requests, k, v.intra_op_threads),
            throughput_infer_per_s=throughput * k,
            queue_us=queue,
            measured_requests_per_execution=measured_requests,
            measured_execution_us=s.execution_us.median,
            measured_throughput_infer_per_s=s.throughput.median,
            measured_queue_us=s.queue_us.median,
            instances=v.instance_count,
            cache=v.response_cache,
            execution_at_measured_us=self.execution_us(measured_requests, k, v.intra_op_threads)
            if measured_requests
            else None,
            in_flight_requests=float(st.concurrency)
            if st.request_rate_per_s is None and st.concurrency
            else None,
            rate_not_kept=s.load_generator_fell_behind,
        )

    def _closed_loop(
        self, s: VariantSummary, parallel: float, target: float
    ) -> tuple[str, float, float, float]:
        v, k = s.variant, s.settings.batch_size
        c = float(s.settings.concurrency or 1)
        l0 = self.client_overhead_us
        if not v.dynamic_batching:
            regime, r = "no batching", 1.0
        else:
            r = min(max(1.0, c / (v.instance_count + 1)), target, c)
            delay = float(v.max_queue_delay_us)
            if delay > 0 and c >= target:
                regime, r = "batches of the target leave at once", target
            elif delay > 0 and delay >= self.execution_us(r, k, v.intra_op_threads):
                t_full = self.execution_us(c, k, v.intra_op_threads)
                x = c / (delay + t_full + l0)
                queue = max(0.0, c / x - t_full - l0)
                return "queue-delay trap: every batch waits out the delay", c, x * 1e6, queue
            else:
                regime = "requests already waiting form the batch"
        t = self.execution_us(r, k, v.intra_op_threads)
        x = min(parallel * r / (t + self.gap_us(r)), c / (t + l0))
        return regime, r, x * 1e6, max(0.0, c / x - t - l0)

    def _open_loop(
        self, s: VariantSummary, parallel: float, target: float
    ) -> tuple[str, float, float, float | None]:
        v, k = s.variant, s.settings.batch_size
        rate = float(s.settings.request_rate_per_s or 0.0) / 1e6  # requests per µs
        delay = float(v.max_queue_delay_us) if v.dynamic_batching else 0.0
        r = min(target, 1.0 + rate * delay) if v.dynamic_batching else 1.0
        t = self.execution_us(r, k, v.intra_op_threads)
        capacity = parallel * r / (t + self.gap_us(r))
        if rate >= capacity:
            return "overloaded: offered rate above capacity", r, capacity * 1e6 * 1.0, None
        rho = rate * t / (parallel * r)
        # Kingman's wait with fixed service times: Poisson arrivals wait rho / (2 (1 - rho)) t,
        # evenly spaced ones none (the squared CV of the gaps scales it)
        wait = s.settings.arrivals.interarrival_cv2 * rho / (2.0 * (1.0 - rho)) * t
        if delay > 0 and r > 1:
            fill = min(delay, (r - 1) / rate)
            wait += (fill + (r - 1) * fill / 2) / r
        return "open loop below capacity", r, rate * 1e6, wait
