"""The driver side of a cluster run on Ray: one measurer per node, whole rounds per node.

What keeps the numbers valid:

- A node takes part when it offers the ``tritonlab`` resource (``nodes.RESOURCE``). It gets
  exactly one ``NodeMeasurer`` actor, pinned to it and holding that resource, and the actor
  measures one cell at a time: two measurements never share a host.
- A round (every configuration once at every load) is measured whole on one node, and the
  verdicts pair cells by (node, round) (``CellResult.block``): the node is a blocking factor,
  configurations are only ever paired with cells of the same host.
- All nodes must be of one hardware type and run the driver's versions (``nodes.check_nodes``).
- The driver's run folder is the one source of truth: each cell is written there atomically
  (with the node that measured it) the moment it arrives, so a resume works as locally.
- A node lost mid-cell (its host died, its raylet was killed): that cell and the rest of its
  round are queued again for the next free node, and the loss is recorded as a fault. The
  cells of such a round are then paired within each node only.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritonlab import gateway
from tritonlab.client.infer import InferCheck
from tritonlab.errors import ConfigError, ServerError, TritonlabError
from tritonlab.experiments.manifest import FaultRecord, Manifest, ServerRecord, utc_now
from tritonlab.experiments.opening import SessionRequest, new_manifest
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.experiments.recovery import load_faults
from tritonlab.experiments.session import Progress, Round
from tritonlab.experiments.store import CellResult, save_cell, save_manifest
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.records import RecordError
from tritonlab.repository.layout import RepositoryModel
from tritonlab.result_files import write_result
from tritonlab.run_layout import RunLayout, cell_id
from tritonlab.server.process import LOOPBACK_HOSTS

from .cluster import connect, measuring_nodes
from .measurer import NodeMeasurer, Prepared
from .nodes import RESOURCE, NodeFacts, NodeRecord, check_nodes, check_server_versions
from .wire import Answer, NodeAnswerError, contained, decode_answer

CLOSE_TIMEOUT_S = 120.0
WAIT_SLICE_S = 1.0
ALL_LOST = (
    "every Ray node measuring this run was lost; finished cells are kept; run the same command "
    "to resume when nodes are back"
)


@dataclass
class _Node:
    """A measuring node as the driver sees it."""

    record: NodeRecord
    actor: Any
    alive: bool = True

    @property
    def label(self) -> str:
        return self.record.facts.label


def _node_checks(node: _Node, prepared: Prepared) -> list[InferCheck]:
    """The correctness checks a node reported (untrusted), each naming the node."""
    try:
        return [replace(InferCheck.from_dict(c), node=node.label) for c in prepared.checks]
    except RecordError as exc:
        raise NodeAnswerError(
            f"node {node.label}: its checks are not valid records ({exc})"
        ) from None


class ClusterFaults:
    """The driver's faults file: nodes lost, and every fault a node met and recovered from."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.faults = load_faults(run_dir)
        self.failed_cells: list[str] = []

    def add(self, record: FaultRecord) -> None:
        """Record ``record`` and rewrite ``results/faults.json`` with every fault so far."""
        self.faults.append(record)
        write_result(RunLayout(self.run_dir).faults, [f.to_dict() for f in self.faults])


