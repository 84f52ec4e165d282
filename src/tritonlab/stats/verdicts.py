"""Noise-aware verdicts: how a figure of a configuration compares with a reference's.

Method (stated in every experiment log):
- Repeats are measured in interleaved rounds (every configuration once, then again), so the
  repeats of two configurations from the same round shared the machine's state. A comparison
  pairs them by round and works on the log-ratios ``ln(variant / reference)``, one per round.
  From ``robust.MIN_BLOCKS`` rounds on (the block engine's many short blocks), the change is the
  Hodges-Lehmann estimate with the exact signed-rank 95% interval (``robust.py``), which one
  disturbed block cannot blow up; with fewer rounds, the mean with a two-sided 95% Student-t
  confidence interval (``scipy.stats``). ``exp`` turns both back into percentages. Ratios,
  not differences, because the noise here is multiplicative (a slow round slows every figure
  by a factor).
- Without at least two rounds in common (e.g. extra repeats of one side only) the two sides'
  log values are compared unpaired (Welch's interval); with one repeat on either side (or a
  side without its figure) there is no interval and no verdict: the word is "no verdict",
  which no rule reads as a difference or as its absence (it is never "decided").
- The word follows the interval, so the two can never disagree: "higher" or "lower" when the
  interval excludes no change, "no clear difference" when it includes it, "not comparable" when
  the two were measured under different offered loads (or a load perf_analyzer did not keep up),
  where no figure can be compared.
- Where a side's values all came from one server process that lived the whole run (a
  co-loaded block run), the interval also holds that process's own speed, which no pairing by
  round can see: each side's spread ``Summary.process_sd_log``, measured by the calibration
  benchmark, is added in quadrature to the interval's half-widths (``process_term.py``), and
  the p-value is the normal one for the widened interval. The method says so, with its size.
  Two figures of one process (``Summary.process``: one configuration at two loads) hold none.
- A verdict is *decided* when it is clear, not comparable, or its interval lies within
  ±``MIN_EFFECT_PCT`` (no difference worth acting on either way); adaptive repeats measure
  more rounds while a verdict that a recommendation or an explanation rests on is undecided.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated

from scipy import stats

from tritonlab.records import NOT_STORED, Record, Worded
from tritonlab.stats.process_term import widened
from tritonlab.stats.robust import (
    MIN_BLOCKS,
    CentreInterval,
    half_width_pct,
    hodges_lehmann_interval,
    signed_rank_p_value,
)
from tritonlab.stats.summary import Summary

CONFIDENCE = 0.95
MIN_EFFECT_PCT = 5.0


class Word(Worded):
    """The verdict's word; its value is how the log spells it."""

    HIGHER = "higher"
    LOWER = "lower"
    NO_CLEAR = "no clear difference"
    NOT_COMPARABLE = "not comparable"
    NO_VERDICT = "no verdict"  # one repeat, or a side without the figure: no interval


# by name, not by unpacking the enum: a reordered member must not swap two words
HIGHER, LOWER, NO_CLEAR = Word.HIGHER, Word.LOWER, Word.NO_CLEAR
NOT_COMPARABLE, NO_VERDICT = Word.NOT_COMPARABLE, Word.NO_VERDICT
ONE_REPEAT_METHOD = "one repeat: no interval, so no verdict"
MISSING_METHOD = "missing data"


def endpoint_text(pct: float) -> str:
    """An interval's end in %: whole percent, or one decimal where whole percent would print a
    nonzero end as 0 (an interval that excludes no change must not seem to touch it)."""
    decimals = 0
    while pct != 0 and round(pct, decimals) == 0 and decimals < 4:
        decimals += 1
    return f"{pct:+.{decimals}f}%"


def tenth_text(pct: float) -> str:
    """``+3.6%``: one decimal, more where one would print a nonzero end as ``+0.0%``."""
    return endpoint_text(pct) if pct != 0 and round(pct, 1) == 0 else f"{pct:+.1f}%"


def interval_text(low: float, high: float) -> str:
    """``-6% to -1%``: each end by ``endpoint_text``, with one or two decimals more where the
    two would print as one number (``-2.4% to -1.6%``, not ``-2% to -2%``: issue 36 audit)."""
    first, second = endpoint_text(low), endpoint_text(high)
    for decimals in (1, 2):
        if first != second or low == high:
            break
        first, second = f"{low:+.{decimals}f}%", f"{high:+.{decimals}f}%"
    return f"{first} to {second}"


