"""The node side of a cluster run: one ``NodeMeasurer`` per node, its own server, its cells.

The driver sends the model's bytes, the plan and the inputs once (``prepare``); the measurer
lays out the same repository in a folder of its own, starts the server there on loopback
(``opening.open_session``: the manifest and answer checks of a local run) and then measures the
cells it is sent one at a time, exactly as a local run does (the same ``CellSession``, so the
same fault recovery: a server that dies is restarted on this node). Each answer carries the
cell and the files the cell wrote (perf_analyzer's CSV and output), which the driver stores in
its own run folder. Nothing here imports Ray: the driver wraps the class as a Ray actor.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tritonlab import gateway
from tritonlab.experiments.engine import ClassicEngine
from tritonlab.experiments.opening import SessionRequest, open_session
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.experiments.session import CellSession
from tritonlab.experiments.store import CellResult
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import OnnxModelInfo, inspect_onnx
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.procenv import child_environment
from tritonlab.repository.layout import RepositoryModel, add_model, build_repository
from tritonlab.repository.variants import ServingVariant
from tritonlab.run_layout import RunLayout
from tritonlab.server.launch import ServerOptions
from tritonlab.server.process import TritonServer

from .nodes import NodeFacts
from .wire import NodeAnswerError, contained_name, decode, encode, encode_answer

WORK_PREFIX = "tritonlab-node-"
# What stays on the node: its own cells (the driver writes them, with the node named), its
# manifest, checks and faults (the driver merges them), and its server's log.
_HERE = RunLayout(Path())
_KEPT_HERE = (
    f"{_HERE.relative(_HERE.cells)}/",
    _HERE.relative(_HERE.manifest),
    _HERE.relative(_HERE.infer_check),
    _HERE.relative(_HERE.faults),
    f"{_HERE.relative(_HERE.server)}/",
)


@dataclass(frozen=True)
class Prepared:
    """What a node reports once its server is up and its answers are checked."""

    checks: list[dict[str, Any]]
    server_version: str
    server_command: tuple[str, ...] | None

    def to_wire(self) -> bytes:
        """The report as JSON bytes for the driver."""
        command = None if self.server_command is None else list(self.server_command)
        return encode(
            {
                "checks": self.checks,
                "server_version": self.server_version,
                "server_command": command,
            }
        )

    @classmethod
    def from_wire(cls, raw: object, what: str) -> Prepared:
        """A node's report, checked (``wire.py``)."""
        data = decode(raw, what)
        checks, command = data.get("checks", []), data.get("server_command")
        if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
            raise NodeAnswerError(f"{what}: checks must be a list of objects")
        if command is not None and not (
            isinstance(command, list) and all(isinstance(a, str) for a in command)
        ):
            raise NodeAnswerError(f"{what}: server_command must be a list of strings")
        return cls(
            checks, str(data.get("server_version", "")), None if command is None else tuple(command)
        )


# Watches the measurer's process; once it is gone (killed by Ray, its driver gone, Ctrl-C), it
# kills the server's whole process group: tritonserver and its backend stubs, which would
# otherwise outlive it (the server dies with its parent, its stubs only notice much later).
# It is started through a shell that exits at once, so it is not the measurer's child: Ray
# kills a dead worker's children, and would take the reaper with them.
REAPER = """
import os, signal, sys, time
parent, pgid_file = int(sys.argv[1]), sys.argv[2]
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False
while alive(parent):
    time.sleep(0.2)
try:
    os.killpg(int(open(pgid_file).read()), signal.SIGKILL)
except (OSError, ValueError):
    pass
"""


def remove_stale_work(root: Path) -> None:
    """Work folders of measurers whose process is gone (a node killed mid-run) are removed."""
    for folder in root.glob(f"{WORK_PREFIX}*"):
        match = re.match(rf"{WORK_PREFIX}(\d+)-", folder.name)
        if match and not psutil.pid_exists(int(match.group(1))):
            gateway.remove_tree(folder)


