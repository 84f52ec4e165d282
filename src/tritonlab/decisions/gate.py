"""A regression gate: is a change worse than its threshold, beyond the noise?

Each figure's verdict (``verdicts.compare``: a 95% interval of the change, in percent) is read
against a threshold as a non-inferiority test reads it (``gate``; ``docs/ci_gate.md``): **pass**
when the interval rules out a change beyond the threshold, **regression** when the whole
interval lies beyond it, otherwise **undecided**; a verdict without an interval is undecided,
one on loads that differ **not comparable**. So a change smaller than the threshold never
fails the gate, however clear it is. An undecided figure says how many more rounds would
likely decide it (``more_rounds_to_decide``: with n rounds and an interval of half-width h, in
log units, whose centre lies d from the threshold, about n (h / d)^2 rounds narrow it to d,
assuming the spread holds; the t quantile shrinking with n is left out, so the figure errs
high). A figure whose load the new side alone did not carry is a **regression** too. The exit
status is ``exit_status``'s (``tritonlab check`` exits 4 when it could not check at all).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from tritonlab.records import NOT_STORED, Record, Worded
from tritonlab.stats.verdicts import CONFIDENCE, NO_VERDICT, NOT_COMPARABLE, Verdict

THROUGHPUT = "throughput"
LATENCY_P99 = "latency_p99"


class Outcome(Worded):
    """What the gate makes of one figure; its value is how the outputs spell it."""

    PASS = "pass"
    REGRESSION = "regression"
    UNDECIDED = "undecided"
    NOT_COMPARABLE = "not comparable"


# Exit statuses of ``tritonlab check`` (precedence: ``exit_status``).
EXIT_PASS, EXIT_REGRESSION, EXIT_NOT_COMPARABLE, EXIT_UNDECIDED, EXIT_ERROR = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class Thresholds(Record):
    """How much worse a figure may get before the gate fails, in percent (stored in
    ``check.json``)."""

    max_regression_pct: float = 5.0  # throughput drop
    max_p99_increase_pct: float = 10.0

    def for_figure(self, figure: str) -> float:
        """The signed threshold of ``figure``'s change: -T for throughput, +P for p99."""
        return -self.max_regression_pct if figure == THROUGHPUT else self.max_p99_increase_pct


def _log(pct: float) -> float:
    return math.log1p(pct / 100.0)


def more_rounds_to_decide(
    verdict: Verdict, threshold_pct: float, rounds: int | None = None
) -> int | None:
    """About how many more rounds would put ``verdict``'s interval clear of the threshold (module
    docstring; ``rounds``: default its pairs); None when it sits on the threshold or has none."""
    if verdict.low_pct is None or verdict.high_pct is None:
        return None
    low, high = _log(verdict.low_pct), _log(verdict.high_pct)
    half, centre = (high - low) / 2.0, (high + low) / 2.0
    distance = abs(centre - _log(threshold_pct))
    if distance <= 1e-9 or half <= 0:
        return None
    n = max(rounds or verdict.pairs, 2)
    return max(1, math.ceil(n * (half / distance) ** 2) - n)