class RaySession:
    """Measures rounds on the cluster's nodes; the driver-side twin of ``CellSession``."""

    def __init__(
        self,
        ray: Any,
        nodes: list[_Node],
        plan: ExperimentPlan,
        run_dir: Path,
        manifest: Manifest,
        checks: list[InferCheck],
        progress: Progress,
        deadline: float | None,
    ) -> None:
        self.ray, self.nodes, self.plan, self.run_dir = ray, nodes, plan, run_dir
        self.manifest, self.checks = manifest, checks
        self.progress, self.deadline = progress, deadline
        self.recovery = ClusterFaults(run_dir)
        self.measured: list[str] = []

    def over_budget(self) -> bool:
        """True once the run's time budget (if any) has passed."""
        return self.deadline is not None and time.monotonic() > self.deadline

    def measure_rounds(self, rounds: Sequence[Round], ids: list[str], note: str = "") -> bool:
        """Spread ``rounds`` over the nodes, a whole round to one node; False when the time
        budget ran out first (what was measured is kept)."""
        ray = self.ray
        queue: deque[list[tuple[RepositoryModel, LoadPoint, int]]] = deque(
            [(m, ld, r) for m, cells in round_ for ld, r in cells] for round_ in rounds
        )
        running: dict[Any, tuple[_Node, list[tuple[RepositoryModel, LoadPoint, int]]]] = {}
        idle = [n for n in self.nodes if n.alive]
        stopped = False

        def submit(node: _Node, unit: list[tuple[RepositoryModel, LoadPoint, int]]) -> None:
            model, load, repeat = unit[0]
            cid = cell_id(model.variant.name, load.key, repeat + 1)
            self.progress.tell(f"{cid} on {node.label}{note}")
            ref = node.actor.measure.remote(model.variant.name, load, repeat)
            running[ref] = (node, unit)

        while queue or running:
            while idle and queue and not stopped:
                if self.over_budget():
                    stopped = True
                    break
                submit(idle.pop(0), queue.popleft())
            if not running:
                break
            ready, _ = ray.wait(list(running), num_returns=1, timeout=WAIT_SLICE_S)
            if not ready:
                continue
            node, unit = running.pop(ready[0])
            model, load, repeat = unit[0]
            cid = cell_id(model.variant.name, load.key, repeat + 1)
            try:
                raw = ray.get(ready[0])
            except ray.exceptions.RayTaskError as exc:
                raise _cause(exc, node) from None
            except ray.exceptions.RayError as exc:
                self._lose(node, cid, exc)
                queue.appendleft(unit)
                if not any(n.alive for n in self.nodes):
                    raise ServerError(ALL_LOST) from exc
                continue
            self.progress.done += 1
            self._store(node, cid, self._checked(node, raw, cid), ids)
            if len(unit) > 1 and not self.over_budget():
                submit(node, unit[1:])
            else:
                stopped = stopped or len(unit) > 1
                idle.append(node)
        return not stopped

    def measure_serving_path(self, info: OnnxModelInfo) -> None:
        """The serving-path probes, on the first node still alive (the next if it is lost)."""
        del info  # the node has its own copy of the model
        self._on_one_node("serving_path", "serving-path probes", serving_path=True)

    def profile_operators(self) -> None:
        """The operator profile and in-process timings (``operators.json``), taken on a node:
        the cost model's terms must come from the machine the cells were measured on."""
        self._on_one_node("profile", "operator profile", profiled=True)

    def _on_one_node(self, method: str, what: str, **done: Any) -> None:
        for node in [n for n in self.nodes if n.alive]:
            try:
                raw = self.ray.get(getattr(node.actor, method).remote())
            except self.ray.exceptions.RayTaskError as exc:
                raise _cause(exc, node) from None
            except self.ray.exceptions.RayError as exc:
                self._lose(node, what, exc)
                continue
            self._store(node, "", self._checked(node, raw, None), [])
            node.record = replace(node.record, **done)
            self._save_nodes()
            return

    def save_manifest(self, **changes: Any) -> None:
        """Apply ``changes`` to the manifest and write it to the run folder."""
        self.manifest = replace(self.manifest, **changes)
        save_manifest(self.run_dir, self.manifest)

    # A tune's search measures one cell at a time, each step decided by the last: it runs on
    # one node (the next one if that node is lost), through the calls a CellSession offers.
    server: Any = None  # no local server: tune's liveness check does not apply

    def load(self, model: RepositoryModel) -> None:
        """Add ``model``'s configuration to the node that measures next (it loads it to measure)."""
        self.ray.get(self._tune_node().actor.add_variant.remote(model.variant))

    def unload(self, model: RepositoryModel, quietly: bool = False) -> None:
        """Ask the first live node to unload its configuration (raising unless ``quietly``)."""
        del model
        alive = [n for n in self.nodes if n.alive]
        if not alive:
            return
        try:
            self.ray.get(alive[0].actor.unload_current.remote())
        except Exception:
            if not quietly:
                raise

    def measure(
        self, model: RepositoryModel, load: LoadPoint, repeat: int, note: str = ""
    ) -> CellResult | None:
        """Measure one cell on the first live node and store its files; a lost node passes it on.
        None: the node gave it up; ``ServerError``: every node is lost."""
        cid = cell_id(model.variant.name, load.key, repeat + 1)
        while True:
            node = self._tune_node()
            self.progress.tell(f"{cid} on {node.label}{note}")
            try:
                self.ray.get(node.actor.add_variant.remote(model.variant))
                raw = self.ray.get(node.actor.measure.remote(model.variant.name, load, repeat))
            except self.ray.exceptions.RayTaskError as exc:
                raise _cause(exc, node) from None
            except self.ray.exceptions.RayError as exc:
                self._lose(node, cid, exc, "measuring the cell again on another node")
                continue
            self.progress.done += 1
            answer = self._checked(node, raw, cid)
            self._store(node, cid, answer, [])
            return None if answer.cell is None else replace(answer.cell, node=node.label)

    def _tune_node(self) -> _Node:
        alive = [n for n in self.nodes if n.alive]
        if not alive:
            raise ServerError(ALL_LOST)
        return alive[0]

    def _checked(self, node: _Node, raw: object, cid: str | None) -> Answer:
        """A node's answer, parsed and checked (``wire.py``): a malformed one stops the run
        with the node named, before anything of it is written."""
        return decode_answer(raw, f"node {node.label}", self.run_dir, cid or None)

    def _store(self, node: _Node, cid: str, answer: Answer, ids: list[str]) -> None:
        for rel, data in answer.files.items():
            path = contained(self.run_dir, rel, f"node {node.label}")
            gateway.write_bytes(path, data)
        for fault in answer.faults:
            record = FaultRecord.from_dict(fault)
            self.recovery.add(replace(record, what=f"on node {node.label}: {record.what}"))
            if record.action.startswith("gave up"):
                self.recovery.failed_cells.append(record.cell)
        if answer.faults:
            self.save_manifest(faults=tuple(self.recovery.faults))
        if answer.cell is not None:
            save_cell(self.run_dir, replace(answer.cell, node=node.label))
            self.measured.append(cid)
            ids.append(cid)

    def _lose(
        self,
        node: _Node,
        what: str,
        exc: BaseException,
        action: str = "queued the cell and the rest of its round again, for another node",
    ) -> None:
        node.alive = False
        why = type(exc).__name__
        node.record = replace(node.record, lost_utc=utc_now(), lost_why=why)
        lost = f"Ray node {node.label} was lost ({why})"
        self.recovery.add(FaultRecord(what, lost, action, (), utc_now()))
        self._save_nodes()
        with contextlib.suppress(Exception):
            self.ray.kill(node.actor, no_restart=True)

    def _save_nodes(self) -> None:
        self.save_manifest(
            nodes=tuple(n.record.entry() for n in self.nodes), faults=tuple(self.recovery.faults)
        )


