"""The demo precision bench's runs read for agreement between runs (its page:
``demo_precision.py``), from the stored ``demo_precision.json`` only.

The same configuration's change against the baseline is estimated afresh in each run. Per
condition, each configuration and figure (throughput, p99): its estimate and 95% interval in
every run side by side, whether the runs' intervals overlap, and how far a run's estimate fell
outside another run's interval. A run's half-width is its own interval's, not the spread
between fresh runs (issue 36 audit: the page gave each run's half-width and "target met"
while one configuration's estimate moved between runs far beyond those intervals).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tritonlab.stats.verdicts import tenth_text

FIGURE_NAMES = {"throughput": "throughput", "latency_p99": "p99"}


@dataclass(frozen=True)
class Estimate:
    """One run's change against the baseline for one configuration and figure (%)."""

    run: int
    change_pct: float
    low: float
    high: float

    def interval(self) -> str:
        """'CI +78.1% to +90.4%': one decimal, so that two intervals that do not overlap never
        print as touching."""
        return f"CI {_pct(self.low)} to {_pct(self.high)}"

    def text(self) -> str:
        """'+84.2% (CI +78.1% to +90.4%)'."""
        return f"{_pct(self.change_pct)} ({self.interval()})"

    def outside(self, other: Estimate) -> float:
        """How far (percentage points) ``other``'s estimate lies outside this run's interval
        (0 inside it)."""
        return max(self.low - other.change_pct, other.change_pct - self.high, 0.0)


@dataclass(frozen=True)
class Agreement:
    """One configuration and figure across a condition's runs."""

    config: str
    figure: str
    estimates: tuple[Estimate, ...]

    @property
    def apart(self) -> list[tuple[int, int]]:
        """The pairs of runs whose intervals do not overlap."""
        e = self.estimates
        return [
            (a.run, b.run)
            for i, a in enumerate(e)
            for b in e[i + 1 :]
            if a.high < b.low or b.high < a.low
        ]

    def furthest(self) -> tuple[float, Estimate, Estimate] | None:
        """The largest distance of a run's estimate outside another run's interval, with the
        run whose estimate it is and the run whose interval (None for fewer than two runs)."""
        pairs = [(a.outside(b), b, a) for a in self.estimates for b in self.estimates if a != b]
        return max(pairs, key=lambda x: x[0]) if pairs else None

    @property
    def label(self) -> str:
        return f"{self.config} {FIGURE_NAMES.get(self.figure, self.figure)}"


def agreements(runs: list[dict[str, Any]]) -> list[Agreement]:
    """Every configuration and figure of ``runs`` (one condition), its estimate in each run
    that stored one with an interval, in run order."""
    found: dict[tuple[str, str], list[Estimate]] = {}
    for run in sorted(runs, key=lambda r: r["run"]):
        for v in run["verdicts"]:
            if v.get("change_pct") is None or not v.get("ci95_pct"):
                continue
            low, high = v["ci95_pct"]
            estimate = Estimate(run["run"], v["change_pct"], low, high)
            found.setdefault((v["config"], v["figure"]), []).append(estimate)
    return [Agreement(c, f, tuple(e)) for (c, f), e in found.items()]


def _pct(value: float) -> str:
    return tenth_text(value)


def _points(value: float) -> str:
    return f"{value:.0f}" if round(value) >= 1 else f"{value:.1f}"


def agreement_sentence(condition: str, found: list[Agreement]) -> str:
    """'shared, quiet: in 2 of 6 verdicts the runs' intervals did not overlap (...); a run's
    estimate fell up to 12 percentage points outside another run's interval (...)'."""
    compared = [a for a in found if len(a.estimates) > 1]
    if not compared:
        return f"{condition}: one run, nothing to compare"
    apart = [a.label for a in compared if a.apart]
    text = f"{condition}: in {len(apart)} of {len(compared)} verdicts the runs' intervals did not "
    text += "overlap" + (f" ({', '.join(apart)})" if apart else "")
    candidates = [(f, a) for a in compared if (f := a.furthest()) is not None]
    (distance, estimate, interval), which = max(candidates, key=lambda x: x[0][0])
    if distance == 0:
        return text + "; every run's estimate fell inside every other run's interval"
    return (
        text + f"; a run's estimate fell up to {_points(distance)} percentage points outside "
        f"another run's interval ({which.label}: run {estimate.run}'s "
        f"{_pct(estimate.change_pct)} against run {interval.run}'s {interval.interval()})"
    )


