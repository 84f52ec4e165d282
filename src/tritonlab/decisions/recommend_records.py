"""The records of a sweep's recommendations: operating points, picks, tie-breaks, saturation
steps and the recommendations as a whole, with the thresholds that shape them (data only:
the policy is ``recommend.py``, the words ``report.recommend_text``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import PlainSerializer

from tritonlab.experiments.plan import sequence_length_of
from tritonlab.perf.settings import ARRIVALS, Arrivals, Distribution
from tritonlab.records import Record, later
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.run_trust import RunTrust
from tritonlab.stats.verdicts import Verdict, VerdictRecord

BASELINE = "baseline"  # ExperimentPlan.validate makes the first variant the baseline
KNEE_GAIN_PER_DOUBLING_PCT = 10.0  # less than this per doubling of concurrency is "flat"
RATE_KEPT_UP_SHARE = 0.9  # an open-loop rate counts only if >= 90% of it was served
SATURATION_QUEUE_GROWTH_PCT = 50.0  # queue time up by at least this much ...
TIE_MARGIN_PCT = 10.0  # a tied point is also within 10% of the best by median


@dataclass(frozen=True)
class OperatingPoint(Record):
    """One VariantSummary seen as a point on the throughput/p99 plane; stored (in
    ``recommendations.json``) with the highest repeat's p99 filled in where it is the median."""

    DERIVED = (("latency_p99_max_us", "worst_p99_us"),)

    variant: str
    description: str
    load_key: str
    protocol: str
    batch_size: int
    concurrency: int | None
    request_rate_per_s: float | None
    throughput_infer_per_s: float  # median over repeats
    latency_p99_us: float  # median over repeats
    # perf_analyzer warned it could not keep up the open-loop rate in some repeat
    load_generator_fell_behind: bool = False
    latency_p99_max_us: float | None = None  # the highest repeat's p99 (None: the median)
    instance_count: int = 1
    repeats: int = 1
    # The share of requests the response cache answered (None: the cache was off)
    cache_hit_share: float | None = later()
    # How the open-loop rate's requests were spaced
    request_distribution: Distribution = later("poisson")
    # The lowest repeat's throughput (None: one repeat, or a file from before it was stored)
    throughput_low_infer_per_s: float | None = later()
    # The blocks the two medians are over where fewer than ``repeats``: the blocks every point
    # of the sweep has (extra rounds measured some points more; ranking medians over different
    # blocks let those rounds decide: issue 36 audit). None: the medians are over every repeat.
    ranked_blocks: int | None = later()
    # repeats in which perf_analyzer warned (latency not stabilising, requests delayed): a
    # quote of the point's figures carries it (issue 36 audit)
    warned_repeats: int = later(0)
    # the median cores the server and perf_analyzer used at the point (issue 36 audit: a pick
    # at perf_analyzer's core limit was quoted without the load-generator doubt its row has)
    server_cores: float | None = later()
    perf_analyzer_cores: float | None = later()

    @property
    def arrivals(self) -> Arrivals:
        """How the open-loop rate's requests were spaced (the word the reports use)."""
        return ARRIVALS[self.request_distribution]

    @property
    def medians_words(self) -> str:
        """Which repeats the point's medians are over, e.g. "the median of 10 repeats" or "the
        median over the 10 blocks every point has, out of its 28 repeats"."""
        if self.ranked_blocks is None:
            return f"the median of {self.repeats} repeat{'s' if self.repeats != 1 else ''}"
        return (
            f"the median over the {self.ranked_blocks} blocks every point has, out of its "
            f"{self.repeats} repeats"
        )

    @property
    def worst_p99_us(self) -> float:
        """The highest p99 of the repeats (µs): what must be within a budget."""
        return self.latency_p99_us if self.latency_p99_max_us is None else self.latency_p99_max_us

    @property
    def curve_key(self) -> ConfigKey:
        """The configuration at its sequence length, without the load level."""
        return ConfigKey(
            self.variant, self.protocol, self.batch_size, sequence_length_of(self.load_key)
        )

    @property
    def load_label(self) -> str:
        """The load in words: protocol, client batch, then the rate (req/s) or concurrency."""
        if self.request_rate_per_s is not None:
            return f"{self.protocol}, batch {self.batch_size}, {self.request_rate_per_s:g} req/s"
        return f"{self.protocol}, batch {self.batch_size}, concurrency {self.concurrency}"

    def within(self, budget_us: float) -> bool:
        """True when every repeat's p99 is within ``budget_us`` (µs)."""
        return self.worst_p99_us <= budget_us


def point_rounds(s: VariantSummary) -> frozenset[int | str]:
    """The blocks in which ``s`` has both a throughput and a p99."""
    return frozenset(s.throughput.rounds) & frozenset(s.latency_p99.rounds)