def _cause(exc: Any, node: _Node) -> BaseException:
    """A node's own error (a tritonlab one keeps its one-line message), naming the node."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, TritonlabError):
        return type(cause)(f"on Ray node {node.label}: {cause}")
    return ServerError(f"on Ray node {node.label}: {' '.join(str(exc).split())[:400]}")


@contextlib.contextmanager
def open_ray_session(
    address: str, request: SessionRequest, max_nodes: int | None = None
) -> Iterator[RaySession]:
    """Connect, check every measuring node, start a server on each, and yield a session that
    spreads rounds over them; on the way out (also on Ctrl-C) every node's server is stopped."""
    options, info, plan = request.options, request.info, request.plan
    if options.url:
        raise ConfigError(
            "--ray starts a server on every node; --url measures a service that runs already: "
            "pass one of them"
        )
    if options.host not in LOOPBACK_HOSTS:
        raise ConfigError(
            f"--ray with --host {options.host}: every node's server stays on its own loopback "
            "(TRITONLAB_API_KEY is never sent to a Ray node); leave out --host"
        )
    # Never pickled into Ray's object store, nor onto a node: the key stays in this process.
    options = replace(options, api_key=None)
    ray = connect(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    found = measuring_nodes(ray, address)[:max_nodes]
    remote = ray.remote(NodeMeasurer)
    actors = [
        remote.options(
            num_cpus=0,
            resources={RESOURCE: 1},
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
        ).remote()
        for n in found
    ]
    nodes: list[_Node] = []
    clean_exit = False
    try:
        described = ray.get(
            [
                a.describe.remote(n["NodeID"], n.get("NodeManagerAddress", ""))
                for a, n in zip(actors, found, strict=True)
            ]
        )
        facts = [NodeFacts.reported(r, n["NodeID"]) for r, n in zip(described, found, strict=True)]
        driver = NodeFacts.current("driver", "driver", request.perf_install.version)
        check_nodes(driver, facts)
        model = info.path.read_bytes()
        answers = ray.get(
            [
                a.prepare.remote(
                    model, info.path.name, plan, request.inputs, options, request.fingerprint
                )
                for a in actors
            ]
        )
        prepared = [
            Prepared.from_wire(r, f"node {f.label}") for r, f in zip(answers, facts, strict=True)
        ]
        nodes = [
            _Node(NodeRecord(f, p.server_version), a)
            for f, p, a in zip(facts, prepared, actors, strict=True)
        ]
        check_server_versions([n.record for n in nodes])
        node_checks = [_node_checks(n, p) for n, p in zip(nodes, prepared, strict=True)]
        checks = [replace(c, node=None) for c in node_checks[0]]
        first = prepared[0]
        manifest = new_manifest(
            request,
            facts[0].machine,
            ServerRecord(
                source=f"Ray cluster at {address}: {len(nodes)} nodes, each its own "
                f"{options.describe} on loopback",
                version=first.server_version,
                command=first.server_command,
                http_url="",
                grpc_url="",
            ),
        )
        manifest = replace(manifest, nodes=tuple(n.record.entry() for n in nodes))
        run_dir = request.run_dir
        session = RaySession(
            ray, nodes, plan, run_dir, manifest, checks, request.progress, request.deadline
        )
        session.save_manifest()
        every_check = [c.to_dict() for mine in node_checks for c in mine]
        write_result(RunLayout(run_dir).infer_check, every_check)
        gateway.write_text(RunLayout(run_dir).server_note, _server_note(nodes))
        yield session
        clean_exit = True
    finally:
        _close(ray, actors, graceful=clean_exit)


def _server_note(nodes: list[_Node]) -> str:
    lines = ["Each Ray node ran its own tritonserver; their logs stayed on the nodes.", ""]
    lines += [f"- {n.label} ({n.record.facts.hostname}): {n.record.server_version}" for n in nodes]
    return "\n".join(lines) + "\n"


def _close(ray: Any, actors: list[Any], graceful: bool) -> None:
    """Stop every node's server: politely after a finished run, at once after an error or
    Ctrl-C (the actor's process goes, and its server and perf_analyzer die with it)."""
    if graceful:
        pending = [a.close.remote() for a in actors]
        with contextlib.suppress(Exception):
            ray.wait(pending, num_returns=len(pending), timeout=CLOSE_TIMEOUT_S)
    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)
