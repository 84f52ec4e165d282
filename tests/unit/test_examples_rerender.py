"""The committed examples re-render byte-identically from their stored results.

A refactor of stats/, explanation/, decisions/ or report/ must not change what a user reads:
``build_report`` on a copy of each example must write the same files. (``make rerender-check``
runs every example; this tier keeps the ones that cover each kind of run: one-off, sweep, tune,
backends.)
"""

from __future__ import annotations

import filecmp
import os
import shutil
from pathlib import Path

import pytest

from tritonlab.report.build import build_report

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COVERED = ("simple_mlp", "simple_mlp_sweep", "resnet18_cnn_tune", "simple_mlp_backends")
if os.environ.get("TRITONLAB_ALL_EXAMPLES") == "1":  # make rerender-check
    COVERED = tuple(  # every run folder, also those an example holds several of
        sorted(
            p.parent.relative_to(EXAMPLES).as_posix()
            for pattern in ("*/results", "*/*/results")
            for p in EXAMPLES.glob(pattern)
            if p.is_dir()
        )
    )


def differing_files(example: Path, work: Path) -> list[str]:
    """Re-render a copy of ``example`` under ``work``; return the relative paths that differ."""
    copy = work / example.name
    shutil.copytree(example, copy)
    build_report(copy)
    changed = []
    for path in sorted(copy.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(copy)
        original = example / rel
        if not original.exists():
            changed.append(f"{rel} (new)")
        elif not filecmp.cmp(original, path, shallow=False):
            changed.append(str(rel))
    changed += [  # a file the re-render deleted, or stopped writing
        f"{p.relative_to(example)} (removed)"
        for p in sorted(example.rglob("*"))
        if p.is_file() and not (copy / p.relative_to(example)).exists()
    ]
    return changed


@pytest.mark.parametrize("name", COVERED)
def test_example_rerenders_identically(name: str, tmp_path: Path) -> None:
    assert differing_files(EXAMPLES / name, tmp_path) == []
