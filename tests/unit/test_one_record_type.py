"""Every results file is written and read through one record type (issue 33, 2): no class in
src/ outside ``records.py`` writes its own ``to_dict`` or ``from_dict``."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tritonlab"


def test_no_hand_written_to_dict_or_from_dict_outside_the_records_module() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "records.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found += [
                    f"{path.relative_to(SRC)}: {node.name}.{f.name}"
                    for f in node.body
                    if isinstance(f, ast.FunctionDef) and f.name in ("to_dict", "from_dict")
                ]
    assert found == []
