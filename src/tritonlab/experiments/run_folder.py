"""Which folders are tritonlab's, and ``--fresh`` that only ever moves what tritonlab made.

A run folder is tritonlab's when it holds the marker file ``.tritonlab``, written when a run
first uses a folder that holds none of the subfolders a run writes. A folder that already held
one (someone's ``docs/``, or a run from before the marker) is never marked, whatever tritonlab
later writes into it: a manifest beside a user's ``docs/`` does not make the ``docs/`` ours.
``--fresh`` refuses any unmarked folder that holds one of those subfolders, with one line saying
why and what to do, and never deletes: the earlier results move into ``.trash/<UTC time>/``
inside the run folder, where the last ``KEEP_TRASH`` stay (older ones are removed, inside
``.trash`` only).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from tritonlab.errors import ConfigError

MARKER = ".tritonlab"
TRASH = ".trash"
KEEP_TRASH = 3
# What a run writes and ``--fresh`` moves aside (the model file and everything else stay).
RUN_SUBFOLDERS = ("results", "benchmarks", "models", "server", "docs", "serving_path", "pick")


def is_run_folder(run_dir: Path) -> bool:
    """Whether tritonlab made ``run_dir`` (its marker)."""
    return (run_dir / MARKER).is_file()


def _present(run_dir: Path) -> list[str]:
    return [sub for sub in RUN_SUBFOLDERS if (run_dir / sub).exists()]


def claim(run_dir: Path) -> None:
    """Mark ``run_dir`` as tritonlab's when it holds nothing a run writes; a folder with
    someone else's ``docs/`` or ``models/`` stays unmarked, so ``--fresh`` will not touch it."""
    marker = run_dir / MARKER
    if marker.is_file():
        return
    if not _present(run_dir):
        run_dir.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"made_by": "tritonlab"}) + "\n")


def discard_results(run_dir: Path) -> Path | None:
    """``--fresh``: move what earlier runs measured and derived in ``run_dir`` into
    ``.trash/<UTC time>/`` (None when there was nothing to move). Refused, changing nothing,
    when the folder holds such subfolders but tritonlab did not make it."""
    present = _present(run_dir)
    if not present:
        return None
    if not is_run_folder(run_dir):
        raise ConfigError(
            f"--fresh: {run_dir} holds {', '.join(s + '/' for s in present)} but tritonlab did "
            f"not make it (no {MARKER} file), so nothing was moved or deleted; choose another "
            f"--out (a run folder from before the marker: create an empty {MARKER} file in it "
            "to let --fresh move those folders into .trash/)"
        )
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    target = run_dir / TRASH / stamp
    target.mkdir(parents=True)
    for sub in present:
        (run_dir / sub).rename(target / sub)
    _prune(run_dir / TRASH)
    return target


def _prune(trash: Path) -> None:
    """Keep the newest ``KEEP_TRASH`` entries of ``trash`` (a folder tritonlab made)."""
    entries = sorted(p for p in trash.iterdir() if p.is_dir() and not p.is_symlink())
    for old in entries[:-KEEP_TRASH]:
        shutil.rmtree(old)
