"""The experiment log's "Where the cells ran": the cluster nodes, what each measured, and how
that bears on the verdicts (cells pair by node and round). Empty for a local run."""

from __future__ import annotations

from collections import defaultdict

from tritonlab.experiments.manifest import NodeEntry
from tritonlab.experiments.store import CellResult


def nodes_section(nodes: tuple[NodeEntry, ...], cells: list[CellResult]) -> list[str]:
    """The log's "Where the cells ran" section as markdown lines; [] for a local run."""
    if not nodes:
        return []
    by_node: dict[str, list[CellResult]] = defaultdict(list)
    for cell in cells:
        by_node[cell.node].append(cell)
    machine = nodes[0].machine
    lines = [
        "## Where the cells ran",
        "",
        f"Measured on a Ray cluster of {len(nodes)} nodes of one hardware type "
        f"({machine.cpu_model}, {machine.cpu_affinity_count} cores"
        + (f", {', '.join(machine.gpus)}" if machine.gpus else ", no GPU")
        + "). Each node ran its own tritonserver and perf_analyzer on its loopback, one cell at "
        "a time, and measured whole interleaved rounds; verdicts pair cells by node and round, "
        "so every comparison is between cells of one host.",
        "",
        "| node | host | cells | rounds | versions | notes |",
        "|---|---|---|---|---|---|",
    ]
    for node in nodes:
        label = node.label
        mine = by_node.get(label, [])
        rounds = sorted({c.repeat for c in mine})
        notes = []
        if node.lost_utc:
            notes.append(f"lost at {node.lost_utc} ({node.lost_why})")
        if node.serving_path:
            notes.append("measured the serving-path probes")
        if node.profiled:
            notes.append("took the operator profile and in-process timings")
        versions = (
            f"tritonserver {node.server_version}, perf_analyzer "
            f"{node.perf_analyzer_version}, tritonlab {node.tritonlab_version}"
        )
        lines.append(
            f"| {label} | {node.hostname} | {len(mine)} | "
            f"{', '.join(map(str, rounds)) or '-'} | {versions} | {'; '.join(notes) or '-'} |"
        )
    elsewhere = len(by_node.get("", []))
    split = sorted(
        r
        for r in {c.repeat for c in cells if c.node}
        if len({c.node for c in cells if c.node and c.repeat == r}) > 1
    )
    lines.append("")
    if split:
        lines += [
            "Round"
            + ("s " if len(split) > 1 else " ")
            + ", ".join(map(str, split))
            + " ran on more than one node (a node was lost, or a resume measured the rest "
            "elsewhere): their cells are paired within each node only.",
            "",
        ]
    if elsewhere:
        lines += [f"{elsewhere} cells were measured locally, not on the cluster.", ""]
    return lines
