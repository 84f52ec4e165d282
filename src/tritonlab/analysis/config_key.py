"""A configuration at a load: variant, protocol and client batch size, without the load level.

One closed-loop concurrency curve, or one open-loop rate series, belongs to one key. ``str``
gives the text the stored JSON and the reports show (``baseline/grpc/b1``); nothing parses it
back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonlab.analysis.aggregate import VariantSummary


@dataclass(frozen=True)
class ConfigKey:
    variant: str
    protocol: str
    batch_size: int

    def __str__(self) -> str:
        return f"{self.variant}/{self.protocol}/b{self.batch_size}"

    @classmethod
    def of(cls, summary: VariantSummary) -> ConfigKey:
        """The configuration key (variant, protocol, client batch) a summary was measured under."""
        return cls(summary.variant.name, summary.settings.protocol, summary.settings.batch_size)
