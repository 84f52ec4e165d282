"""Shared pytest fixtures: where the recorded fixtures live."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES_DIR = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``tests/fixtures``: recorded perf_analyzer output and a recorded seed run folder."""
    return FIXTURES_DIR


@pytest.fixture(scope="session")
def perf_fixtures_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir / "perf"


@pytest.fixture(scope="session")
def seed_run_dir(fixtures_dir: Path) -> Path:
    """A real run folder (``results/cells``, manifest, ...) of the seed comparison. Read-only."""
    return fixtures_dir / "seed_run"
