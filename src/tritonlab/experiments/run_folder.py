"""Which folders are tritonlab's, and ``--fresh`` that only ever moves what tritonlab made.

A run folder is tritonlab's when it holds the marker file ``.tritonlab``, written when a run
first uses a folder that holds none of what a run writes there (``run_layout.RUN_OUTPUTS``). A
folder that already held one (someone's ``docs/`` or ``README.md``, or a run from before the
marker) is never marked, whatever tritonlab later writes into it. ``--fresh`` refuses any
unmarked folder that holds one of those, in one line saying why and what to do, and never
deletes: each moves into ``.trash/<UTC time>/`` inside the run folder, where the last
``KEEP_TRASH`` stay. The model file and anything else in the folder stay.

Every move and delete goes through the run folder's gateway (``tritonlab.gateway``): a
``.trash``, ``results/`` or ``models/`` that is a symbolic link is refused in one line, never
followed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from tritonlab import gateway
from tritonlab.errors import ConfigError
from tritonlab.run_layout import MARKER, RUN_OUTPUTS, RUN_SUBFOLDERS, TRASH, RunLayout

KEEP_TRASH = 3


def open_run_folder(run_dir: Path, inputs: dict[str, Path | str | None] | None = None) -> None:
    """Open ``run_dir`` for writing after refusing an overlap with any of ``inputs`` (option ->
    path: the model file, ``--repository``, a baseline run, traces, input data), and a link
    where a run's folder or file would be (``results/``, ``models/``, ``.trash``, ...), before
    anything is written."""
    gate = gateway.open_root(run_dir, inputs)
    for name in (*RUN_OUTPUTS, TRASH, MARKER):
        gate.path(gate.root / name)  # a symbolic link there: one line, nothing changed


def is_run_folder(run_dir: Path) -> bool:
    """Whether tritonlab made ``run_dir`` (its marker)."""
    return RunLayout(run_dir).marker.is_file()


def require_run_folder(run_dir: Path) -> None:
    """``ConfigError`` in one line unless ``run_dir`` is a tritonlab run folder with results to
    read: it exists and holds ``results/manifest.json`` (a folder from before the marker has no
    ``.tritonlab``, so the manifest decides)."""
    if not run_dir.is_dir():
        raise ConfigError(
            f"{run_dir}: no such folder; give a run folder of tritonlab run, sweep or tune"
        )
    if not RunLayout(run_dir).manifest.is_file():
        made = "made by tritonlab but " if is_run_folder(run_dir) else ""
        raise ConfigError(
            f"{run_dir} is {made}not a finished tritonlab run (no results/manifest.json); give "
            "the --out folder of tritonlab run, sweep or tune"
        )


def _present(run_dir: Path) -> list[str]:
    root = RunLayout(run_dir).root
    return [name for name in RUN_OUTPUTS if os.path.lexists(root / name)]


def claim(run_dir: Path) -> None:
    """Mark ``run_dir`` as tritonlab's when it holds nothing a run writes; a folder with
    someone else's ``docs/`` or ``models/`` stays unmarked, so ``--fresh`` will not touch it."""
    marker = RunLayout(run_dir).marker
    if marker.is_file():
        return
    if not _present(run_dir) and not _is_foreign(run_dir):
        gateway.write_text(marker, json.dumps({"made_by": "tritonlab"}) + "\n")


def _is_foreign(run_dir: Path) -> bool:
    """Whether ``run_dir`` already held something before tritonlab used it (a user's folder
    with other files): a marker there would let ``--fresh`` move run outputs a user put in it
    later, so only an absent or empty folder (or one holding just a model file) is claimed."""
    if not run_dir.is_dir():
        return False
    return any(
        not (p.is_file() and p.suffix == ".onnx") and p.name not in (MARKER, TRASH)
        for p in run_dir.iterdir()
    )


def discard_results(run_dir: Path) -> Path | None:
    """``--fresh``: move what earlier runs measured and derived in ``run_dir`` into
    ``.trash/<UTC time>/`` (None when there was nothing to move). Refused, changing nothing,
    when the folder holds such outputs but tritonlab did not make it."""
    present = _present(run_dir)
    if not present:
        return None
    if not is_run_folder(run_dir):
        shown = ", ".join(s + "/" if s in RUN_SUBFOLDERS else s for s in present)
        raise ConfigError(
            f"--fresh: {run_dir} holds {shown} but tritonlab did "
            f"not make it (no {MARKER} file), so nothing was moved or deleted; choose another "
            f"--out (a run folder from before the marker: create an empty {MARKER} file in it "
            "to let --fresh move those into .trash/)"
        )
    layout = RunLayout(run_dir)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    gate = gateway.open_root(run_dir)
    for name in present:
        gate.path(layout.root / name)  # a link among them refuses the whole move
    target = gate.mkdir(layout.trash / stamp)
    for name in present:
        gate.move(layout.root / name, target / name)
    # Keep the newest KEEP_TRASH entries of .trash (checked by the gateway: never a link).
    gate.path(layout.trash)
    entries = sorted(p for p in layout.trash.iterdir() if p.is_dir() and not p.is_symlink())
    for old in entries[:-KEEP_TRASH]:
        gate.remove_tree(old)
    return target
