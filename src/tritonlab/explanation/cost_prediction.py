"""What the serving cost model predicts for one configuration at one load, beside what was
measured, and which of its terms missed (``cost_model.CostModel.predict`` makes it; the log's
cost-model section and the rules read it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from tritonlab.records import NOT_STORED, Record, later

MODEL_FAILS_PCT = 25.0  # |predicted / measured - 1| above this: the log says the model failed


# A queue prediction off by less than this (µs) is not named a miss however large its share:
# a queue of tens of µs is the timer's and the scheduler's, not the model's
QUEUE_MISS_FLOOR_US = 100.0


def _misses(error_pct: float) -> bool:
    """A predicted/measured - 1 error past ``MODEL_FAILS_PCT`` either way: the prediction over
    the measurement by more than it, or the measurement over the prediction by more than it."""
    ratio = 1.0 + error_pct / 100.0
    limit = 1.0 + MODEL_FAILS_PCT / 100.0
    # a prediction of nothing against something measured misses by any measure (issue 36
    # audit: a queue predicted 0 µs and measured 155 µs went unlisted)
    return ratio > limit or ratio <= 0 or 1.0 / ratio > limit


def _error_pct(predicted: float, measured: float | None) -> float | None:
    return None if not measured else 100.0 * (predicted / measured - 1.0)


@dataclass(frozen=True)
class Prediction(Record):
    """The cost model's figures for one configuration at one load beside the measured ones
    (stored in ``cost_model.json`` with the throughput error and the terms that missed)."""

    DERIVED = ("throughput_error_pct", "failure", "term_misses")

    variant: str
    description: Annotated[str, NOT_STORED]
    load_key: str
    regime: str
    requests_per_execution: float
    execution_us: float
    throughput_infer_per_s: float
    queue_us: float | None
    measured_requests_per_execution: float | None
    measured_execution_us: float | None
    measured_throughput_infer_per_s: float | None
    measured_queue_us: float | None
    instances: int = later(1)  # the configuration's instance count (what may contend)
    cache: bool = later(False)  # the response cache on: lookups and stores the model not prices
    # closed loop: the requests in flight (the concurrency); None under an offered rate
    in_flight_requests: float | None = later(None)
    # the model's execution cost at the measured batch (None without one)
    execution_at_measured_us: float | None = later(None)
    # perf_analyzer did not keep up the offered rate in a repeat: the measured figures are of
    # a lighter load than the one predicted, so no miss is counted against the model
    rate_not_kept: bool = later(False)

    @property
    def throughput_error_pct(self) -> float | None:
        """Predicted over measured throughput, minus 1, in percent; None without a measurement."""
        return _error_pct(self.throughput_infer_per_s, self.measured_throughput_infer_per_s)

    @property
    def execution_error_pct(self) -> float | None:
        """The same for the execution cost."""
        return _error_pct(self.execution_us, self.measured_execution_us)

    @property
    def batch_error_pct(self) -> float | None:
        """The same for the requests per execution."""
        return _error_pct(self.requests_per_execution, self.measured_requests_per_execution)

    @property
    def fails(self) -> bool:
        """True when the throughput prediction missed by more than ``MODEL_FAILS_PCT``."""
        err = self.throughput_error_pct
        return err is not None and abs(err) > MODEL_FAILS_PCT

    @property
    def holds_every_request(self) -> bool:
        """True in a closed loop whose every batch held (within 5%) all the requests in
        flight."""
        measured, in_flight = self.measured_requests_per_execution, self.in_flight_requests
        return measured is not None and in_flight is not None and measured >= 0.95 * in_flight

    @property
    def one_batch_at_a_time(self) -> bool:
        """True where several instances served a closed loop whose every batch held all the
        requests in flight: one execution at a time, whatever the instance count."""
        return self.instances > 1 and self.holds_every_request

    def _held_text(self) -> str:
        """'the one request' or 'all 8 requests': what every batch held (closed loop)."""
        n = self.in_flight_requests or 1.0
        return "the one request" if n == 1 else f"all {n:.0f} requests"

    def term_misses(self) -> list[str]:
        """The predicted terms (batch, execution cost, queue) that missed by more than 25% either
        way
        (484 µs measured against 365 predicted is 33% over, though 365 is 25% under 484: issue
        36 audit)."""
        reasons = []
        batch, execution = self.batch_error_pct, self.execution_error_pct
        if batch is not None and _misses(batch):
            reasons.append(
                f"batches formed differently ({self.measured_requests_per_execution:.1f} "
                f"requests per execution measured, {self.requests_per_execution:.1f} predicted)"
            )
        at_measured = self.execution_at_measured_us
        # priced at the batch formed wherever it differs from the predicted one (issue 36
        # audits: 768 against 592 µs at 4.98 requests, 4.0 predicted, where the model gives
        # 659 µs at 4.98), the batch's miss or not
        batch_moved = batch is not None and abs(batch) > 5.0
        if execution is not None and _misses(execution) and batch_moved and at_measured:
            # the execution was priced at the predicted batch: at the batch formed, the model's
            # own cost is the reference, and only what is left past it asks for a cause (issue
            # 36 audit: 976 against 295 µs, where the model gives 718 µs at the 6.9 formed)
            left = _error_pct(at_measured, self.measured_execution_us)
            if left is None or not _misses(left):
                reasons.append(
                    f"an execution cost {self.measured_execution_us:,.0f} µs, not "
                    f"{self.execution_us:,.0f} µs, from the batch it formed: at the measured "
                    f"{self.measured_requests_per_execution:.1f} requests the model gives "
                    f"{at_measured:,.0f} µs, within {MODEL_FAILS_PCT:g}%"
                )
                execution = None
            else:
                execution = left
        if execution is not None and _misses(execution):
            contending = (
                "instances contending for the cores"
                if self.instances > 1
                else "the one instance sharing its core with the server's other work"
            )
            if self.cache:  # the model has no term for the cache's lookups and stores
                contending = (
                    "the response cache's lookups and stores, which the model does not price; "
                    f"or {contending}"
                )
            # candidates, not findings: no figure of the run shows which (issue 36 audit: "the
            # one instance sharing its core" read as a cause where the server used 0.3 of 2)
            why = (
                f"not shown by these figures; it may be {contending}, or the model running "
                "colder than in-process"
                if execution < 0
                else "cheaper than on the serving-path probes, which ran at another load or "
                "protocol"
            )
            if execution < 0 and self.holds_every_request and not self.cache:
                held = self._held_text()
                # every batch held every request in flight: no other request's work ran beside
                # one instance, and several never ran at once (issue 36 audits: core sharing
                # offered at one request in flight; contention where batches of 8.0 held all 8
                # requests of concurrency 8)
                why = (
                    f"not shown by these figures; with every batch holding {held} in flight no "
                    "other request's work ran beside it; it may be the model running colder "
                    "than in-process"
                )
            if execution < 0 and self.one_batch_at_a_time and not self.cache:
                why = (
                    f"not instances contending: every batch took {held} in flight, so no two "
                    "executions ran at once; it may be the model running colder than "
                    "in-process, the instances taking turns"
                )
            priced = (
                f"at the measured {self.measured_requests_per_execution:.1f} requests the "
                f"model gives {at_measured:,.0f} µs, still off by more than {MODEL_FAILS_PCT:g}%: "
                if batch_moved and at_measured
                else ""
            )
            reasons.append(
                f"an execution cost {self.measured_execution_us:,.0f} µs, not "
                f"{self.execution_us:,.0f} µs ({priced}{why})"
            )
        queue, measured = self.queue_us, self.measured_queue_us
        error = None if queue is None else _error_pct(queue, measured)
        if (
            queue is not None
            and measured is not None
            and error is not None
            and _misses(error)
            and abs(queue - measured) > QUEUE_MISS_FLOOR_US
        ):  # a 2x queue miss went unlisted (issue 36 audit)
            reasons.append(self.queue_miss_text())
        return reasons

    def queue_miss_text(self) -> str:
        """'requests queued 157 µs, not 0 µs'."""
        measured, predicted = self.measured_queue_us or 0.0, self.queue_us or 0.0
        return f"requests queued {measured:,.0f} µs, not {predicted:,.0f} µs"

    def failure(self) -> str | None:
        """Which term was off when the throughput prediction missed by more than 25%. In a
        closed loop the predicted queue follows from the predicted throughput (Little's law),
        so a queue miss alone is not why the throughput missed (issue 36 audit: a 2-thread
        row's miss named only its queue, where execution and batch were within 25%)."""
        if not self.fails:
            return None
        misses = self.term_misses()
        queue = self.queue_miss_text()
        causes = [m for m in misses if m != queue]
        if causes or self.in_flight_requests is None:
            return "; ".join(misses) or self._rest_of_miss()
        return self._rest_of_miss() + (
            f"; {queue}, which in a closed loop follows from the throughput" if misses else ""
        )

    def _rest_of_miss(self) -> str:
        """The miss where execution cost and batch size were both within the limit."""
        if self.in_flight_requests == 1:
            # one request in flight: no parallelism to miss (issue 36 audit)
            return (
                f"execution cost and batch size were each within {MODEL_FAILS_PCT:g}% of the "
                "prediction either way, and with one request in flight nothing ran in "
                "parallel, so the rest of the miss is in the client's round trip outside the "
                "server, or in those terms together"
            )
        return (
            f"execution cost and batch size were each within {MODEL_FAILS_PCT:g}% of the "
            "prediction either way"
            + (
                f" (an execution {self.measured_execution_us:,.0f} µs against "
                f"{self.execution_us:,.0f})"
                if self.measured_execution_us is not None
                else ""
            )
            + ", so the rest of the miss is in the parallelism or the client's round trip (the "
            "CPU the server could really use), or in those terms together"
        )
