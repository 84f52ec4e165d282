"""What the measuring benchmarks (``resolution.py``, ``aa_floor.py``) share: a fresh work
folder that only a benchmark's own folders are ever removed from, and the header every result
file starts with (date, commit, machine, cores)."""

from __future__ import annotations

import datetime as dt
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def fresh_folder(path: Path, marker: str, made_by: str) -> None:
    """An empty folder for one run; only a folder holding ``marker`` (one this benchmark
    made) is removed."""
    if path.exists():
        if not (path / marker).exists():
            raise SystemExit(f"{path} exists and was not made by this benchmark; pass --work")
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / marker).write_text(f"made by {made_by}\n")


def report_header() -> dict[str, Any]:
    """When, at which commit and on which machine a benchmark measured."""
    from tritonlab.experiments.manifest import MachineInfo, available_cores

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "commit": commit,
        "machine": MachineInfo.current().cpu_model or platform.processor(),
        "cores": available_cores(),
    }
