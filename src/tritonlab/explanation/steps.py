"""Which step of a pipeline binds: each called model's share of the server time, from Triton's
per-model statistics that every cell stores beside the measured model's (``CellResult.steps``).

A step's share is ``server.called_models.server_time_shares`` (the one definition ``perf`` and
the opening probe use too), the median over the repeats; the largest share binds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tritonlab.experiments.plan import LoadKey
from tritonlab.experiments.store import CellResult
from tritonlab.server.called_models import server_time_shares
from tritonlab.server.stats import ServerStatsDelta

# A queue "grows with load" when it is at least this many times longer, and this much longer,
# at the highest concurrency measured than at the lowest.
GROWTH_RATIO = 2.0
GROWTH_MIN_US = 100.0


@dataclass(frozen=True)
class StepTime:
    """One step's time in the server per pipeline request (medians over the repeats)."""

    step: str
    calls_per_request: float  # requests the step served per request of the measured model
    queue_us: float  # per request the step served
    compute_us: float  # per request the step served (input + infer + output)
    mean_batch: float
    share: float  # of the summed server time of every step, 0..1 (median over the repeats)


@dataclass(frozen=True)
class StepsAtLoad:
    """Every step of one configuration at one load, and the one that binds."""

    variant: str
    load_key: str
    concurrency: int | None
    repeats: int
    steps: tuple[StepTime, ...]
    # the measured model's own queue per request (median over the repeats): for a BLS model
    # the wait for one of its instances, which the steps' shares do not hold
    own_queue_us: float = 0.0

    @property
    def binding(self) -> StepTime:
        """The step with the largest share of the server time."""
        return max(self.steps, key=lambda s: s.share)

    @property
    def own_queue_binds(self) -> bool:
        """True when requests waited longer in the measured model's own queue than the binding
        step's queue and compute per pipeline request: its instances bind before any step's."""
        top = self.binding
        return self.own_queue_us > (top.queue_us + top.compute_us) * top.calls_per_request


def _step_time(name: str, cells: Sequence[CellResult]) -> StepTime:
    deltas: list[tuple[ServerStatsDelta, ServerStatsDelta]] = [
        (c.steps[name], c.server) for c in cells if name in c.steps and c.server is not None
    ]
    calls = [d.request_count / top.request_count if top.request_count else 0.0 for d, top in deltas]

    def median(values: Sequence[float]) -> float:
        return statistics.median(values) if values else 0.0

    return StepTime(
        step=name,
        calls_per_request=median(calls),
        queue_us=median([d.queue_us_per_request for d, _ in deltas]),
        compute_us=median([d.compute_us_per_request for d, _ in deltas]),
        mean_batch=median([d.mean_batch_size for d, _ in deltas]),
        share=median([server_time_shares(c.steps).get(name, 0.0) for c in cells if c.steps]),
    )


def steps_at_load(cells: Sequence[CellResult]) -> StepsAtLoad | None:
    """The steps of one configuration's cells at one load (None: the model calls nothing)."""
    names = list(dict.fromkeys(n for c in cells for n in c.steps))
    if not cells or not names:
        return None
    first = cells[0]
    return StepsAtLoad(
        first.variant.name,
        first.load_key,
        first.perf.settings.concurrency,
        len(cells),
        tuple(_step_time(n, cells) for n in names),
        statistics.median(
            [c.server.queue_us_per_request for c in cells if c.server is not None] or [0.0]
        ),
    )


def steps_table(cells: Sequence[CellResult]) -> list[StepsAtLoad]:
    """Every (configuration, load) with step statistics, in the cells' order."""
    groups: dict[tuple[str, str], list[CellResult]] = {}
    for cell in cells:
        if cell.steps:
            groups.setdefault((cell.variant.name, cell.load_key), []).append(cell)
    return [s for group in groups.values() if (s := steps_at_load(group)) is not None]


@dataclass(frozen=True)
class QueueGrowth:
    """One step's queue at the lowest and the highest concurrency a configuration was measured
    at, and whether it grows with load (``GROWTH_RATIO`` and ``GROWTH_MIN_US``)."""

    step: str
    low_concurrency: int
    high_concurrency: int
    low_queue_us: float
    high_queue_us: float
    client: str = ""  # "grpc, client batch 1": the one client both loads share
    low_repeats: int = 0
    high_repeats: int = 0

    @property
    def grows(self) -> bool:
        """At least ``GROWTH_RATIO`` times and ``GROWTH_MIN_US`` longer at the higher load."""
        return (
            self.high_queue_us >= GROWTH_RATIO * self.low_queue_us
            and self.high_queue_us - self.low_queue_us >= GROWTH_MIN_US
        )


def queue_growth(table: Sequence[StepsAtLoad], variant: str) -> list[QueueGrowth]:
    """Each step's queue from the lowest to the highest closed-loop concurrency ``variant`` was
    measured at, over one client (empty with fewer than two such loads): the client reaching
    the highest concurrency, and among those the one with the most repeats there (issue 36
    audit: an HTTP pair resting on one cell was quoted where gRPC had five)."""
    by_client: dict[tuple[str, int] | None, list[StepsAtLoad]] = {}
    for r in table:
        if r.variant == variant and r.concurrency is not None:
            by_client.setdefault(_client(r.load_key), []).append(r)
    curves = [
        sorted(rows, key=lambda r: r.concurrency or 0)
        for rows in by_client.values()
        if len({r.concurrency for r in rows}) >= 2
    ]
    if not curves:
        return []
    rows = max(curves, key=lambda c: (c[-1].concurrency or 0, c[-1].repeats, c[0].repeats))
    low, high = rows[0], rows[-1]
    by_step = {s.step: s for s in low.steps}
    client = _client(high.load_key)
    return [
        QueueGrowth(
            s.step,
            low.concurrency or 0,
            high.concurrency or 0,
            by_step[s.step].queue_us,
            s.queue_us,
            "" if client is None else f"{client[0]}, client batch {client[1]}",
            low.repeats,
            high.repeats,
        )
        for s in high.steps
        if s.step in by_step
    ]


def _client(load_key: str) -> tuple[str, int] | None:
    """The protocol and client batch of a load key (``grpc_b1_c8`` -> ``("grpc", 1)``)."""
    parsed = LoadKey.parse(load_key)
    return None if parsed is None else (parsed.protocol, parsed.batch_size)


def binding_step(table: Sequence[StepsAtLoad], variant: str) -> StepTime | None:
    """The step that binds ``variant`` at its highest measured load (None: no steps)."""
    rows = [r for r in table if r.variant == variant]
    return max(rows, key=lambda r: r.concurrency or 0).binding if rows else None
