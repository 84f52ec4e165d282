"""Noise-aware verdicts: "higher", "lower" or "no clear difference" against a reference.

Method (stated in every experiment log):
- With at least two repeats on each side, a difference is clear only if the two sets of repeats
  do not overlap at all (every repeat of one above every repeat of the other) and the medians
  differ by at least ``MIN_EFFECT_PCT``. For 3 against 3 interleaved repeats, complete
  separation is the exact rank-sum (Mann-Whitney) test at U = 0: two-sided p = 0.1 when nothing
  differs; the minimum effect keeps a tiny but consistent shift from being called a change.
- With a single repeat on either side there is no noise estimate: the medians must differ by
  ``SINGLE_RUN_EFFECT_PCT``, and the verdict says it rests on one run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tritonlab.analysis.summary import Summary

MIN_EFFECT_PCT = 5.0
SINGLE_RUN_EFFECT_PCT = 15.0

HIGHER = "higher"
LOWER = "lower"
NO_CLEAR = "no clear difference"


@dataclass(frozen=True)
class Verdict:
    """How a figure of a variant compares with the same figure of a reference."""

    figure: str
    word: str
    change_pct: float | None
    reference_median: float | None
    variant_median: float | None
    method: str

    @property
    def clear(self) -> bool:
        return self.word != NO_CLEAR

    def phrase(self) -> str:
        """e.g. 'higher (+62%)' or 'no clear difference (-3%)'."""
        if self.change_pct is None:
            return self.word
        return f"{self.word} ({self.change_pct:+.0f}%)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "word": self.word,
            "change_pct": self.change_pct,
            "reference_median": self.reference_median,
            "variant_median": self.variant_median,
            "method": self.method,
        }


def separation_p_value(n: int, m: int) -> float:
    """Two-sided chance that n and m exchangeable repeats separate completely: 2 / C(n+m, n)."""
    return min(1.0, 2.0 / math.comb(n + m, n))


def compare(figure: str, reference: Summary, variant: Summary) -> Verdict:
    ref, var = reference.median, variant.median
    if ref is None or var is None or ref == 0:
        return Verdict(figure, NO_CLEAR, None, ref, var, "missing data")
    change = 100.0 * (var - ref) / ref
    word = HIGHER if change > 0 else LOWER
    if reference.n >= 2 and variant.n >= 2:
        separated = min(variant.values) > max(reference.values) or max(variant.values) < min(
            reference.values
        )
        clear = separated and abs(change) >= MIN_EFFECT_PCT
        p = separation_p_value(reference.n, variant.n)
        method = (
            f"repeats separated ({reference.n} vs {variant.n}: p = {p:.2g} by chance) and "
            f"|change| >= {MIN_EFFECT_PCT:g}%"
        )
    else:
        clear = abs(change) >= SINGLE_RUN_EFFECT_PCT
        method = f"single run: |change| >= {SINGLE_RUN_EFFECT_PCT:g}%, no noise estimate"
    return Verdict(figure, word if clear else NO_CLEAR, change, ref, var, method)
