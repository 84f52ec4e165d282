"""Blocks where every configuration at one load read off its own median, and a verdict between
two loads read without them.

Pairing by block cancels what a block's disturbance does to both sides alike. Two
configurations at one load are measured one after another in each block and share it; one
configuration at two loads (or two protocols) is measured minutes apart, and a stretch of
blocks where every configuration at one load read slow moves such a verdict with nothing to
cancel it (issue 36 audit: a knee table's "+18%" from concurrency 1 to 4 rested on blocks where
every configuration at concurrency 1 read slow). A block is disturbed at a load when at least
``MIN_CONFIGS`` configurations were measured there in it, every one on the same side of its own
median, by a median of at least ``MIN_SHIFT_PCT``; a verdict between two loads whose pairs
include such blocks is stated beside the same verdict over the other pairs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import Verdict, compare

# The fewest configurations at one load whose shared shift marks a block: with 3, all on one
# side of their medians happens by chance in a quarter of blocks, so the size test below does
# the rest; with the sweeps' 6 or 7, in 3% or 2%.
MIN_CONFIGS = 3
# The smallest median shift (in %) that marks a block: the co-loaded runs' cells spread by about
# a few percent between blocks, so 5% is beyond a block's usual spread.
MIN_SHIFT_PCT = 5.0

Block = tuple[str, int | str]  # (load key, round)


def disturbed_blocks(summaries: Sequence[VariantSummary], figure: str) -> dict[Block, float]:
    """(load key, round) -> the median shift in % of every configuration's ``figure`` at that
    load in that round from its own median, where all read on one side and by at least
    ``MIN_SHIFT_PCT`` (rule in the module docstring)."""
    shifts: dict[Block, list[float]] = {}
    for s in summaries:
        values: Summary = getattr(s, figure)
        if not (median := values.median):
            continue
        for v, r in zip(values.values, values.rounds, strict=False):
            if v > 0:
                shifts.setdefault((s.load_key, r), []).append(math.log(v / median))
    out: dict[Block, float] = {}
    for block, logs in shifts.items():
        one_side = all(x < 0 for x in logs) or all(x > 0 for x in logs)
        shift = 100.0 * (math.exp(statistics.median(logs)) - 1.0)
        if len(logs) >= MIN_CONFIGS and one_side and abs(shift) >= MIN_SHIFT_PCT:
            out[block] = shift
    return out


@dataclass(frozen=True)
class LoadDrift:
    """The disturbed blocks among a cross-load verdict's pairs and the verdict without them."""

    rounds: tuple[int | str, ...]  # the paired rounds left out
    shifts_pct: dict[Block, float]  # each left-out block's shift, by load and round
    without: Verdict | None  # the verdict over the other pairs (None: under two remain)
    # the compared configuration's own shift from its median in each left-out block, with its
    # name, by load and round: the block's median shift is of all configurations there (issue
    # 36 audit: "by 9% to 22%" where the row's own configuration read 19% to 47% low)
    own_pct: dict[Block, tuple[str, float]] = field(default_factory=dict)

    def text(self) -> str:
        """The doubt in words, e.g. 'blocks 8-10 read every configuration at `grpc_b1_c1`
        below its own median (by 9% to 22%), a shift ...; without those blocks: higher (...)'."""
        parts = []
        for load in sorted({load for load, _ in self.shifts_pct}):
            mine = {r: v for (ld, r), v in self.shifts_pct.items() if ld == load}
            side = (
                "below"
                if all(v < 0 for v in mine.values())
                else "above"
                if all(v > 0 for v in mine.values())
                else "away from"
            )
            low, high = min(abs(v) for v in mine.values()), max(abs(v) for v in mine.values())
            size = _size(low, high)
            blocks = _blocks_word(sorted(mine, key=_round_order))
            own = [v for (ld, _), v in self.own_pct.items() if ld == load]
            theirs = ""
            if own:
                name = own[0][0]
                lo, hi = min(abs(x) for _, x in own), max(abs(x) for _, x in own)
                theirs = f"; `{name}` there {_size(lo, hi)}"
            parts.append(
                f"{blocks} read every configuration at `{load}` {side} its own median (their "
                f"median shift {size}{theirs})"
            )
        head = f"{'; '.join(parts)}, a shift at one load that pairing two loads does not cancel"
        if self.without is None:
            return f"{head}, and under two pairs are left without those blocks: not settled"
        return f"{head}; without those blocks: {self.without.phrase()}"


