"""A configuration at a load: variant, protocol, client batch size and sequence length, without
the load level.

One closed-loop concurrency curve, or one open-loop rate series, belongs to one key: points at
another sequence length do other work per inference and make another curve. ``str`` gives the
text the stored JSON and the reports show (``baseline/grpc/b1``, ``baseline/grpc/b1/s512`` with
a length); nothing parses it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tritonlab.experiments.plan import sequence_length_of

if TYPE_CHECKING:
    from tritonlab.stats.aggregate import VariantSummary


@dataclass(frozen=True)
class ConfigKey:
    variant: str
    protocol: str
    batch_size: int
    sequence_length: int | None = None  # None: the load key names no length

    def __str__(self) -> str:
        length = f"/s{self.sequence_length}" if self.sequence_length is not None else ""
        return f"{self.variant}/{self.protocol}/b{self.batch_size}{length}"

    @classmethod
    def of(cls, summary: VariantSummary) -> ConfigKey:
        """The key (variant, protocol, client batch, sequence length) a summary was measured at."""
        return cls(
            summary.variant.name,
            summary.settings.protocol,
            summary.settings.batch_size,
            sequence_length_of(summary.load_key),
        )
