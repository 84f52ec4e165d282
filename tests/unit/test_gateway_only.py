"""Every write, move, link and delete of tritonlab goes through ``tritonlab.gateway``.

The test reads every module under ``src/tritonlab`` and fails on a call that writes, moves,
links or deletes a file or folder anywhere but in the gateway: a new destructive call must be
made through the gateway, which keeps it inside its root and off links (issue 32).

Calls on the gateway itself are the way through: on the module (``gateway.write_text``) or on a
``Gateway`` held in a name ``gate`` or ending in ``_gate``. A library that writes a path it is
given (``onnx.save``, ``np.savez``) may do so inside the arguments of a gateway call (a lambda
handed to ``gateway.write_file``, which gives it a fresh path of its own), or on a line marked
``# gateway: <why>`` that says which gateway path it writes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "tritonlab"
GATEWAY = SRC / "gateway"  # the package: its roots and its one folder class

# Attribute calls that change the file system whatever they are called on.
ALWAYS = {
    "rmtree",
    "unlink",
    "rmdir",
    "removedirs",
    "rename",
    "renames",
    "symlink",
    "symlink_to",
    "hardlink_to",
    "link_to",
    "copytree",
    "copyfile",
    "copy2",
    "copymode",
    "copystat",
    "write_text",
    "write_bytes",
    "mkdir",
    "makedirs",
    "touch",
    "mkstemp",
    "mkdtemp",
    "TemporaryDirectory",
    "NamedTemporaryFile",
    "savefig",
}
# Calls on a module (``os.remove``, ``shutil.move``, ``onnx.save``, ...).
ON_MODULE = {
    ("os", "remove"),
    ("os", "replace"),
    ("os", "link"),
    ("os", "open"),
    ("os", "fdopen"),
    ("os", "truncate"),
    ("shutil", "move"),
    ("shutil", "copy"),
    ("onnx", "save"),
    ("onnx", "save_model"),
    ("np", "save"),
    ("np", "savez"),
    ("numpy", "save"),
}
WRITE_MODES = set("wax+")


def _mode(call: ast.Call, position: int = 1) -> str:
    """The mode string of an ``open(...)`` call ('r' when not given as a literal)."""
    mode: ast.expr | None = call.args[position] if len(call.args) > position else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return mode.value
    return "r" if mode is None else "w?"  # a computed mode counts as a write


def _is_gateway(receiver: ast.expr) -> bool:
    """Whether a call on ``receiver`` is a call on the gateway (see the module text)."""
    if isinstance(receiver, ast.Name):
        name = receiver.id
    elif isinstance(receiver, ast.Attribute):
        name = receiver.attr
    else:
        return False
    return name in ("gateway", "gate") or name.endswith("_gate")


def _os_open_writes(call: ast.Call) -> bool:
    flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
    return any(f in flags for f in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"))


def destructive_calls(tree: ast.AST, source: str = "") -> list[tuple[int, str]]:
    """(line, call) of every call in ``tree`` that writes, moves, links or deletes."""
    lines = source.splitlines()
    exempt: set[int] = set()
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if (
            isinstance(node, ast.Call)
            and isinstance(func, ast.Attribute)
            and _is_gateway(func.value)
        ):
            exempt |= {id(n) for arg in node.args for n in ast.walk(arg)}
            exempt.add(id(node))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in exempt:
            continue
        if node.lineno <= len(lines) and "# gateway: " in lines[node.lineno - 1]:
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if (owner, func.attr) == ("os", "open"):
                if _os_open_writes(node):
                    found.append((node.lineno, "os.open(write)"))
            elif (owner, func.attr) == ("os", "fdopen"):
                if WRITE_MODES & set(_mode(node)):
                    found.append((node.lineno, "os.fdopen(write)"))
            elif func.attr in ALWAYS or (owner, func.attr) in ON_MODULE:
                found.append((node.lineno, f"{owner or '...'}.{func.attr}"))
            elif func.attr == "replace" and len(node.args) == 1 and not node.keywords:
                # Path.replace(target); str.replace always takes two arguments
                found.append((node.lineno, "....replace"))
            elif func.attr == "export" and isinstance(func.value, ast.Attribute):
                if func.value.attr == "onnx":  # torch.onnx.export(model, args, path)
                    found.append((node.lineno, "torch.onnx.export"))
            elif func.attr == "open" and WRITE_MODES & set(_mode(node, 0)):
                found.append((node.lineno, "....open(write)"))
        elif isinstance(func, ast.Name):
            if func.id == "open" and WRITE_MODES & set(_mode(node)):
                found.append((node.lineno, "open(write)"))
            elif func.id in {"rmtree", "copytree", "copyfile", "mkdtemp", "mkstemp"}:
                found.append((node.lineno, func.id))
    return found


def test_no_destructive_call_outside_the_gateway() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.is_relative_to(GATEWAY):
            continue
        text = path.read_text()
        for line, call in destructive_calls(ast.parse(text, filename=str(path)), text):
            offenders.append(f"{path.relative_to(SRC.parent)}:{line}: {call}")
    assert not offenders, "write, move, link or delete outside tritonlab/gateway/:\n" + "\n".join(
        offenders
    )


@pytest.mark.parametrize(
    "source",
    [
        "shutil.rmtree(p)",
        "p.unlink()",
        "os.remove(p)",
        "os.replace(a, b)",
        "a.replace(b)",
        "os.link(a, b)",
        "shutil.copytree(a, b)",
        "shutil.move(a, b)",
        "p.write_text('x')",
        "open(p, 'w')",
        "open(p, mode='ab')",
        "p.open('wb')",
        "onnx.save(m, p)",
        "torch.onnx.export(m, x, p)",
        "tempfile.mkdtemp()",
        "p.mkdir(parents=True)",
        "os.open(p, os.O_WRONLY | os.O_CREAT)",
        "os.fdopen(fd, 'wb')",
        "cache.write_text(p, 'x')",
    ],
)
def test_the_scan_sees_each_kind_of_destructive_call(source: str) -> None:
    assert destructive_calls(ast.parse(source)), source


@pytest.mark.parametrize(
    "source",
    [
        "s.replace('a', 'b')",
        "open(p)",
        "open(p, 'rb')",
        "p.read_text()",
        "d.copy()",
        "os.open(p, os.O_RDONLY)",
        "gateway.write_text(p, 'x')",
        "self._gate.remove_tree(p)",
        "gateway.write_file(p, lambda t: onnx.save(m, str(t)))",
        "fig.savefig(buffer)  # gateway: into memory, then gateway.write_bytes",
    ],
)
def test_the_scan_leaves_reads_and_gateway_calls_alone(source: str) -> None:
    assert not destructive_calls(ast.parse(source), source), source