def _stored_trust(run: dict[str, Any]) -> bool | None:
    """Whether the run called its verdicts trusted, from its stored trust record."""
    trusted: bool | None = (run.get("trust") or {}).get("trusted")
    return trusted


def _untrusted(
    report: dict[str, Any],
    condition: str,
    trusted: Callable[[dict[str, Any]], bool | None] | None = None,
) -> str:
    """' (runs 1, 2 and 3 did not call their verdicts trusted: see the table above)' for a
    condition whose runs' stored trust says so (issue 36 audit: the agreement quoted estimates
    of disturbed and control-flagged runs without their doubt); '' where all were trusted."""
    runs = sorted(
        r["run"]
        for r in report["runs"]
        if r["condition"] == condition and (trusted or _stored_trust)(r) is False
    )
    if not runs:
        return ""
    named = (
        ", ".join(str(n) for n in runs[:-1]) + (" and " if len(runs) > 1 else "") + str(runs[-1])
    )
    return (
        f" (run{'s' if len(runs) > 1 else ''} {named} did not call "
        f"{'their' if len(runs) > 1 else 'its'} verdicts trusted: see the table above)"
    )


def _conditions(report: dict[str, Any], conditions: Iterable[str] | None) -> list[str]:
    """``conditions``, else the report's in the order its runs give them."""
    if conditions is not None:
        return list(conditions)
    return list(dict.fromkeys(r["condition"] for r in report["runs"]))


def agreement_lines(
    report: dict[str, Any],
    conditions: Iterable[str] | None = None,
    table: str = "the table in `benchmarks/results/demo_precision.md`",
    trusted: Callable[[dict[str, Any]], bool | None] | None = None,
) -> list[str]:
    """Under the summary (what docs/results.md quotes too): per condition, how far the runs'
    answers for one configuration agreed (``table``: where each run's estimates are listed)."""
    by_condition = [
        (c, agreements([r for r in report["runs"] if r["condition"] == c]))
        for c in _conditions(report, conditions)
    ]
    by_condition = [(c, found) for c, found in by_condition if found]
    if not by_condition:
        return []
    lines = [
        "Run-to-run agreement, from each run's stored verdicts (every configuration's throughput "
        f"and p99 change against the baseline, its estimate and interval in each run: {table}):",
        "",
        *[
            f"- {agreement_sentence(c, found)}{_untrusted(report, c, trusted)}."
            for c, found in by_condition
        ],
    ]
    if any(a.apart for _, found in by_condition for a in found):
        lines += [
            "",
            "Where the runs' intervals did not overlap, a fresh run's answer moved beyond the "
            "interval of another: a run's interval (its half-width above) is not the spread "
            "between fresh runs.",
        ]
    return lines


def agreement_table(report: dict[str, Any], conditions: Iterable[str] | None = None) -> list[str]:
    """Per condition, each configuration and figure: its estimate in every run and whether the
    runs' intervals overlap."""
    numbers = sorted({r["run"] for r in report["runs"]})
    rows = []
    for condition in _conditions(report, conditions):
        for a in agreements([r for r in report["runs"] if r["condition"] == condition]):
            by_run = {e.run: e.text() for e in a.estimates}
            if len(a.estimates) < 2:
                overlap = "n/a (one run)"
            elif a.apart:
                overlap = "no (" + ", ".join(f"runs {i} and {j}" for i, j in a.apart) + ")"
            else:
                overlap = "yes"
            cells = " | ".join(by_run.get(n, "-") for n in numbers)
            rows.append(
                f"| {condition} | {a.config} | {FIGURE_NAMES.get(a.figure, a.figure)} | {cells} "
                f"| {overlap} |"
            )
    if not rows:
        return []
    return [
        "## Run-to-run agreement",
        "",
        "Each configuration's change against the baseline as every run estimated it (the "
        "stored verdicts' estimates and 95% intervals), and whether the runs' intervals "
        "overlap.",
        "",
        "| condition | configuration | figure | "
        + " | ".join(f"run {n}" for n in numbers)
        + " | intervals overlap |",
        "|---|---|---|" + "---|" * len(numbers) + "---|",
        *rows,
    ]
