"""Portable paths: what a run folder stores instead of this machine's absolute paths.

Results, reports and scripts are committed and copied to other machines, so no path of the
machine that produced them is written as it is. ``portable_path`` rewrites a path against a few
named roots, the longest that contains it winning:

- the run folder -> a path relative to it (the folder itself -> ``.``);
- tritonlab's cache folder (the prepared tritonserver) -> ``$TRITONLAB_CACHE``;
- the Python environment tritonlab runs in (``sys.prefix`` of a virtualenv) -> ``$VIRTUAL_ENV``
  (``$CONDA_PREFIX`` in a conda environment);
- the home folder -> ``$HOME``.

Nothing is lost: ``expand_path`` turns a portable path back into this machine's path, and
``python3 -m tritonlab.locate server --shell`` prints the variables' values on any machine.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from tritonlab import gateway
from tritonlab.run_layout import MODELS_DIR

CACHE_VAR = "TRITONLAB_CACHE"
VENV_VAR = "VIRTUAL_ENV"
CONDA_VAR = "CONDA_PREFIX"
HOME_VAR = "HOME"
VARIABLES = (CACHE_VAR, VENV_VAR, CONDA_VAR, HOME_VAR)

# How reports explain the variables in the commands they show.
PATHS_NOTE = (
    "Paths in these commands are relative to this folder; `$TRITONLAB_CACHE` is tritonlab's "
    "cache folder (the prepared tritonserver) and `$VIRTUAL_ENV` the Python environment "
    "tritonlab ran in: `python3 -m tritonlab.locate server` prints their values on a machine."
)

StrPath = str | os.PathLike[str]
RunDirs = StrPath | Iterable[StrPath] | None


def cache_root() -> Path:
    """tritonlab's cache folder: ``$TRITONLAB_CACHE``, else ``$XDG_CACHE_HOME/tritonlab``."""
    if explicit := os.environ.get(CACHE_VAR):
        return Path(os.path.abspath(os.path.expanduser(explicit)))
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tritonlab"


def variable_values() -> dict[str, str]:
    """Each named root's value on this machine (what the variables in portable paths mean):
    the Python environment tritonlab runs in only where it is not the base one."""
    values = {CACHE_VAR: str(cache_root()), HOME_VAR: str(Path.home())}
    conda = os.environ.get(CONDA_VAR)
    if sys.prefix != sys.base_prefix:
        values[VENV_VAR] = sys.prefix
    elif conda and os.path.realpath(conda) == os.path.realpath(sys.prefix):
        values[CONDA_VAR] = sys.prefix
    return values


def _roots(run_dir: RunDirs) -> list[tuple[str, str]]:
    """(absolute prefix, replacement) pairs, longest prefix first; '' means relative."""
    dirs = [run_dir] if isinstance(run_dir, str | os.PathLike) else run_dir or []
    named = [(os.fspath(p), "") for p in dirs]
    named += [(value, f"${name}") for name, value in variable_values().items()]
    roots: dict[str, str] = {}
    for prefix, replacement in named:
        for form in (os.path.abspath(prefix), os.path.realpath(prefix)):
            if form != os.sep and form not in roots:
                roots[form] = replacement
    return sorted(roots.items(), key=lambda item: len(item[0]), reverse=True)


def _rewrite(absolute: str, roots: list[tuple[str, str]]) -> str | None:
    for prefix, replacement in roots:
        if absolute == prefix or absolute.startswith(prefix + os.sep):
            rest = absolute[len(prefix) :].lstrip(os.sep)
            if not replacement:
                return rest or "."
            return f"{replacement}/{rest}" if rest else replacement
    return None


def portable_path(path: StrPath, run_dir: RunDirs = None, cwd: StrPath | None = None) -> str:
    """``path`` written without this machine's absolute prefixes (see the module docstring).

    A relative ``path`` is taken relative to ``cwd`` when one is given and rewritten only when
    it lies inside the run folder; without ``cwd`` it is returned as it is.
    """
    text = os.fspath(path)
    roots = _roots(run_dir)
    if not os.path.isabs(text):
        if cwd is None or not run_dir or os.path.normpath(text) != text:
            return text
        absolute = os.path.join(os.path.abspath(cwd), text)
        inside = [r for r in roots if r[1] == ""]
        return _rewrite(absolute, inside) or _rewrite(os.path.realpath(absolute), inside) or text
    normal = os.path.normpath(text)
    return _rewrite(normal, roots) or _rewrite(os.path.realpath(normal), roots) or text


def _looks_like_path(value: str) -> bool:
    return "/" in value and "://" not in value


def portable_command(
    command: Sequence[str], run_dir: RunDirs = None, cwd: StrPath | None = None
) -> list[str]:
    """``command`` with every path argument (``PATH`` or ``--flag=PATH``) made portable."""
    out = []
    for arg in command:
        if arg.startswith("-") and "=" in arg:
            flag, value = arg.split("=", 1)
            if _looks_like_path(value):
                arg = f"{flag}={portable_path(value, run_dir, cwd)}"
        elif _looks_like_path(arg):
            arg = portable_path(arg, run_dir, cwd)
        out.append(arg)
    return out


def portable_text(text: str, run_dir: RunDirs = None) -> str:
    """Free text (a log) with every absolute path under a named root rewritten."""
    for prefix, replacement in _roots(run_dir):
        pattern = re.compile(re.escape(prefix) + r"(/+|(?![\w.\-]))")

        def sub(match: re.Match[str], replacement: str = replacement) -> str:
            if match.group(1):
                return f"{replacement}/" if replacement else ""
            return replacement or "."

        text = pattern.sub(sub, text)
    return text


def portable_file(path: Path, run_dir: RunDirs = None) -> None:
    """Rewrite a text file (e.g. ``server/tritonserver.log``) in place with portable paths."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    rewritten = portable_text(text, run_dir)
    if rewritten != text:
        gateway.write_text(path, rewritten)


_VARIABLE = re.compile(r"^\$\{?(" + "|".join(VARIABLES) + r")\}?(?=/|$)")


def expand_path(path: str, run_dir: StrPath | None = None) -> str:
    """The inverse of ``portable_path`` on this machine: variables expanded, run folder joined.

    The variables take their values from the environment, else from ``variable_values()``.
    """
    if match := _VARIABLE.match(path):
        name = match.group(1)
        value = os.environ.get(name) or variable_values().get(name)
        return path if value is None else value + path[match.end() :]
    if run_dir is not None and not os.path.isabs(path):
        return os.path.normpath(os.path.join(os.fspath(run_dir), path))
    return path


def shell_word(arg: str) -> str:
    """``arg`` quoted for a shell, a leading ``$VARIABLE`` left to expand."""
    flag, sep, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
    match = _VARIABLE.match(value)
    if not match:
        return shlex.quote(arg)
    rest = value[match.end() :]
    return (
        (shlex.quote(flag + sep) if flag else "")
        + f'"${match.group(1)}"'
        + (shlex.quote(rest) if rest else "")
    )


def shell_join(command: Sequence[str]) -> str:
    """A portable command as one line to paste into a shell (variables expand, nothing else)."""
    return " ".join(shell_word(a) for a in command)


def recorded_run_dir(server_command: Sequence[str] | None) -> Path | None:
    """The run folder a stored server command was started in (its repository's parent)."""
    for arg in server_command or ():
        if arg.startswith("--model-repository="):
            repo = arg.split("=", 1)[1]
            if os.path.isabs(repo) and Path(repo).name == MODELS_DIR:
                return Path(repo).parent
    return None
