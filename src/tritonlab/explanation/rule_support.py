"""What every explanation rule works with: a ``Finding``, the ``RuleContext`` a rule reads, which
configuration fields two variants differ in (from the knob table), and small figure helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tritonlab.explanation.cost_model import CostModel
from tritonlab.records import Record
from tritonlab.repository.knobs import BATCHER_FIELDS, CONFIG_FIELDS
from tritonlab.repository.variants import ServingVariant
from tritonlab.stats.aggregate import VariantSummary


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


def raw_changed_fields(a: ServingVariant, b: ServingVariant) -> list[str]:
    """Every configuration field that differs, batcher settings included."""
    return [k for k in CONFIG_FIELDS if getattr(a, k) != getattr(b, k)]


def changed_fields(a: ServingVariant, b: ServingVariant) -> list[str]:
    """The configuration changes between two variants, as a reader counts them."""
    changed = raw_changed_fields(a, b)
    if "dynamic_batching" in changed:  # switching batching on or off carries its settings
        changed = [k for k in changed if k not in BATCHER_FIELDS]
    return changed


def rounded(value: float | None, digits: int = 0) -> float | None:
    """``value`` rounded for a finding's figures (None stays None)."""
    return None if value is None else round(value, digits)


def change_text(
    label: str, before: float | None, after: float | None, unit: str = "", digits: int = 1
) -> str:
    """``label before -> after`` with units, or ``label n/a`` where a figure is missing."""
    if before is None or after is None:
        return f"{label} n/a"
    return f"{label} {before:,.{digits}f} -> {after:,.{digits}f}{unit}"