@dataclass(frozen=True)
class GateResult(Record):
    """One figure of one configuration at one load: its verdict and the gate's outcome (stored
    in ``check.json`` with its reason)."""

    DERIVED = ("reason",)

    config: str
    load_key: str
    figure: str  # THROUGHPUT or LATENCY_P99
    verdict: Verdict
    threshold_pct: float  # signed: -T for throughput, +P for p99
    outcome: Outcome
    # For an undecided figure: about how many more rounds decide it.
    more_rounds: Annotated[int | None, Field(alias="more_rounds_to_decide")]
    # The reason, where the interval is not it (a load not carried).
    why: Annotated[str | None, NOT_STORED] = None

    @property
    def name(self) -> str:
        """The result's name in JUnit and tables: ``baseline · grpc_b1_c8 · throughput``."""
        return f"{self.config} · {self.load_key} · {self.figure}"

    def reason(self) -> str:
        """Why the outcome is what it is, in one sentence."""
        v, thr = self.verdict, f"{self.threshold_pct:+g}%"
        if self.why is not None:
            return self.why
        if self.outcome is Outcome.NOT_COMPARABLE:
            return f"not comparable: {v.method}"
        if v.low_pct is None or v.high_pct is None:
            return f"no interval ({v.phrase()}): an interval needs at least two rounds per side"
        level = f"{100 * CONFIDENCE:g}%"
        interval = f"{v.change_pct:+.1f}% ({level} CI {v.low_pct:+.1f}% to {v.high_pct:+.1f}%)"
        worse = "a drop" if self.figure == THROUGHPUT else "an increase"
        if self.outcome is Outcome.PASS:
            return f"{interval}: the interval rules out {worse} beyond {thr}"
        if self.outcome is Outcome.REGRESSION:
            return f"{interval}: the whole interval is beyond the {thr} threshold"
        more = (
            f"; about {self.more_rounds} more round(s) would decide it if the spread holds"
            if self.more_rounds is not None
            else "; its estimate sits on the threshold, so more rounds may not decide it"
        )
        return f"{interval}: the interval straddles the {thr} threshold{more}"


def gate(
    config: str, load_key: str, verdict: Verdict, thresholds: Thresholds, rounds: int | None = None
) -> GateResult:
    """The gate's outcome on one figure's verdict (module docstring); ``rounds``: the rounds
    (repeats per side, for an unpaired verdict) its interval rests on."""
    figure = verdict.figure
    threshold = thresholds.for_figure(figure)
    low, high = verdict.low_pct, verdict.high_pct
    more: int | None = None
    if verdict.word == NOT_COMPARABLE:
        outcome = Outcome.NOT_COMPARABLE
    elif verdict.word == NO_VERDICT or low is None or high is None:
        outcome = Outcome.UNDECIDED
    else:
        # throughput regresses by falling below -T, p99 by rising above +P
        if figure == THROUGHPUT:
            passes, fails = low > threshold, high < threshold
        else:
            passes, fails = high < threshold, low > threshold
        outcome = Outcome.PASS if passes else Outcome.REGRESSION if fails else Outcome.UNDECIDED
    if outcome is Outcome.UNDECIDED:
        more = more_rounds_to_decide(verdict, threshold, rounds)
    return GateResult(config, load_key, figure, verdict, threshold, outcome, more)


def not_carried(config: str, load_key: str, verdict: Verdict, thresholds: Thresholds) -> GateResult:
    """A regression: the new side did not carry the load the baseline carried."""
    return GateResult(
        config,
        load_key,
        verdict.figure,
        verdict,
        thresholds.for_figure(verdict.figure),
        Outcome.REGRESSION,
        None,
        "the new side did not carry the offered load the baseline carried (perf_analyzer fell "
        "behind it on the new side only), so it could not serve what the baseline served",
    )


def exit_status(results: list[GateResult], differences: list[str]) -> int:
    """2 when the runs are not comparable as a whole (``differences``), else 1 on a
    regression, else 2 when a figure is not comparable, else 3 when one is undecided, else 0."""
    outcomes = {r.outcome for r in results}
    if differences or not results:
        return EXIT_NOT_COMPARABLE
    if Outcome.REGRESSION in outcomes:
        return EXIT_REGRESSION
    if Outcome.NOT_COMPARABLE in outcomes:
        return EXIT_NOT_COMPARABLE
    if Outcome.UNDECIDED in outcomes:
        return EXIT_UNDECIDED
    return EXIT_PASS


def precision_targets(results: list[GateResult]) -> list[GateResult]:
    """The figures another round should narrow: interval half-width over half their threshold,
    whatever their outcome (stopping on width, not on a decision, keeps the coverage)."""
    return [
        r
        for r in results
        if r.outcome is not Outcome.NOT_COMPARABLE
        and ((width := r.verdict.half_width_pct) is None or width > abs(r.threshold_pct) / 2.0)
    ]