def operating_point(
    s: VariantSummary, ranked: frozenset[int | str] | None = None
) -> OperatingPoint | None:
    """The summary as a point; None without a throughput or a p99 (unstable cells), or for a
    replayed trace (the log's trace section states those cells). With ``ranked`` (the blocks
    every point has), its medians are over those blocks where it has more; its worst p99 and
    lowest throughput stay over every repeat (a budget holds over all that was measured)."""
    over = ranked if ranked and ranked < point_rounds(s) else None
    tput_of = s.throughput if over is None else s.throughput.over(over)
    p99_of = s.latency_p99 if over is None else s.latency_p99.over(over)
    tput, p99 = tput_of.median, p99_of.median
    if tput is None or p99 is None or s.settings.request_intervals is not None:
        return None
    return OperatingPoint(
        variant=s.variant.name,
        description=s.variant.description,
        load_key=s.load_key,
        protocol=s.settings.protocol,
        batch_size=s.settings.batch_size,
        concurrency=s.settings.concurrency if s.settings.request_rate_per_s is None else None,
        request_rate_per_s=s.settings.request_rate_per_s,
        request_distribution=s.settings.request_distribution,
        throughput_infer_per_s=tput,
        latency_p99_us=p99,
        load_generator_fell_behind=s.load_generator_fell_behind,
        latency_p99_max_us=s.latency_p99.high,
        instance_count=s.variant.instance_count,
        repeats=s.latency_p99.n,
        cache_hit_share=None if s.cache_hit_share is None else round(s.cache_hit_share, 3),
        throughput_low_infer_per_s=s.throughput.low if s.throughput.n > 1 else None,
        ranked_blocks=None if over is None else tput_of.n,
        warned_repeats=sum(1 for c in s.cells if c.perf.warnings),
        server_cores=s.server_cores.median,
        perf_analyzer_cores=s.perf_analyzer_cores.median,
    )


@dataclass(frozen=True)
class TieBreak:
    """Points tied with the best-by-median one on the pick figure, and what decided among them."""

    figure: str  # "throughput" | "p99"
    best_by_median: OperatingPoint
    tied: list[OperatingPoint]  # the tied points other than the best by median, plan order
    chosen: OperatingPoint
    next_in_tie: OperatingPoint | None = None  # the point the rule put second (None: no tie)
    not_comparable: int = 0  # qualifying points whose load cannot be compared with the best's
    # What decided (``TIE_RULES``): "instances", the other figure ("p99" for a throughput pick,
    # "throughput" for a latency pick) where its paired verdict at the same load separated
    # them, else "median" (nothing separated them: the best median on the pick figure stays)
    decided: str = ""
    # ``chosen`` against ``next_in_tie`` on the pick figure (the tie, with its interval), and
    # on the other figure where that decided
    tie_verdict: Verdict | None = None
    decisive_verdict: Verdict | None = None

    @property
    def applied(self) -> bool:
        """True when some point was tied with the best by median."""
        return bool(self.tied)

    @property
    def overridden(self) -> bool:
        """True when the tie-break chose another point than the best by median."""
        return self.chosen != self.best_by_median


@dataclass(frozen=True)
class Pick:
    """A throughput-first or latency-first pick, with the evidence its justification cites."""

    kind: str  # "throughput-first" | "latency-first"
    point: OperatingPoint
    verdicts: dict[str, Verdict]  # against the baseline at the same load key
    runner_up: OperatingPoint | None = None
    runner_up_verdict: Verdict | None = None  # the pick against the runner-up, on the figure
    tie_break: TieBreak | None = None
    qualifying: int = 0  # points within the budget (throughput) or carrying the target (latency)
    near_budget: int = 0  # points with a median p99 within the budget but a repeat above it
    baseline: VariantSummary | None = None  # the baseline at the pick's load key
    baseline_same_load: bool = True  # the baseline's offered load is the pick's
    baseline_over_budget: bool | None = None  # the baseline's worst repeat's p99 > the budget
    # the baseline as a point at the pick's load: its medians over the blocks the pick's are
    # (issue 36 audit: a pick's 10-block medians beside the baseline's over all 28 repeats)
    baseline_point: OperatingPoint | None = None
    # a latency pick's repeats under the target load: over its ranked blocks (None where its
    # medians are over every repeat) and over every repeat (issue 36 audit: "its lowest
    # repeat was under the target" where 4 of the 10 ranked blocks were)
    under_target_ranked: int | None = None
    under_target_repeats: int = 0


@dataclass(frozen=True)
class Saturation:
    """A step up a concurrency curve where the extra requests only queued."""

    curve: ConfigKey
    concurrency_before: int
    concurrency_after: int
    queue_us_before: float
    queue_us_after: float
    throughput_verdict: Verdict


@dataclass(frozen=True)
class LengthFilter:
    """Several sequence lengths were measured: only the reference one's points are ranked."""

    reference: int | None
    others: tuple[int, ...]  # the other lengths, left out of the ranking


