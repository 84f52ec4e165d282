"""No import circle between the subpackages (issue 21, 4): every import, function-level ones
included, read from the source; a module may import only its own layer and those below it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tritonlab"
# Lowest first. ``distributed`` sits between the measuring stages it drives and ``pipeline``,
# which hands the runner its opener; the top-level modules (errors, paths, ...) are below all.
LAYERS = (
    "models",
    "repository",
    "backends",
    "server",
    "client",
    "perf",
    "kernels",
    "experiments",
    "stats",
    "explanation",
    "decisions",
    "report",
    "distributed",
    "deploy",
    "pipeline",
    "cli",
)


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "tritonlab" and parts[1] in LAYERS else None


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_no_module_imports_a_layer_above_its_own() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        own = path.relative_to(SRC).parts[0]
        if own not in rank:
            continue
        for module in _imports(path):
            other = _package(module)
            if other is not None and rank[other] > rank[own]:
                upward.append(f"{path.relative_to(SRC)} imports {module}")
    assert not upward, "\n".join(upward)
