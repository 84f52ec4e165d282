"""Per-replica capacity at a p99 budget, with its interval, and the replicas a target load needs.

The one place that says what one server of a configuration carries at a p99 budget:
``tritonlab capacity`` prints it, ``tritonlab deploy`` sizes the HPA's minimum replicas and
writes its annotations from it. The rules (``docs/scaling.md`` states them for users):

- A figure's interval: ``verdicts.centre_interval`` on the logs of its repeats (``Interval``);
  one repeat has none.
- The p99 holds the budget only by the UPPER end of its 95% interval (``point_capacity``).
- Capacity: the highest median throughput among the points that hold the budget; replicas for
  a target: ``ceil(target / median)``, with the range from the capacity's interval, of which
  a cautious user provisions the upper end (``Capacity.replicas``).
- Loads: whatever kind the run measured (``LOAD_KINDS``); a replayed trace is used alone where
  a configuration has one, and open-loop points perf_analyzer could not keep up are excluded.
- Capacity holds for a replica on the hardware it was measured on only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tritonlab.errors import ConfigError
from tritonlab.records import Record, Worded
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.robust import MIN_BLOCKS
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import CONFIDENCE, centre_interval

INTERVAL_WORDS = (
    f"{100 * CONFIDENCE:g}% interval of the centre of the log repeats (Hodges-Lehmann with the "
    f"signed-rank interval from {MIN_BLOCKS} repeats, Student-t below)"
)
P99_RULE = (
    f"p99 holds the budget by the upper end of its {100 * CONFIDENCE:g}% interval, not by its "
    "median alone"
)
SAME_HARDWARE = (
    "measured on {machine}: it holds for a replica on the same hardware only; measure the "
    "service with `tritonlab perf --url` once it runs elsewhere"
)


@dataclass(frozen=True)
class LoadKind:
    """One kind of load point: how to recognise it and how the capacity names it."""

    name: str
    words: str  # how a capacity under this load is described ("under the trace")
    alone: bool  # used alone where a configuration has it (a trace is the traffic to size for)
    recognises: Callable[[VariantSummary], bool]


# First match wins; a new kind of load point is one entry here.
LOAD_KINDS: tuple[LoadKind, ...] = (
    LoadKind("trace", "under the trace", True, lambda s: s.settings.request_intervals is not None),
    LoadKind(
        "rate", "under Poisson arrivals", False, lambda s: s.settings.request_rate_per_s is not None
    ),
    LoadKind("concurrency", "at a closed-loop concurrency", False, lambda s: True),
)


def check_sizing(target_infer_per_s: float | None, budget_us: float | None) -> None:
    """``ConfigError`` for a target load or p99 budget that is not positive (None: not given)."""
    if target_infer_per_s is not None and not target_infer_per_s > 0:
        raise ConfigError(f"--target-load must be positive (infer/s), got {target_infer_per_s:g}")
    if budget_us is not None and not budget_us > 0:
        raise ConfigError(f"--p99-budget-ms must be positive, got {budget_us / 1000:g}")


def load_kind(summary: VariantSummary) -> LoadKind:
    """The kind of load ``summary`` was measured under (``LOAD_KINDS``, first match)."""
    return next(k for k in LOAD_KINDS if k.recognises(summary))


class P99Holds(Worded):
    """Whether a load point's p99 holds the budget, and by which rule."""

    BY_INTERVAL = "by the upper end of its interval"
    MEDIAN_ONLY = "by its median only"
    ONE_REPEAT = "measured once: no interval"
    OVER = "over the budget"
    NO_BUDGET = "no budget asked"


@dataclass(frozen=True)
class Interval:
    """A figure's median over the repeats and the 95% interval of its centre (None: one repeat)."""

    median: float
    low: float | None
    high: float | None
    repeats: int

    @property
    def bounds(self) -> tuple[float, float] | None:
        return None if self.low is None or self.high is None else (self.low, self.high)

    @classmethod
    def of(cls, summary: Summary) -> Interval | None:
        """The interval of ``summary``'s positive values (``verdicts.centre_interval`` on their
        logs); None without a median."""
        values = [v for v in summary.values if v > 0]
        if not values or summary.median is None:
            return None
        centre = centre_interval([math.log(v) for v in values], p_value=False)
        if centre is None:
            return cls(summary.median, None, None, len(values))
        return cls(summary.median, math.exp(centre.low), math.exp(centre.high), len(values))


