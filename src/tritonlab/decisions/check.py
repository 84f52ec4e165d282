"""``tritonlab check``'s comparison: a new run against a baseline run, through the gate.

- **stored** (two finished run folders): every configuration and load point both runs measured
  is compared. Their repeats share no round, so the verdicts are unpaired and cannot see drift
  between the two days (the docs recommend the live check for that reason).
- **live** (a run folder from ``pipeline/check.py``): both models measured in one run,
  interleaved; the verdicts pair them by round.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonlab.decisions.gate import (
    EXIT_ERROR,
    EXIT_NOT_COMPARABLE,
    EXIT_PASS,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    LATENCY_P99,
    THROUGHPUT,
    GateResult,
    Thresholds,
    exit_status,
    gate,
    not_carried,
)
from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.store import load_cells, load_manifest
from tritonlab.records import Record
from tritonlab.repository.variants import ServingVariant
from tritonlab.stats.aggregate import VariantSummary, compare_figure, summarise
from tritonlab.stats.comparability import manifest_differences, split_differences
from tritonlab.stats.verdicts import CONFIDENCE
from tritonlab.stats.workload import workload_differences

# The live check's two configurations in its run folder.
BASELINE_SIDE = "baseline"
CANDIDATE_SIDE = "candidate"
FIGURES = ((THROUGHPUT, "throughput"), (LATENCY_P99, "latency_p99"))

EXIT_MEANINGS = {
    EXIT_PASS: "no regression beyond the thresholds and the noise",
    EXIT_REGRESSION: "a regression beyond its threshold",
    EXIT_NOT_COMPARABLE: "not comparable",
    EXIT_UNDECIDED: "undecided within the rounds measured",
    EXIT_ERROR: "could not check",
}


@dataclass(frozen=True)
class CheckReport(Record):
    """What ``tritonlab check`` found: the gate's results, why runs were not comparable, the
    declared changes and the exit status (stored, with its meaning, in ``check.json``)."""

    DERIVED = ("exit_status", "exit_meaning")

    mode: str  # "stored" | "live"
    baseline: str  # the baseline run folder, as given
    new: str  # the new run folder, or the model measured against the baseline
    thresholds: Thresholds
    results: list[GateResult]
    not_comparable: list[str]  # run-level reasons (empty: comparable)
    notes: list[str] = field(default_factory=list)  # declared changes, loads left out, method
    rounds: str = ""  # how the rounds were measured (live: paired; stored: unpaired)

    @property
    def exit_status(self) -> int:
        """0 pass, 1 regression, 2 not comparable, 3 undecided (``gate.exit_status``; 4, could
        not check, is the command's own)."""
        return exit_status(self.results, self.not_comparable)

    @property
    def exit_meaning(self) -> str:
        """The exit status in words."""
        return EXIT_MEANINGS[self.exit_status]

    @property
    def headline(self) -> str:
        """One line for a CI log: the status, its meaning and what it rests on."""
        counts = Counter(r.outcome.value for r in self.results)
        tally = ", ".join(f"{n} {word}" for word, n in sorted(counts.items()))
        head = f"exit {self.exit_status}: {self.exit_meaning}"
        if self.not_comparable:
            return f"{head} ({'; '.join(self.not_comparable)})"
        return f"{head} ({tally or 'no figure in common'})"


def _by_point(run_dir: Path, manifest: Manifest, tag: str) -> dict[tuple[str, str], VariantSummary]:
    """The run's summaries by (configuration, load key), their cells tagged with rounds no
    other run shares (so two runs' verdicts are unpaired)."""
    cells = [replace(c, node=f"{tag}:{c.node or ''}") for c in load_cells(run_dir)]
    return {(s.variant.name, s.load_key): s for s in summarise(cells, manifest.variant_order)}


def _gated(
    config: str, base: VariantSummary, new: VariantSummary, thresholds: Thresholds
) -> list[GateResult]:
    """Both figures of one configuration at one load (the callers compare only summaries of
    the same work) through the gate."""
    results = []
    behind = new.load_generator_fell_behind and not base.load_generator_fell_behind
    for figure, attr in FIGURES:
        verdict = compare_figure(figure, attr, base, new)
        if behind:
            results.append(not_carried(config, base.load_key, verdict, thresholds))
        else:  # unpaired verdicts rest on the repeats of each side
            rounds = verdict.pairs or min(getattr(base, attr).n, getattr(new, attr).n)
            results.append(gate(config, base.load_key, verdict, thresholds, rounds))
    return results


def compare_stored(
    new_dir: Path, base_dir: Path, thresholds: Thresholds, expected: set[str]
) -> CheckReport:
    """Two finished run folders through the gate (no server is started)."""
    base_manifest = load_manifest(base_dir)
    new_manifest = load_manifest(new_dir)
    blocking, notes = split_differences(manifest_differences(base_manifest, new_manifest), expected)
    base = _by_point(base_dir, base_manifest, "baseline")
    new = _by_point(new_dir, new_manifest, "new")
    blocking += _trace_differences(base_manifest, new_manifest)
    results: list[GateResult] = []
    run_level = bool(blocking)
    for key, b in base.items():
        if (n := new.get(key)) is None:
            continue
        if differ := workload_differences(b, n):
            if not run_level:  # a run-level difference already says why
                blocking.append(f"{key[0]} at {key[1]}: " + "; ".join(differ))
            continue
        if b.variant != n.variant:
            changes = ", ".join(variant_changes(b.variant, n.variant)) or "its description"
            notes.append(f"configuration {key[0]!r} differs between the runs: {changes}")
        results += _gated(key[0], b, n, thresholds)
    if only := sorted({f"{c} at {k}" for c, k in base.keys() ^ new.keys()}):
        notes.append("measured in one run only, so not compared: " + ", ".join(only))
    if not results and not blocking:
        blocking.append("the runs have no configuration and load point in common")
    return CheckReport(
        mode="stored",
        baseline=str(base_dir),
        new=str(new_dir),
        thresholds=thresholds,
        results=results,
        not_comparable=blocking,
        notes=notes,
        rounds="unpaired: the two runs were measured at different times, so no round is "
        f"shared; Welch's {100 * CONFIDENCE:g}% interval of the log-ratio (drift between the two "
        "times is not in it: a live check measures both in one run)",
    )


def variant_changes(a: ServingVariant, b: ServingVariant) -> list[str]:
    """The knobs that differ from ``a`` to ``b``, as ``knob old -> new``."""
    va, vb = a.to_dict(), b.to_dict()
    return [
        f"{k} {va[k]} -> {vb.get(k)}"
        for k in va
        if k not in ("name", "description") and va[k] != vb.get(k)
    ]


def _trace_differences(base: Manifest, new: Manifest) -> list[str]:
    """Loads of the same key that replayed different trace files (a trace's key is its name)."""
    a = {ld.key: ld.trace.sha256 for ld in base.plan.loads if ld.trace is not None}
    b = {ld.key: ld.trace.sha256 for ld in new.plan.loads if ld.trace is not None}
    return [
        f"load {key}: different traces under one name (sha256 {a[key][:12]} (baseline) vs "
        f"{b[key][:12]} (new))"
        for key in sorted(a.keys() & b.keys())
        if a[key] != b[key]
    ]


def _server_side(b: VariantSummary, n: VariantSummary) -> str:
    """What the server measured on each side (medians), where a difference shows first."""

    def pair(what: str, x: float | None, y: float | None, fmt: str) -> str:
        shown = [format(v, fmt) if v is not None else "–" for v in (x, y)]
        return f"{what} {shown[0]} -> {shown[1]}"

    return ", ".join(
        (
            pair("queue µs/request", b.queue_us.median, n.queue_us.median, ",.0f"),
            pair("compute µs/request", b.compute_us.median, n.compute_us.median, ",.0f"),
            pair("mean batch", b.mean_batch.median, n.mean_batch.median, ".1f"),
        )
    )


def compare_live(
    run_dir: Path, base_dir: Path, new: str, thresholds: Thresholds, config: str = "baseline"
) -> CheckReport:
    """A live check's run folder (both models measured interleaved) through the gate;
    ``config``: the baseline run's configuration both sides were served with."""
    manifest = load_manifest(run_dir)
    sides: dict[str, dict[str, VariantSummary]] = {}
    for s in summarise(load_cells(run_dir), manifest.variant_order):
        sides.setdefault(s.variant.name, {})[s.load_key] = s
    results: list[GateResult] = []
    notes = list(manifest.plan.notes)
    base_side, new_side = sides.get(BASELINE_SIDE, {}), sides.get(CANDIDATE_SIDE, {})
    for load_key, b in base_side.items():
        if (n := new_side.get(load_key)) is not None:
            results += _gated(config, b, n, thresholds)
            notes.append(f"Server side at {load_key} (baseline -> new): {_server_side(b, n)}.")
    return CheckReport(
        mode="live",
        baseline=str(base_dir),
        new=new,
        thresholds=thresholds,
        results=results,
        not_comparable=[] if results else ["no load point was measured on both sides"],
        notes=notes,
        rounds="paired: the baseline's model and the new one measured in one run, "
        "interleaved round by round",
    )
