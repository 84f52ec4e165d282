"""The benchmarks' and scripts' imports of tritonlab still resolve: they import lazily, inside
functions, so a renamed or removed name would only fail when a benchmark is run."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = sorted(p for folder in ("benchmarks", "scripts") for p in (ROOT / folder).rglob("*.py"))


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """Every ``tritonlab`` module (and name) ``path`` imports, function-level ones included."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tritonlab"):
            found += [(node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.startswith("tritonlab")]
    return found


@pytest.mark.parametrize("path", TOOLS, ids=lambda p: str(p.relative_to(ROOT)))
def test_tool_imports_resolve(path: Path) -> None:
    missing = []
    for module, name in _imports(path):
        loaded = importlib.import_module(module)
        if name is not None and not hasattr(loaded, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{module}.{name}")
    assert not missing, f"{path.name} imports names tritonlab no longer has: {missing}"


def test_tools_found() -> None:
    assert len(TOOLS) >= 5
