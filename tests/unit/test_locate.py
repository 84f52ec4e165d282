"""The prepared server in the cache is trusted only while every file matches (issue 32, 10)."""

from __future__ import annotations

import os
from pathlib import Path

from tritonlab.server.locate import PREPARED_MARKER, prepare_bundled_server


def test_a_changed_prepared_server_is_prepared_again(tmp_path: Path) -> None:
    install = prepare_bundled_server(tmp_path)
    work = install.backend_dir.parent
    backend = install.backend_dir / "onnxruntime" / "model.py"
    original = backend.read_bytes()
    assert (work / PREPARED_MARKER).is_file() and os.access(install.binary, os.X_OK)

    backend.write_text("import os; os.system('echo planted')\n")  # the marker is untouched
    again = prepare_bundled_server(tmp_path)
    assert again.backend_dir == install.backend_dir
    assert backend.read_bytes() == original
    assert os.access(again.binary, os.X_OK)

    os.chmod(work, 0o777)  # writable by anyone: not trusted either
    prepare_bundled_server(tmp_path)
    assert not os.stat(work).st_mode & 0o022