def _size(low: float, high: float) -> str:
    """'7%' or '9% to 22%' (absolute percentages)."""
    return f"{low:.0f}%" if round(low) == round(high) else f"{low:.0f}% to {high:.0f}%"


def _blocks_word(rounds: list[int | str]) -> str:
    """'block 9', 'blocks 8-10' (consecutive), or 'blocks 3, 7 and 9'."""
    if len(rounds) == 1:
        return f"block {rounds[0]}"
    ints = [r for r in rounds if isinstance(r, int)]
    if len(ints) == len(rounds) and ints == list(range(ints[0], ints[-1] + 1)):
        return f"blocks {ints[0]}–{ints[-1]}"
    named = [str(r) for r in rounds]
    return f"blocks {', '.join(named[:-1])} and {named[-1]}"


def without_disturbed(
    reference: VariantSummary,
    subject: VariantSummary,
    figure: str,
    disturbed: dict[Block, float],
) -> LoadDrift | None:
    """``subject`` against ``reference`` on ``figure`` without the paired blocks disturbed at
    either one's load; None at one load (the pairing cancels a shift there) or where no paired
    block was disturbed."""
    if reference.load_key == subject.load_key:
        return None
    ref: Summary = getattr(reference, figure)
    sub: Summary = getattr(subject, figure)
    shared = set(ref.rounds) & set(sub.rounds)
    hit = {
        (load, r): disturbed[(load, r)]
        for r in shared
        for load in (reference.load_key, subject.load_key)
        if (load, r) in disturbed
    }
    if not hit:
        return None
    own: dict[Block, tuple[str, float]] = {}
    for side, values in ((reference, ref), (subject, sub)):
        by_round, median = values.by_round(), values.median
        for load, r in hit:
            if load == side.load_key and median and r in by_round:
                own[(load, r)] = (side.variant.name, 100.0 * (by_round[r] / median - 1.0))
    dropped = frozenset(r for _, r in hit)
    keep = frozenset(set(ref.rounds) | set(sub.rounds)) - dropped
    left = len(shared - dropped)
    verdict = compare(figure, ref.over(keep), sub.over(keep)) if left >= 2 else None
    return LoadDrift(tuple(sorted(dropped, key=_round_order)), hit, verdict, own)


def _round_order(r: int | str) -> tuple[int, int, str]:
    """Rounds in order: numbers by value, then names (a cluster's ``node#round``)."""
    return (0, r, "") if isinstance(r, int) else (1, 0, r)


def within_load(
    reference: VariantSummary, subject: VariantSummary, figure: str, disturbed: dict[Block, float]
) -> tuple[list[int | str], Verdict | None]:
    """At one load: the paired blocks disturbed there, and ``subject`` against ``reference``
    without them (None: under two pairs left). Pairing cancels a shift both sides share, not
    one they read by unequal amounts (issue 36 audit: blocks where the baseline read 44% low
    and a configuration 19% carried a row's interval to +10%)."""
    ref: Summary = getattr(reference, figure)
    sub: Summary = getattr(subject, figure)
    shared = set(ref.rounds) & set(sub.rounds)
    hit = sorted((r for r in shared if (reference.load_key, r) in disturbed), key=_round_order)
    if not hit or reference.load_key != subject.load_key:
        return [], None
    keep = frozenset(set(ref.rounds) | set(sub.rounds)) - frozenset(hit)
    left = len(shared) - len(hit)
    return hit, (compare(figure, ref.over(keep), sub.over(keep)) if left >= 2 else None)


def blocks_words(rounds: Sequence[int | str]) -> str:
    """'block 9', 'blocks 8–10' or 'blocks 3, 7 and 9', in round order."""
    return _blocks_word(sorted(rounds, key=_round_order))