@dataclass(frozen=True)
class PointCapacity(Record):
    """One load point: throughput and p99 with their intervals, and whether the p99 holds."""

    variant: str
    description: str
    config_key: str
    load_key: str
    load_kind: str
    load_words: str
    repeats: int
    throughput_infer_per_s: float
    throughput_ci95_infer_per_s: tuple[float, float] | None
    latency_p99_us: float
    latency_p99_ci95_us: tuple[float, float] | None
    queue_us_per_request: float | None
    p99_holds: P99Holds


def point_capacity(summary: VariantSummary, budget_us: float | None) -> PointCapacity | None:
    """``summary`` judged against ``budget_us`` (None: no budget); None without both medians."""
    tput, p99 = Interval.of(summary.throughput), Interval.of(summary.latency_p99)
    if tput is None or p99 is None:
        return None
    if budget_us is None:
        holds = P99Holds.NO_BUDGET
    elif p99.median > budget_us:
        holds = P99Holds.OVER
    elif p99.high is None:
        holds = P99Holds.ONE_REPEAT
    else:
        holds = P99Holds.BY_INTERVAL if p99.high <= budget_us else P99Holds.MEDIAN_ONLY
    kind = load_kind(summary)
    return PointCapacity(
        variant=summary.variant.name,
        description=summary.variant.description,
        config_key=str(ConfigKey.of(summary)),
        load_key=summary.load_key,
        load_kind=kind.name,
        load_words=kind.words,
        repeats=tput.repeats,
        throughput_infer_per_s=tput.median,
        throughput_ci95_infer_per_s=tput.bounds,
        latency_p99_us=p99.median,
        latency_p99_ci95_us=p99.bounds,
        queue_us_per_request=summary.queue_us.median,
        p99_holds=holds,
    )


@dataclass(frozen=True)
class Replicas(Record):
    """Replicas for a target load from a capacity: at its median, and the interval's range."""

    target_load_infer_per_s: float
    at_median: int
    fewest: int  # ceil(target / the capacity interval's high end)
    cautious: int  # ceil(target / the capacity interval's low end): what to provision

    @property
    def words(self) -> str:
        """e.g. '3 replicas at the median capacity (range 3–4); provision 4: ...'."""
        spread = f" (range {self.fewest}–{self.cautious})" if self.fewest != self.cautious else ""
        return (
            f"{self.at_median} replica{'s' if self.at_median != 1 else ''} at the median "
            f"capacity{spread}; provision {self.cautious}, the upper end: the capacity may be "
            "as low as its interval's low end, and fewer replicas would each be pushed past the "
            "load at which the p99 was measured to hold"
        )