@dataclass(frozen=True)
class Verdict(Record):
    """How a figure of a variant compares with the same figure of a reference. Stored
    (``VerdictRecord`` reads it) with its interval as ``ci95_change_pct`` and ``decided``."""

    DERIVED = ("ci95_change_pct", "decided")

    figure: str
    word: Word
    change_pct: float | None  # point estimate of the change (geometric mean of the ratios)
    reference_median: float | None
    variant_median: float | None
    method: str
    # The 95% confidence interval of the change, in percent.
    low_pct: Annotated[float | None, NOT_STORED] = None
    high_pct: Annotated[float | None, NOT_STORED] = None
    pairs: int = 0  # rounds paired (0 when unpaired or undecidable)
    p_value: float | None = None  # two-sided, for "no change"
    # Where the process term widened the interval (``_with_process_term``), the word and the
    # interval the pairing alone gave, in percent: a control that only the widening keeps
    # from reading a difference says so (None: not widened).
    unwidened_word: Annotated[Word | None, NOT_STORED] = None
    unwidened_pct: Annotated[tuple[float, float] | None, NOT_STORED] = None

    @property
    def widening_decides(self) -> bool:
        """True when the pairing alone read a difference and the process term made it none."""
        return self.unwidened_word is not None and self.unwidened_word != self.word

    @property
    def clear(self) -> bool:
        """True when the verdict is "higher" or "lower"."""
        return self.word in (HIGHER, LOWER)

    @property
    def comparable(self) -> bool:
        """True unless the verdict is "not comparable"."""
        return self.word != NOT_COMPARABLE

    @property
    def has_interval(self) -> bool:
        """True when a 95% confidence interval of the change was computed."""
        return self.low_pct is not None and self.high_pct is not None

    def pairs_note(self) -> str:
        """' over 2 pairs (a t-interval, 1 degree of freedom)' where few pairs give the
        interval (``few_pairs_note``)."""
        return few_pairs_note(self.pairs, self.method, self.has_interval)

    @property
    def ci95_change_pct(self) -> list[float] | None:
        """The interval as [low, high] in percent; None without one."""
        return [self.low_pct, self.high_pct] if self.has_interval else None  # type: ignore[list-item]

    @property
    def decided(self) -> bool:
        """Clear, not comparable, or shown to be within ±MIN_EFFECT_PCT."""
        if self.clear or not self.comparable:
            return True
        ci = self.ci95_change_pct
        return ci is not None and ci[0] >= -MIN_EFFECT_PCT and ci[1] <= MIN_EFFECT_PCT

    @property
    def half_width_pct(self) -> float | None:
        """The interval's half-width h in log units, stated as exp(h) - 1 in percent."""
        ci = self.ci95_change_pct
        return None if ci is None else half_width_pct(*ci)

    def phrase(self) -> str:
        """e.g. 'higher (+35%, CI +12% to +61%)', 'no clear difference (+3%, CI -9% to +17%)'
        or 'no verdict (one repeat; medians +112%)'."""
        return _phrase(self.word, self.change_pct, self.method, self.ci95_change_pct, "CI")


def few_pairs_note(pairs: int, method: str, has_interval: bool) -> str:
    """' over 2 pairs (a t-interval, 1 degree of freedom)' where an interval rests on fewer
    than ``robust.MIN_BLOCKS`` pairs (below it the interval is a Student t-interval on the
    pairs' log-ratios, not the signed-rank one), ' (unpaired)' where it paired none; '' from
    ``MIN_BLOCKS`` pairs on or without an interval (issue 36 audit: "+3365%, CI +1915% to
    +5857%" quoted without saying it rests on 2 pairs, a t-interval with 1 degree of freedom)."""
    if not has_interval or pairs >= MIN_BLOCKS:
        return ""
    if pairs == 0:
        return " (unpaired)"
    text = f" over {pairs} pair{'s' if pairs != 1 else ''}"
    if "t-interval" in method:
        dof = pairs - 1
        text += f" (a t-interval, {dof} degree{'s' if dof != 1 else ''} of freedom)"
    return text


