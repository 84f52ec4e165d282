"""When two re-measured picks are compared at different loads, what the page must say with it.

A pick is a configuration at the load its tool chose. Two picks at their own loads compared on
throughput are two operating points (configuration and load), not two configurations: a pick
at concurrency 128 against one at 16 reads the load as much as the configuration, and its p99
with it (issue 36 audit: "tune_thr's throughput relative to ma_brute_thr's: higher (+12%)"
compared c128 with c16, where at c16 tune_thr's configuration read lower, -15%). So every
comparison at different loads says so, quotes both p99s, and gives the verdict at a load both
configurations were measured at (the common load), from the same stored rounds.

Used by ``compare.py`` (its page, its targets); it reads only the stored JSON.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tritonlab.stats.verdicts import Verdict


def own_row(data: dict[str, Any], pick: str) -> dict[str, Any]:
    """``pick``'s re-measured row at the load its tool chose."""
    return next(r for r in data["remeasured"] if r["pick"] == pick and r["own_load"])


def common_load_verdict(
    data: dict[str, Any], reference: str, subject: str
) -> tuple[int, Verdict] | None:
    """The load both picks were re-measured at (the benchmark's common concurrency first) and
    ``subject``'s throughput against ``reference``'s there, paired by round; None where the
    stored rows have no load in common."""
    from tritonlab.stats.summary import Summary
    from tritonlab.stats.verdicts import compare

    rows = {(r["pick"], r["concurrency"]): r for r in data["remeasured"]}
    shared = {c for p, c in rows if p == reference} & {c for p, c in rows if p == subject}
    if not shared:
        return None
    preferred = data.get("common_concurrency")
    load = preferred if preferred in shared else min(shared)
    verdict = compare(
        "throughput",
        Summary.of(rows[(reference, load)]["throughput_infer_per_s"]),
        Summary.of(rows[(subject, load)]["throughput_infer_per_s"]),
    )
    return load, verdict


def _p99_ms(row: dict[str, Any]) -> str:
    values = [v for v in row["p99_us"] if v is not None]
    return f"{statistics.median(values) / 1000:.2f} ms" if values else "n/a"


def own_loads(data: dict[str, Any], reference: str, subject: str) -> tuple[str, str]:
    """(' at c128', ' at c16'): the subject's and the reference's own loads, to name beside
    them where the two differ; ('', '') where both picks' own loads are one load."""
    a, b = own_row(data, reference), own_row(data, subject)
    if a["concurrency"] == b["concurrency"]:
        return "", ""
    return f" at c{b['concurrency']}", f" at c{a['concurrency']}"


def points_text(data: dict[str, Any], reference: str, subject: str) -> str:
    """'' where both picks' own loads are one load; else what the comparison at their own
    loads is and the configurations' verdict at one load, e.g. 'two operating points
    (configuration and load), not two configurations: median p99 49.22 ms against 7.44 ms; at
    the common load c16, tune_thr's configuration against ma_brute_thr's: lower (-15%, CI
    -21% to -9%)'."""
    a, b = own_row(data, reference), own_row(data, subject)
    if a["concurrency"] == b["concurrency"]:
        return ""
    text = (
        "two operating points (configuration and load), not two configurations: median p99 "
        f"{_p99_ms(b)} against {_p99_ms(a)}"
    )
    common = common_load_verdict(data, reference, subject)
    if common is None:
        return text + "; the two configurations were not measured at one load"
    load, verdict = common
    return (
        f"{text}; at the common load c{load}, {subject}'s configuration against "
        f"{reference}'s: {verdict.phrase()}"
    )
