"""The method text in the docs names the interval the verdicts use (issue 36, minor item):
docs/tune.md and docs/sweeps.md said "t-interval" where the Hodges-Lehmann interval is used
from ``robust.MIN_BLOCKS`` rounds on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tritonlab.stats.robust import MIN_BLOCKS

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("page", ["tune.md", "sweeps.md"])
def test_a_t_interval_is_named_only_beside_the_hodges_lehmann_interval(page: str) -> None:
    text = " ".join((DOCS / page).read_text().split())
    for match in re.finditer(r"\bt-interval", text):
        around = text[max(0, match.start() - 300) : match.end() + 300]
        assert "Hodges-Lehmann" in around, f"{page}: t-interval alone near {around!r}"
        said = re.search(r"from (\d+) rounds on", around)
        assert said is None or int(said.group(1)) == MIN_BLOCKS