def _phrase(
    word: Word, change_pct: float | None, method: str, ci: Sequence[float] | None, ci_name: str
) -> str:
    """A verdict in the log's words; a "no verdict" without a change says why ('no verdict
    (missing data)'): the medians' change is a figure, not a word."""
    if word == NOT_COMPARABLE or (word == NO_VERDICT and change_pct is None):
        return f"{word} ({method})"
    if word == NO_VERDICT:
        return f"{NO_VERDICT} (one repeat; medians {change_pct:+.0f}%)"
    if change_pct is None:
        return str(word)
    interval = f", {ci_name} {interval_text(ci[0], ci[1])}" if ci else ""
    return f"{word} ({change_pct:+.0f}%{interval})"


def _pct(log_ratio: float) -> float:
    return 100.0 * (math.exp(log_ratio) - 1.0)


def _word(low: float, high: float) -> Word:
    if low > 0:
        return HIGHER
    if high < 0:
        return LOWER
    return NO_CLEAR


def not_comparable(figure: str, reference: Summary, variant: Summary, why: str) -> Verdict:
    """A "not comparable" verdict for ``figure``, with ``why`` as its method."""
    return Verdict(figure, NOT_COMPARABLE, None, reference.median, variant.median, why)


def paired_log_ratios(reference: Summary, variant: Summary) -> list[float]:
    """ln(variant / reference) for every round both were measured in (positive values only)."""
    ref = reference.by_round()
    return [
        math.log(v / ref[r])
        for r, v in variant.by_round().items()
        if r in ref and v > 0 and ref[r] > 0
    ]


def _blocks(summary: Summary) -> str:
    """What the pairs share: a round, or on a cluster a node and a round (``node#round``)."""
    return "node and round" if any(isinstance(r, str) for r in summary.rounds) else "round"


def centre_interval(logs: Sequence[float], p_value: bool = True) -> CentreInterval | None:
    """From ``robust.MIN_BLOCKS`` values on, the Hodges-Lehmann estimate with the exact
    signed-rank 95% interval; from two, the mean with a Student-t 95% interval; None below
    two. The one interval of a centre: verdicts apply it to paired log-ratios, capacity
    (``decisions.capacity``) to one figure's log repeats."""
    if (robust := hodges_lehmann_interval(logs, CONFIDENCE)) is not None:
        return replace(robust, p_value=signed_rank_p_value(logs)) if p_value else robust
    if len(logs) < 2:
        return None
    n = len(logs)
    mean = statistics.fmean(logs)
    sd = statistics.stdev(logs)
    if sd <= 1e-12 * max(1.0, abs(mean)):  # constant values (up to rounding)
        return CentreInterval(mean, mean, mean, n, False, (1.0 if mean == 0.0 else 0.0))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * sd / math.sqrt(n)
    p = float(stats.ttest_1samp(logs, 0.0).pvalue) if p_value else None
    return CentreInterval(mean, mean - half, mean + half, n, False, p)


def compare(figure: str, reference: Summary, variant: Summary) -> Verdict:
    """The verdict on ``variant`` against ``reference`` (method in the module docstring)."""
    ref_med, var_med = reference.median, variant.median
    if ref_med is None or var_med is None or ref_med <= 0 or var_med <= 0:
        return Verdict(figure, NO_VERDICT, None, ref_med, var_med, MISSING_METHOD)
    if (centre := centre_interval(paired_log_ratios(reference, variant))) is not None:
        method = (
            f"paired by {_blocks(reference)} ({centre.n} blocks): Hodges-Lehmann estimate of "
            "the log-ratio with its exact 95% signed-rank interval, two-sided"
            if centre.robust
            else f"paired by {_blocks(reference)} ({centre.n} rounds): 95% t-interval of the "
            "mean log-ratio, two-sided"
        )
    else:
        ref_logs = [math.log(v) for v in reference.values if v > 0]
        var_logs = [math.log(v) for v in variant.values if v > 0]
        if len(ref_logs) < 2 or len(var_logs) < 2:
            change = 100.0 * (var_med - ref_med) / ref_med
            return Verdict(figure, NO_VERDICT, change, ref_med, var_med, ONE_REPEAT_METHOD)
        result = stats.ttest_ind(var_logs, ref_logs, equal_var=False)
        diff = statistics.fmean(var_logs) - statistics.fmean(ref_logs)
        interval = result.confidence_interval(CONFIDENCE)
        low, high = float(interval.low), float(interval.high)
        if not (math.isfinite(low) and math.isfinite(high)):  # both sides constant
            low = high = diff
        p = float(result.pvalue) if math.isfinite(result.pvalue) else None
        centre = CentreInterval(diff, low, high, 0, False, p)  # no pairs
        method = (
            f"unpaired ({len(var_logs)} vs {len(ref_logs)} repeats, no common rounds): "
            "Welch 95% interval of the log-ratio, two-sided"
        )
    unwidened: CentreInterval | None = None
    between = math.hypot(reference.process_sd_log, variant.process_sd_log)
    if between > 0 and not (reference.process and reference.process == variant.process):
        unwidened = centre
        centre, method = _with_process_term(centre, between, method)
    return Verdict(
        figure,
        _word(centre.low, centre.high),
        _pct(centre.estimate),
        ref_med,
        var_med,
        method,
        _pct(centre.low),
        _pct(centre.high),
        centre.n,
        centre.p_value,
        None if unwidened is None else _word(unwidened.low, unwidened.high),
        None if unwidened is None else (_pct(unwidened.low), _pct(unwidened.high)),
    )