class NodeMeasurer:
    """Measures the cells the driver sends, on this node's own server (one at a time)."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._session: CellSession | None = None
        self._models: dict[str, RepositoryModel] = {}
        self._loaded: RepositoryModel | None = None
        self._work: Path | None = None
        self._gate: gateway.Gateway | None = None
        self._info: OnnxModelInfo | None = None
        self._inputs: ModelInputs | None = None
        self._seen: dict[str, tuple[int, int]] = {}
        self._faults_sent = 0
        self._reaper: int | None = None  # its pid

    def describe(self, node_id: str, address: str) -> bytes:
        """This node's facts, as JSON bytes (``NodeFacts.from_dict`` on the driver)."""
        return encode(NodeFacts.current(node_id, address, locate_perf_analyzer().version).to_dict())

    def prepare(
        self,
        model_bytes: bytes,
        onnx_name: str,
        plan: ExperimentPlan,
        inputs: ModelInputs,
        options: ServerOptions,
        fingerprint: str,
    ) -> bytes:
        """Write the model, build its repository, start and check the server; a ``Prepared``."""
        temp = gateway.open_root(tempfile.gettempdir())  # the node's own, for its stale folders
        remove_stale_work(temp.root)
        self._gate = gateway.temporary_root(f"{WORK_PREFIX}{os.getpid()}-", temp.root)
        self._work = self._gate.root
        onnx = self._work / contained_name(onnx_name)
        gateway.write_bytes(onnx, model_bytes)
        info = inspect_onnx(onnx)
        run_dir = self._work / "run"
        models = build_repository(
            RunLayout(run_dir).models, info, plan.model_name, list(plan.variants)
        )
        self._models = {m.variant.name: m for m in models}
        self._info, self._inputs = info, inputs
        session = self._stack.enter_context(
            open_session(
                SessionRequest(
                    options, run_dir, info, inputs, plan, fingerprint, locate_perf_analyzer()
                ),
                models[0],
                engine_models=models,
            )
        )
        self._session = session
        self._watch_server()
        self._new_files()  # what is there now stays on the node
        server = session.manifest.server
        return Prepared(
            [c.to_dict() for c in session.checks], server.version, server.command
        ).to_wire()

    def add_variant(self, variant: ServingVariant) -> None:
        """A configuration the plan did not have at the start (a tune's next step)."""
        if variant.name in self._models:
            return
        assert self._work is not None and self._info is not None
        session = self._require()
        self._models[variant.name] = add_model(
            RunLayout(self._work / "run").models, self._info, session.plan.model_name, variant
        )

    def unload_current(self) -> None:
        """Unload the loaded configuration, if any, ignoring errors."""
        if self._loaded is not None:
            self._require().unload(self._loaded, quietly=True)
            self._loaded = None

    def measure(self, variant_name: str, load: LoadPoint, repeat: int) -> bytes:
        """Measure one cell of ``variant_name`` (loading it first); the answer as wire bytes."""
        session = self._require()
        model = self._models[variant_name]
        if self._loaded is not model:
            if self._loaded is not None:
                session.unload(self._loaded)
                self._loaded = None
            session.load(model)
            self._loaded = model
        try:
            cell = session.measure(model, load, repeat)
        except BaseException:
            session.unload(model, quietly=True)
            self._loaded = None
            raise
        return self._answer(cell)

    def serving_path(self) -> bytes:
        """The serving-path probes (``ClassicEngine.measure_serving_path``), measured here."""
        session = self._require()
        if self._loaded is not None:
            session.unload(self._loaded)
            self._loaded = None
        assert self._info is not None
        ClassicEngine(session).measure_serving_path(self._info)
        return self._answer(None)

    def profile(self) -> bytes:
        """``operators.json`` of this node (``analysis.operator_record``)."""
        from tritonlab.experiments.operator_record import record_operator_profile

        session = self._require()
        assert self._info is not None and self._work is not None and self._inputs is not None
        record_operator_profile(self._work / "run", self._info, session.plan, self._inputs)
        return self._answer(None)

    def close(self) -> None:
        """Unload, stop the server, remove this node's work folder."""
        try:
            if self._session is not None and self._loaded is not None:
                self._session.unload(self._loaded, quietly=True)
            self._stack.close()
        finally:
            if self._reaper is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._reaper, signal.SIGKILL)
                self._reaper = None
            if self._gate is not None:
                gateway.remove_temporary(self._gate)
                self._gate = None
            self._session = None

    def _watch_server(self) -> None:
        """Record the server's process group (again after a restart); start the reaper once."""
        assert self._work is not None
        server = self._require().server
        pid = server.pid if isinstance(server, TritonServer) else None
        if pid is None:
            return
        pgid_file = self._work / "server.pgid"
        gateway.write_text(pgid_file, str(pid))  # the server leads its own session (process group)
        if self._reaper is None:
            launcher = subprocess.Popen(
                [
                    "/bin/sh",
                    "-c",
                    '"$0" -c "$1" "$2" "$3" </dev/null >/dev/null 2>&1 & echo $!',
                    *(sys.executable, REAPER, str(os.getpid()), str(pgid_file)),
                ],
                start_new_session=True,
                env=child_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            out, _ = launcher.communicate(timeout=30)
            self._reaper = int(out.strip())

    def _require(self) -> CellSession:
        if self._session is None:
            raise RuntimeError("prepare() must run before measuring")
        return self._session

    def _answer(self, cell: CellResult | None) -> bytes:
        """The answer as JSON bytes: the driver parses and checks it (``wire.py``)."""
        session = self._require()
        self._watch_server()
        faults = [f.to_dict() for f in session.recovery.faults[self._faults_sent :]]
        self._faults_sent = len(session.recovery.faults)
        return encode_answer(cell, self._new_files(), faults)

    def _new_files(self) -> dict[str, bytes]:
        """Files of the run folder written or changed since the last call (not ``_KEPT_HERE``)."""
        assert self._work is not None
        run_dir = self._work / "run"
        found: dict[str, bytes] = {}
        for path in sorted(run_dir.rglob("*")):
            if not path.is_file() or path.name.startswith("."):
                continue
            rel = path.relative_to(run_dir).as_posix()
            if rel.startswith(_KEPT_HERE):
                continue
            stat = path.stat()
            stamp = (stat.st_size, stat.st_mtime_ns)
            if self._seen.get(rel) != stamp:
                self._seen[rel] = stamp
                found[rel] = path.read_bytes()
        return found
