"""Helpers shared by the integration tests: process trees, the CLI entry point, test models.

Every check for leftover processes looks only at the process tree a test started itself
(psutil children of a pid it owns), never at every process on the machine: other work on the
same machine may run its own tritonserver and perf_analyzer.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

from tritonlab.repository.layout import RepositoryModel
from tritonlab.repository.variants import ServingVariant
from tritonlab.server.process import TritonServer

# Short perf_analyzer windows: in CI client and server share 2 cores.
WINDOW_MS = 800
STABILITY_PCT = 60.0
MAX_TRIALS = 6
# The flags every CLI run in these tests uses (one repeat, no adaptive rounds, short windows).
SHORT_RUN_FLAGS = [
    "--repeats",
    "1",
    "--max-repeats",
    "1",
    "--window-ms",
    str(WINDOW_MS),
    "--stability",
    "60",
]
# Tests of behaviour (models of every kind, faults, paths) need cells, not precise ones.
FAST_RUN_FLAGS = [
    "--repeats",
    "1",
    "--max-repeats",
    "1",
    "--window-ms",
    "400",
    "--stability",
    "80",
]
SERVED_PROCESS_NAMES = ("tritonserver", "perf_analyzer", "triton_python_backend_stub")

BASELINE = ServingVariant("baseline", "baseline (no batching, count=1)", max_batch_size=64)
BATCHING = ServingVariant(
    "batch_2ms_x1",
    "batching (2 ms, count=1)",
    dynamic_batching=True,
    max_queue_delay_us=2000,
    max_batch_size=64,
)

StartServer = Callable[..., TritonServer]


@dataclass(frozen=True)
class DemoRepository:
    """The demo model served as a baseline and as a dynamic-batching variant."""

    path: Path
    baseline: RepositoryModel
    batching: RepositoryModel


def tritonlab_command() -> list[str]:
    """The installed ``tritonlab`` entry point of the running environment."""
    beside = Path(sys.executable).parent / "tritonlab"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("tritonlab")
    if found:
        return [found]
    return [sys.executable, "-c", "from tritonlab.cli import main; main()"]


def cli_env() -> dict[str, str]:
    """A wide, colourless environment, so each CLI message stays on one line."""
    env = dict(os.environ)
    env.update({"COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"})
    # behaviour tests need the ceilings recorded, not precise: 1 s each instead of 3 s
    env.setdefault("TRITONLAB_CEILING_WINDOW_S", "1")
    env.pop("FORCE_COLOR", None)
    return env


def process_tree(pid: int) -> list[psutil.Process]:
    """``pid`` and all its descendants right now (empty if it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def living(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``processes`` still running (a zombie awaiting its reaper does not count).

    ``is_running`` also compares the start time, so a recycled pid is not mistaken for ours.
    """
    alive = []
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            continue
    return alive


def wait_gone(processes: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait until every process is gone; return the ones still running at the deadline."""
    deadline = time.monotonic() + timeout_s
    remaining = living(processes)
    while remaining and time.monotonic() < deadline:
        time.sleep(0.1)
        remaining = living(remaining)
    return remaining


def names(processes: list[psutil.Process]) -> list[str]:
    out = []
    for proc in processes:
        try:
            out.append(proc.name())
        except psutil.Error:
            out.append(f"pid {proc.pid}")
    return out


def describe(processes: list[psutil.Process]) -> str:
    return ", ".join(f"{p.pid}:{n}" for p, n in zip(processes, names(processes), strict=True))


def kill_tree(proc: subprocess.Popen[str]) -> None:
    """Last-resort cleanup of a subprocess a test started, and of everything below it."""
    for child in reversed(process_tree(proc.pid)):
        try:
            child.kill()
        except psutil.NoSuchProcess:
            continue
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def write_two_input_model(path: Path, features: int = 16, hidden: int = 8) -> None:
    """An ONNX model no other test uses: out = Relu(x @ W + y @ V), x and y [batch, features]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(
        rng.standard_normal((features, hidden)).astype(np.float32), name="W"
    )
    v = numpy_helper.from_array(
        rng.standard_normal((features, hidden)).astype(np.float32), name="V"
    )
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"]),
            helper.make_node("MatMul", ["y", "V"], ["yv"]),
            helper.make_node("Add", ["xw", "yv"], ["sum"]),
            helper.make_node("Relu", ["sum"], ["out"]),
        ],
        "two_inputs",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", features]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", hidden])],
        initializer=[w, v],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def write_renamed_input_model(path: Path, input_name: str, features: int = 256) -> None:
    """A [batch, features] -> [batch, 10] model whose single input is called ``input_name``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((features, 10)).astype(np.float32), name="W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", [input_name, "W"], ["output"])],
        "renamed_input",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", features])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])],
        initializer=[w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def run_cli(args: list[str], cwd: Path, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
    """``tritonlab ARGS`` to its end, stdout and stderr captured (a command that ends soon)."""
    return subprocess.run(
        [*tritonlab_command(), *args],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )


def start_cli(args: list[str], cwd: Path, tag: str) -> tuple[subprocess.Popen[str], Path, Path]:
    """``tritonlab ARGS`` in its own session, stdout and stderr to files named by ``tag``."""
    out, err = cwd / f"{tag}.stdout", cwd / f"{tag}.stderr"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(
            [*tritonlab_command(), *args],
            cwd=cwd,
            env=cli_env(),
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
    return proc, out, err


def stored_cells(out_dir: Path) -> dict[str, bytes]:
    """Every stored cell file of a run folder, by cell id."""
    return {p.stem: p.read_bytes() for p in (out_dir / "results" / "cells").glob("*.json")}


def wait_for(
    proc: subprocess.Popen[str],
    check: Callable[[], bool],
    what: str,
    timeout_s: float = 180,
    stderr: Path | None = None,
) -> None:
    """Poll ``check`` every 50 ms until it holds; fail if ``proc`` exits first (quoting the end
    of its ``stderr`` file, when given) or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if proc.poll() is not None:
            said = stderr.read_text(errors="replace")[-1500:] if stderr else ""
            raise AssertionError(f"tritonlab exited ({proc.returncode}) before {what}: {said}")
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s"
        time.sleep(0.05)


def named(proc: subprocess.Popen[str], fragment: str) -> list[psutil.Process]:
    """The processes under ``proc`` whose name holds ``fragment``."""
    tree = process_tree(proc.pid)
    return [p for p, n in zip(tree, names(tree), strict=True) if fragment in n]


def finish(proc: subprocess.Popen[str], timeout_s: float) -> int:
    """Wait for ``proc``; kill its tree if it outlives ``timeout_s``."""
    try:
        return proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            kill_tree(proc)
