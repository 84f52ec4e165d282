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


def _module_file(module: str) -> Path | None:
    """The file under ``SRC`` that ``module`` (dotted, ``tritonlab.``...) names, if any."""
    parts = module.split(".")
    if parts[0] != "tritonlab":
        return None
    base = SRC.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _file_edges(path: Path) -> set[Path]:
    """The files of tritonlab that ``path`` imports: at the top, in functions and under
    ``TYPE_CHECKING`` alike (a deferred import hides a circle, it does not remove it)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        for module in targets:
            target = _module_file(module)
            if target is not None and target != path:
                found.add(target)
    return found


def test_no_import_circle_between_any_two_files() -> None:
    """Issue 33 (1): no file imports, through any chain, a file that imports it back."""
    graph = {path: _file_edges(path) for path in sorted(SRC.rglob("*.py"))}
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    circles: list[list[str]] = []

    def visit(node: Path) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(str(top.relative_to(SRC)))
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert not circles, "\n".join(" <-> ".join(c) for c in circles)
