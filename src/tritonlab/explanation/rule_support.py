"""What every explanation rule works with: a ``Finding``, the ``RuleContext`` a rule reads, which
configuration fields two variants differ in (from the knob table), and small figure helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from tritonlab.explanation.cost_model import CostModel
from tritonlab.records import Record
from tritonlab.repository.knobs import BATCHER_FIELDS, CONFIG_FIELDS
from tritonlab.repository.variants import ServingVariant
from tritonlab.stats.aggregate import VariantSummary, compare_figure
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import Verdict, compare

# The ``VariantSummary`` server figures and the same figure of a called step's statistics.
STEP_FIGURES = {
    "execution_us": "compute_us_per_execution",
    "mean_batch": "mean_batch_size",
    "compute_per_inference_us": "compute_us_per_inference",
    "queue_us": "queue_us_per_request",
}


@dataclass(frozen=True)
class Finding(Record):
    """One rule's conclusion about one variant, with its figures (stored in ``summary.json``)."""

    rule: str
    variant: str
    text: str
    figures: dict[str, Any] = field(default_factory=dict)
    kind: str = "explanation"  # or "flag": a warning about the measurement itself


@dataclass(frozen=True)
class RuleContext:
    """What a rule may look at: the subject, its baseline, its closest reference, the machine."""

    subject: VariantSummary
    baseline: VariantSummary
    reference: VariantSummary
    cores: int
    others: tuple[VariantSummary, ...] = ()
    cost_model: CostModel | None = None
    # the server's own cores when perf_analyzer ran on other CPUs (the CPU split, ``cpu_split``);
    # None: the two shared the machine's ``cores``
    server_cores: int | None = None
    # the step a pipeline's configurations change (an ensemble's step, a BLS callee): its own
    # batch and execution figures explain a row, not the whole pipeline's counters (None: the
    # measured model is the one changed)
    step: str | None = None

    def server_figure(self, summary: VariantSummary, attr: str) -> Summary:
        """``summary``'s server figure ``attr`` (``execution_us``, ``mean_batch`` or
        ``compute_per_inference_us``), read from the changed step's statistics in a pipeline."""
        if self.step is None:
            return cast(Summary, getattr(summary, attr))
        return summary.step_figure(self.step, STEP_FIGURES[attr])

    def compare_server(self, label: str, attr: str) -> Verdict:
        """The reference and the subject compared on ``server_figure(attr)``."""
        if self.step is None:
            return compare_figure(label, attr, self.reference, self.subject)
        ref, sub = self.server_figure(self.reference, attr), self.server_figure(self.subject, attr)
        return compare(label, ref, sub)

    @property
    def whose(self) -> str:
        """Whose executions the server figures are, for the text: '' or ' of step `cnn`'."""
        return "" if self.step is None else f" of step `{self.step}`"

    def cpu_used(self, summary: VariantSummary) -> tuple[float | None, int, str]:
        """The CPU that competes for the cores ``summary`` ran on, those cores, and who used it:
        under the CPU split the server's own against its cores, else server and perf_analyzer
        together against the machine's (None where a figure is missing)."""
        used = summary.server_cores.median
        if self.server_cores is not None:
            return used, self.server_cores, "the server"
        client = summary.perf_analyzer_cores.median
        total = None if used is None or client is None else used + client
        return total, self.cores, "server and perf_analyzer together"


def raw_changed_fields(a: ServingVariant, b: ServingVariant) -> list[str]:
    """Every configuration field that differs, batcher settings included."""
    return [k for k in CONFIG_FIELDS if getattr(a, k) != getattr(b, k)]


def changed_fields(a: ServingVariant, b: ServingVariant) -> list[str]:
    """The configuration changes between two variants, as a reader counts them."""
    changed = raw_changed_fields(a, b)
    if "dynamic_batching" in changed:  # switching batching on or off carries its settings
        changed = [k for k in changed if k not in BATCHER_FIELDS]
    return changed


def cores_text(cores: int, apart: bool) -> str:
    """``of 2 cores``, or under the CPU split ``of the server's 1 core``."""
    noun = "core" if cores == 1 else "cores"
    return f"of the server's {cores} {noun}" if apart else f"of {cores} {noun}"


