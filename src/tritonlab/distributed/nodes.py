"""What a measuring node is, and the checks that make its cells comparable with the others'.

Every node must run the same tritonlab, server and perf_analyzer as the driver (a mismatch is a
one-line error naming the node), and all nodes of one run must be of one hardware type: cells
of different machines are not comparable, so a run refuses a mixed set rather than pair them.
"""

from __future__ import annotations

import socket
from collections import defaultdict
from dataclasses import dataclass, fields

import tritonlab
from tritonlab.errors import ConfigError
from tritonlab.experiments.manifest import MachineInfo, NodeEntry, NodeIdentity, package_versions
from tritonlab.records import Record, RecordError

# The Ray resource a node offers to say "measure here"; one per node: one measurement a host.
RESOURCE = "tritonlab"
# Packages whose versions decide what is measured; each must match the driver's where both
# have it (the server and perf_analyzer come from the first two).
CHECKED_PACKAGES = ("nvidia-pytriton", "tritonclient", "onnxruntime", "openvino")


@dataclass(frozen=True)
class NodeFacts(NodeIdentity, Record):
    """A node as it describes itself before measuring anything (sent as JSON with its label;
    read back as untrusted input: a report that does not fit is refused)."""

    DERIVED = ("label",)

    @property
    def hardware(self) -> tuple[object, ...]:
        """What must be equal for two nodes' cells to be compared."""
        m = self.machine
        return (m.cpu_model, m.cpu_count_logical, m.cpu_affinity_count, m.gpus)

    @classmethod
    def current(cls, node_id: str, address: str, perf_analyzer_version: str) -> NodeFacts:
        """The facts of the node this runs on: host, machine, versions of the checked packages."""
        return cls(
            node_id=node_id,
            address=address,
            hostname=socket.gethostname(),
            machine=MachineInfo.current(),
            tritonlab_version=tritonlab.__version__,
            packages={k: v for k, v in package_versions().items() if k in CHECKED_PACKAGES},
            perf_analyzer_version=perf_analyzer_version,
        )

    @classmethod
    def reported(cls, raw: object, placed_on: str) -> NodeFacts:
        """A node's report of its facts (JSON bytes, untrusted), checked: a valid record, from
        the Ray node the measurer was placed on."""
        from .wire import NodeAnswerError, decode

        what = f"node {placed_on[:8]}"
        try:
            facts = cls.from_dict(decode(raw, what))
        except RecordError as exc:
            raise NodeAnswerError(f"{what}: its facts are not a valid record ({exc})") from None
        if facts.node_id != placed_on:
            raise NodeAnswerError(f"{what}: reported node id {facts.node_id!r}")
        return facts


@dataclass(frozen=True)
class NodeRecord:
    """A node in the manifest: its facts, its server, and whether (and when) it was lost."""

    facts: NodeFacts
    server_version: str = ""
    lost_utc: str | None = None
    lost_why: str = ""
    serving_path: bool = False  # it measured the serving-path probes
    profiled: bool = False  # it took the operator profile and in-process timings

    def entry(self) -> NodeEntry:
        """The node as the manifest lists it: its facts, server version and what befell it."""
        identity = {f.name: getattr(self.facts, f.name) for f in fields(NodeIdentity)}
        return NodeEntry(
            **identity,
            server_version=self.server_version,
            lost_utc=self.lost_utc,
            lost_why=self.lost_why,
            serving_path=self.serving_path,
            profiled=self.profiled,
        )


def version_mismatch(driver: NodeFacts, node: NodeFacts) -> str | None:
    """What differs between ``node`` and the driver, in the error's words; None if nothing."""
    pairs = [("tritonlab", driver.tritonlab_version, node.tritonlab_version)]
    pairs.append(("perf_analyzer", driver.perf_analyzer_version, node.perf_analyzer_version))
    for name in CHECKED_PACKAGES:
        if name in driver.packages or name in node.packages:
            pairs.append((name, driver.packages.get(name, "none"), node.packages.get(name, "none")))
    for name, mine, theirs in pairs:
        if mine != theirs:
            return f"{name} {theirs}, the driver {mine}"
    return None


def check_nodes(driver: NodeFacts, nodes: list[NodeFacts]) -> None:
    """Refuse a node with other versions than the driver's, or nodes of several hardware types."""
    for node in nodes:
        if mismatch := version_mismatch(driver, node):
            raise ConfigError(
                f"Ray node {node.label} ({node.hostname}) has {mismatch}: install the same "
                f"tritonlab {driver.tritonlab_version} environment on every node "
                "(pip install 'tritonlab[ray]' from one lock file), then run again"
            )
    kinds: dict[tuple[object, ...], list[NodeFacts]] = defaultdict(list)
    for node in nodes:
        kinds[node.hardware].append(node)
    if len(kinds) > 1:
        described = "; ".join(
            f"{group[0].machine.cpu_model} x{group[0].machine.cores}"
            + (f" + {', '.join(group[0].machine.gpus)}" if group[0].machine.gpus else "")
            + f": {', '.join(n.label for n in group)}"
            for group in kinds.values()
        )
        raise ConfigError(
            f"the Ray nodes offering '{RESOURCE}' are of {len(kinds)} hardware types "
            f"({described}); cells of different machines are not comparable: offer the "
            f"'{RESOURCE}' resource on nodes of one type only"
        )


def check_server_versions(records: list[NodeRecord]) -> None:
    """Every node's running server must report the same version."""
    versions = {r.server_version for r in records}
    if len(versions) > 1:
        listed = ", ".join(f"{r.facts.label}: {r.server_version}" for r in records)
        raise ConfigError(
            f"the nodes' tritonservers differ ({listed}); install one server release on every "
            "node (or pass one --server-bin path that holds the same release everywhere)"
        )