@dataclass(frozen=True)
class SweepShape:
    """What the sweep measured, as the summary line states it."""

    model: str
    variants: int
    varied: tuple[str, ...]  # ServingVariant fields (``KNOB_LABELS`` keys) the sweep varied
    protocols: tuple[str, ...]
    concurrencies: tuple[int, ...]  # closed-loop levels, sorted
    arrivals: tuple[str, ...]  # how its open-loop loads' requests were spaced, in words
    repeats: int  # the fewest repeats of any (variant, load point)
    most_repeats: int


@dataclass(frozen=True)
class Recommendations:
    """Frontier, picks, knees and rates within budget of one sweep (no text: ``report``)."""

    latency_budget_p99_us: float
    target_load_infer_per_s: float | None
    points: list[OperatingPoint]  # every measured point, the excluded ones included
    frontier: list[OperatingPoint]  # sorted by throughput, excluded points left out
    throughput_pick: Pick | None
    latency_pick: Pick | None
    knees: dict[ConfigKey, int]
    max_rate_within_budget: dict[ConfigKey, float]
    shape: SweepShape | None = None  # None: nothing was measured
    excluded: list[OperatingPoint] = dataclasses.field(default_factory=list)
    unmeasured: list[str] = dataclasses.field(default_factory=list)  # "variant at load_key"
    lengths: LengthFilter | None = None
    # the two picks against each other when they are different variants: the latency pick's
    # p99 against the throughput pick's, the throughput pick's throughput against the other's
    optima_p99: Verdict | None = None
    optima_throughput: Verdict | None = None
    # the two picks' configurations compared at one load each (issue 36 audit: "different
    # optima" read from picks at concurrency 16 and 1, where at concurrency 1 the two
    # configurations were not separated): at the latency pick's load on p99, at the throughput
    # pick's load on throughput; None where the other configuration was not measured there
    optima_p99_same_load: Verdict | None = None
    optima_throughput_same_load: Verdict | None = None
    # the run's trust (``stats/run_trust.py``, set by ``report.run_data.load_run``): the picks
    # and the summary line of a doubtful run carry its doubt
    trust: RunTrust | None = None
    # (the machine's cores, the server's own under the CPU split or None where they shared),
    # set by ``report.run_data.load_run``: whether a pick's figures are the load generator's
    cores: tuple[int, int | None] | None = None

    @property
    def eligible(self) -> list[OperatingPoint]:
        """The points the frontier, the picks and the rate table are drawn from."""
        return [p for p in self.points if p not in self.excluded]


# ``recommendations.json`` as read back (``report.recommend_summary_text.recommendations_dict``
# writes it from the records above, with the words): the points keep their own stored form.
StoredPoint = Annotated[
    OperatingPoint, PlainSerializer(OperatingPoint.to_dict, return_type=dict[str, Any])
]


@dataclass(frozen=True)
class PointRef(Record):
    """An operating point named by its variant and load key."""

    variant: str
    load_key: str


@dataclass(frozen=True)
class ExcludedPoint(Record):
    """A point left out of the frontier and the picks, and why."""

    variant: str
    load_key: str
    reason: str


@dataclass(frozen=True)
class StoredTieBreak(Record):
    """A pick's tie-break as stored: the tied points, the rule and what decided."""

    figure: str
    applied: bool
    rule: str
    best_by_median: PointRef
    tied_with: tuple[PointRef, ...]
    chosen: PointRef
    decided_by: str | None
    changed_the_pick: bool
    not_comparable_points: int
    # the chosen point against the next on the pick figure, and on the figure that decided
    tie_verdict: VerdictRecord | None = later()
    decisive_verdict: VerdictRecord | None = later()


@dataclass(frozen=True)
class StoredPick(Record):
    """A pick as stored: its point, justification, verdicts, runner-up and tie-break."""

    kind: str
    point: StoredPoint
    justification: str
    verdicts: dict[str, VerdictRecord]
    runner_up: StoredPoint | None
    runner_up_verdict: VerdictRecord | None
    tie_break: StoredTieBreak | None
    # a latency pick's repeats under the target load: every repeat, and its ranked blocks
    repeats_under_target: int | None = later(group="under_target")
    ranked_blocks_under_target: int | None = later(group="under_target")


@dataclass(frozen=True)
class StoredRecommendations(Record):
    """``results/recommendations.json``: the points, frontier, picks, knees, rates within
    budget, the summary line and the rules, as ``recommendations_dict`` wrote them."""

    latency_budget_p99_us: float
    target_load_infer_per_s: float | None
    points: tuple[StoredPoint, ...]
    excluded_points: tuple[ExcludedPoint, ...]
    unmeasured_points: tuple[str, ...]
    exclusion_note: str
    frontier: tuple[StoredPoint, ...]
    throughput_pick: StoredPick | None
    latency_pick: StoredPick | None
    knees: dict[str, int]  # "variant/protocol/b<batch>" -> the knee's concurrency
    max_rate_within_budget: dict[str, float]
    summary_line: str
    method: dict[str, str]  # the rules, in words
    run_trust: RunTrust | None = later()