def model_misses(ctx: RuleContext, point: VariantSummary) -> bool:
    """True when the cost model misses ``point`` by more than 25% in its throughput or a term."""
    prediction = ctx.cost_model.predict(point) if ctx.cost_model else None
    return prediction is not None and (prediction.fails or bool(prediction.term_misses()))


def rounded(value: float | None, digits: int = 0) -> float | None:
    """``value`` rounded for a finding's figures (None stays None)."""
    return None if value is None else round(value, digits)


def missed_sides(ctx: RuleContext, reference: str = "the reference") -> list[str]:
    """Which of the subject ("this point") and its reference (``reference``) the cost model
    misses by more than 25% in its throughput or a term: a split or prediction quoted beside
    such a miss is the model's, not a measured cause (issue 36 audits)."""
    sides = (("this point", ctx.subject), (reference, ctx.reference))
    return [which for which, point in sides if model_misses(ctx, point)]


def paired_medians(before: Summary, after: Summary) -> tuple[float | None, float | None]:
    """The two medians over the rounds both have, where either has rounds the other lacks (the
    rounds a paired verdict pairs: issue 36 audits, 310 against 158 µs quoted beside a -52%
    whose 10 paired blocks read 329 against 158); else the two medians as they are."""
    common = frozenset(before.rounds) & frozenset(after.rounds)
    if common and (len(common) < len(before.rounds) or len(common) < len(after.rounds)):
        return before.over(common).median, after.over(common).median
    return before.median, after.median


def paired_rounds(before: Summary, after: Summary) -> str:
    """'medians over the 10 rounds both have, the verdict's pairs' ('the one round both have')
    where ``paired_medians`` restricts the two to their common rounds, else '' (issue 36 audit:
    a row's 'batches of 10.0' beside the rule's unlabelled 10.1 over the rounds a verdict
    pairs)."""
    common = frozenset(before.rounds) & frozenset(after.rounds)
    if not common or (len(common) == len(before.rounds) and len(common) == len(after.rounds)):
        return ""
    if len(common) == 1:
        return "the one round both have"
    return f"medians over the {len(common)} rounds both have, the verdict's pairs"


def paired_note(before: Summary, after: Summary) -> str:
    """``paired_rounds`` in brackets with a leading space, or ''."""
    return f" ({said})" if (said := paired_rounds(before, after)) else ""


def change_text(
    label: str, before: float | None, after: float | None, unit: str = "", digits: int = 1
) -> str:
    """``label before -> after`` with units, or ``label n/a`` where a figure is missing."""
    if before is None or after is None:
        return f"{label} n/a"
    return f"{label} {before:,.{digits}f} -> {after:,.{digits}f}{unit}"


def batch_split(summary: VariantSummary, mean: float) -> tuple[list[int], float] | None:
    """The two sizes Triton formed most often and the share of executions within reach of the
    mean, where the mean batch is one Triton seldom formed (under a tenth of the executions
    within 1 request or 25% of it); None otherwise."""
    counts = summary.batch_distribution
    total = sum(counts.values())
    if not total or mean <= 0:
        return None
    reach = max(1.0, 0.25 * mean)
    near = sum(n for size, n in counts.items() if abs(size - mean) <= reach)
    if near >= 0.1 * total:
        return None
    return sorted(sorted(counts, key=lambda size: -counts[size])[:2]), near / total


def batch_mix(summary: VariantSummary, mean: float) -> str:
    """'' unless the mean batch is one Triton seldom formed (``batch_split``); then the sizes it
    formed most often (issue 36 audit: "batches of 4.0" where every execution held 1 or 7
    requests)."""
    split = batch_split(summary, mean)
    if split is None:
        return ""
    common, near = split
    counts = summary.batch_distribution
    total = sum(counts.values())
    reach = max(1.0, 0.25 * mean)
    shares = " and ".join(f"{size} ({100 * counts[size] / total:.0f}%)" for size in common)
    return (
        f" (a mean: the sizes formed most often were {shares} of the executions; "
        f"{100 * near:.0f}% were within {reach:.1f} requests of the mean)"
    )