@dataclass(frozen=True)
class Capacity(Record):
    """What one replica of a configuration (at one client: protocol, batch, length) carries at
    a p99 budget: the chosen point, every point judged, and the rule."""

    config_key: str
    variant: str
    description: str
    latency_budget_p99_us: float | None
    point: PointCapacity | None  # None: no load point holds the budget
    points: tuple[PointCapacity, ...]
    load_words: str  # the kind of load the capacity stands on
    rule: str = P99_RULE
    # the kinds of load left out because perf_analyzer did not keep to them (their words)
    dropped: tuple[str, ...] = ()
    # the chosen point is the highest load measured: the replica may carry more
    at_least: bool = False

    @property
    def throughput_infer_per_s(self) -> float | None:
        """The capacity (infer/s per replica, median); None when nothing holds the budget."""
        return self.point.throughput_infer_per_s if self.point else None

    def replicas(self, target_infer_per_s: float) -> Replicas:
        """Replicas for ``target_infer_per_s``; ``ConfigError`` without a capacity."""
        check_sizing(target_infer_per_s, None)
        if self.point is None:
            raise ConfigError(self.why_none())
        median = self.point.throughput_infer_per_s
        low, high = self.point.throughput_ci95_infer_per_s or (median, median)
        # replicas at the median capacity, at its interval's high end and at its low end
        needs = (max(1, math.ceil(target_infer_per_s / x)) for x in (median, high, max(low, 1e-9)))
        return Replicas(target_infer_per_s, *needs)

    def why_none(self) -> str:
        """One line: why no load point holds the budget, the lowest p99 measured, what to do."""
        budget_ms = (self.latency_budget_p99_us or 0) / 1000
        lowest = min(self.points, key=lambda p: p.latency_p99_us, default=None)
        if lowest is None:
            return f"{self.config_key} has no load point with a throughput and a p99"
        upper = (lowest.latency_p99_ci95_us or (0.0, lowest.latency_p99_us))[1] / 1000
        if lowest.p99_holds == P99Holds.ONE_REPEAT:
            change = "measure more repeats (one repeat has no interval to show the p99 holds)"
        elif lowest.p99_holds == P99Holds.MEDIAN_ONLY:
            change = (
                "measure more repeats to narrow the interval, or raise --p99-budget-ms to "
                f"{upper:,.2f} (the upper end of its interval)"
            )
        else:
            change = (
                f"raise --p99-budget-ms to {upper:,.2f} (the upper end of its interval), or "
                "measure lower loads (a lower concurrency or request rate)"
            )
        return (
            f"no load point of {self.config_key} holds the p99 budget of {budget_ms:g} ms by "
            f"the upper end of its 95% interval: the lowest p99 measured is "
            f"{lowest.latency_p99_us / 1000:,.2f} ms (median of {lowest.repeats}) at "
            f"{lowest.load_key}; {change}"
        )


def capacity_of(summaries: Sequence[VariantSummary], budget_us: float | None) -> Capacity:
    """The capacity of one configuration key from its load points (``summaries``, all of one
    ``ConfigKey``) at ``budget_us`` (µs; None: the best point as measured, no budget)."""
    if not summaries:
        raise ConfigError("no load points to compute a capacity from")
    keys = {ConfigKey.of(s) for s in summaries}
    if len(keys) > 1:
        raise ValueError(f"capacity_of takes one configuration key, got {sorted(map(str, keys))}")
    check_sizing(None, budget_us)
    usable = [s for s in summaries if not s.load_generator_fell_behind]
    present = {load_kind(s).name for s in usable}
    dropped = sorted({load_kind(s).words for s in summaries if load_kind(s).name not in present})
    alone = next((k for k in LOAD_KINDS if k.alone and k.name in present), None)
    chosen = [s for s in usable if load_kind(s) is alone] if alone else usable
    points = tuple(p for s in chosen if (p := point_capacity(s, budget_us)) is not None)
    # counted: the p99 holds by its interval, or no budget was asked
    counted = [p for p in points if p.p99_holds in (P99Holds.BY_INTERVAL, P99Holds.NO_BUDGET)]
    best = max(counted, key=lambda p: p.throughput_infer_per_s, default=None)
    first = summaries[0]
    # the highest load of the best point's own kind (concurrencies and rates do not compare)
    same_kind = [s for s in chosen if best is not None and load_kind(s).name == best.load_kind]
    highest = max(same_kind, key=_offered, default=None)
    return Capacity(
        config_key=str(next(iter(keys))),
        variant=first.variant.name,
        description=first.variant.description,
        latency_budget_p99_us=budget_us,
        point=best,
        points=points,
        load_words=best.load_words if best else " or ".join(sorted({p.load_words for p in points})),
        dropped=tuple(dropped),
        at_least=best is not None
        and highest is not None
        and best.load_key == highest.load_key
        and _offered(highest) > 0,
    )


def _offered(summary: VariantSummary) -> float:
    """The load a closed- or open-loop point offered (0 for a trace: none of it is higher)."""
    s = summary.settings
    if s.request_intervals is not None:
        return 0.0
    return float(s.request_rate_per_s or s.concurrency or 0)


def capacities(summaries: Sequence[VariantSummary], budget_us: float | None) -> list[Capacity]:
    """One capacity per configuration key of ``summaries``, in their order."""
    groups: dict[ConfigKey, list[VariantSummary]] = {}
    for s in summaries:
        groups.setdefault(ConfigKey.of(s), []).append(s)
    return [capacity_of(group, budget_us) for group in groups.values()]
