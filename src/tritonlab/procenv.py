"""How tritonlab starts binaries (tritonserver, perf_analyzer): environment, lifetime."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_PARENT_PID = os.getpid()  # read in the child after fork: still the parent's pid
# Secrets tritonlab reads from its own environment and hands to no child: not to tritonserver
# (nor the Python backend stubs it starts, which run a model's own model.py), perf_analyzer,
# nvidia-smi, git or a reaper. ``serve --host``'s key stays in tritonlab's memory.
SECRET_VARIABLES = ("TRITONLAB_API_KEY",)


def child_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) without ``SECRET_VARIABLES``: the
    environment of every process tritonlab starts."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if k not in SECRET_VARIABLES}


def environment_with_libraries(library_path: Iterable[Path]) -> dict[str, str]:
    """This process's environment with ``library_path`` put first on ``LD_LIBRARY_PATH``."""
    env = dict(os.environ)
    libs = [str(p) for p in library_path]
    if env.get("LD_LIBRARY_PATH"):
        libs.append(env["LD_LIBRARY_PATH"])
    if libs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
    return env


def die_with_parent() -> None:
    """``preexec_fn``: the child gets SIGKILL when tritonlab dies, however it dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    # The parent may have died before prctl took effect: then do not run at all. (Comparing
    # with the pid recorded in the parent, not with 1, keeps this right when tritonlab is PID 1.)
    if os.getppid() != _PARENT_PID:
        os._exit(1)


# Ctrl-C and SIGTERM raise KeyboardInterrupt in the main thread, but Python drops an exception
# raised while it runs an at-fork callback ("Exception ignored in: _releaseLock ...
# KeyboardInterrupt", seen when the signal landed while perf_analyzer was being started): the run
# went on measuring. The handlers therefore also set this flag, and the loops that wait on a
# child check it, so a swallowed interrupt is raised again a moment later. The dropped
# exception's traceback is not printed either (`_quiet_dropped_interrupt`): the user sees the
# one "interrupted" line the CLI prints when the interrupt is raised again.
_INTERRUPTED = False


def interrupt(signum: int, frame: object) -> None:
    """The SIGINT/SIGTERM handler: remember the interrupt, then raise it."""
    global _INTERRUPTED
    _INTERRUPTED = True
    raise KeyboardInterrupt(f"signal {signum}")


def _quiet_dropped_interrupt(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: a dropped KeyboardInterrupt is silent (it is raised again
    by `raise_if_interrupted`); anything else goes to Python's own hook."""
    if _INTERRUPTED and unraisable.exc_type is KeyboardInterrupt:
        return
    sys.__unraisablehook__(unraisable)


def install_interrupt_handlers() -> None:
    """SIGINT and SIGTERM (also when a non-interactive shell started tritonlab in the
    background with SIGINT ignored) take the same path as Ctrl-C: servers and perf_analyzer
    stopped, finished cells kept, one line, exit 130."""
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    sys.unraisablehook = _quiet_dropped_interrupt


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt again if an interrupt arrived and was swallowed."""
    if _INTERRUPTED:
        raise KeyboardInterrupt("interrupted")