def _with_process_term(
    centre: CentreInterval, between: float, method: str
) -> tuple[CentreInterval, str]:
    """``centre`` widened by the two sides' process term ``between`` (log units), its
    p-value the normal one of the widened interval, and the method saying so."""
    z = float(stats.norm.ppf(0.5 + CONFIDENCE / 2))
    low, high = widened(centre.estimate, centre.low, centre.high, between, z)
    se = (high - low) / (2.0 * z)
    p = float(2.0 * stats.norm.sf(abs(centre.estimate) / se)) if se > 0 else centre.p_value
    note = (
        f"; widened by ±{100.0 * math.expm1(z * between):.1f}% for the two sides' own server "
        "processes together (each one's spread over runs, from the calibration benchmark)"
    )
    return replace(centre, low=low, high=high, p_value=p), method + note


@dataclass(frozen=True)
class VerdictRecord(Record):
    """A ``Verdict`` as stored (``Verdict.to_dict``): the word, the change and its interval."""

    figure: str
    word: str
    change_pct: float | None
    ci95_change_pct: tuple[float, float] | None
    pairs: int
    p_value: float | None
    reference_median: float | None
    variant_median: float | None
    method: str
    decided: bool

    @classmethod
    def of(cls, verdict: Verdict) -> VerdictRecord:
        """The stored form of ``verdict``."""
        return cls.from_dict(verdict.to_dict())

    @property
    def reading(self) -> Word:
        """The word as this tritonlab reads it: a file written before "no verdict" existed
        stored a verdict without an interval (one repeat, missing data) as "no clear
        difference"; it reads as "no verdict"."""
        word = Word(self.word)
        if word == NO_CLEAR and self.ci95_change_pct is None:
            return NO_VERDICT
        return word

    def phrase(self) -> str:
        """The stored verdict in the log's words, e.g. 'no clear difference (-13%, 95% CI
        -45% to +37%)' or 'no verdict (one repeat; medians +112%)'."""
        return _phrase(self.reading, self.change_pct, self.method, self.ci95_change_pct, "95% CI")

    def pairs_note(self) -> str:
        """' over 2 pairs (a t-interval, 1 degree of freedom)' where few pairs give the
        interval (``few_pairs_note``)."""
        return few_pairs_note(self.pairs, self.method, self.ci95_change_pct is not None)


def widened_record(record: VerdictRecord, sd_log: float) -> VerdictRecord:
    """``record`` (a stored verdict) widened by both sides' process term of ``sd_log`` each,
    where it was stored without it (a tune's race before issue 36); else as it is."""
    ci, change = record.ci95_change_pct, record.change_pct
    if ci is None or change is None or sd_log <= 0 or "own server process" in record.method:
        return record
    centre = CentreInterval(
        math.log1p(change / 100.0),
        math.log1p(ci[0] / 100.0),
        math.log1p(ci[1] / 100.0),
        record.pairs,
        False,
        record.p_value,
    )
    wide, method = _with_process_term(centre, math.hypot(sd_log, sd_log), record.method)
    verdict = Verdict(
        record.figure,
        _word(wide.low, wide.high),
        change,
        record.reference_median,
        record.variant_median,
        method + " (widened when this page was written: the run stored it without)",
        _pct(wide.low),
        _pct(wide.high),
        record.pairs,
        wide.p_value,
    )
    return VerdictRecord.of(verdict)
