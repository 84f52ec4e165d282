"""The cluster run's checks and pairing, without a cluster: a node with other versions or
other hardware is refused in one line, and cells pair only within a node."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tritonlab.distributed.nodes import NodeFacts, NodeRecord, check_nodes, check_server_versions
from tritonlab.errors import ConfigError
from tritonlab.experiments.manifest import MachineInfo
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import compare

MACHINE = MachineInfo("AMD EPYC", 2, 2, 23.5, (), "Linux", "3.11.7")
PACKAGES = {"nvidia-pytriton": "0.7.0", "tritonclient": "2.51.0", "onnxruntime": "1.32.0"}


def _node(node_id: str, address: str, **changes: object) -> NodeFacts:
    facts = NodeFacts(node_id, address, "host", MACHINE, "0.1.0", dict(PACKAGES), "2.51.0")
    return replace(facts, **changes)  # type: ignore[arg-type]


DRIVER = _node("driver", "driver")


def test_matching_nodes_pass() -> None:
    check_nodes(DRIVER, [_node("a" * 16, "10.0.0.1"), _node("b" * 16, "10.0.0.2")])


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"tritonlab_version": "0.0.9"}, "tritonlab 0.0.9, the driver 0.1.0"),
        ({"perf_analyzer_version": "2.50.0"}, "perf_analyzer 2.50.0, the driver 2.51.0"),
        ({"packages": PACKAGES | {"tritonclient": "2.49.0"}}, "tritonclient 2.49.0"),
        ({"packages": {"tritonclient": "2.51.0", "onnxruntime": "1.32.0"}}, "nvidia-pytriton none"),
    ],
)
def test_a_version_mismatch_names_the_node(changes: dict[str, object], said: str) -> None:
    odd = _node("c0ffee00" * 2, "10.0.0.7", **changes)
    with pytest.raises(ConfigError) as info:
        check_nodes(DRIVER, [_node("a" * 16, "10.0.0.1"), odd])
    message = str(info.value)
    assert "\n" not in message
    assert "10.0.0.7/c0ffee00" in message and said in message


def test_nodes_of_two_hardware_types_are_refused() -> None:
    bigger = replace(MACHINE, cpu_model="Intel Xeon", cpu_count_logical=8, cpu_affinity_count=8)
    with pytest.raises(ConfigError, match="2 hardware types") as info:
        check_nodes(
            DRIVER, [_node("a" * 16, "10.0.0.1"), _node("b" * 16, "10.0.0.2", machine=bigger)]
        )
    assert "Intel Xeon x8: 10.0.0.2/bbbbbbbb" in str(info.value)


def test_servers_of_different_releases_are_refused() -> None:
    records = [
        NodeRecord(_node("a" * 16, "10.0.0.1"), "2.51.0"),
        NodeRecord(_node("b" * 16, "10.0.0.2"), "2.50.0"),
    ]
    with pytest.raises(ConfigError, match="tritonservers differ"):
        check_server_versions(records)


def test_cells_pair_only_within_a_node() -> None:
    # Rounds 1-3 each whole on one node; the node that measured round 2's reference was lost,
    # so round 2's variant cell comes from another node and must not be paired with it.
    ref = Summary.of([100.0, 100.0, 100.0], ["a#1", "a#2", "b#3"])
    var = Summary.of([110.0, 300.0, 112.0], ["a#1", "b#2", "b#3"])
    verdict = compare("throughput", ref, var)
    assert verdict.pairs == 2
    assert "paired by node and round" in verdict.method
    assert verdict.change_pct == pytest.approx(11.0, abs=0.1)
    local = compare("throughput", Summary.of([100.0, 100.0]), Summary.of([110.0, 112.0]))
    assert "paired by round" in local.method


def test_an_address_where_nothing_answers_is_one_line() -> None:
    from tritonlab.distributed.cluster import check_reachable
    from tritonlab.server.ports import find_free_ports

    (port,) = find_free_ports(1)  # free a moment ago: nothing listens there
    with pytest.raises(ConfigError, match=r"--ray 127\.0\.0\.1:\d+: nothing answers there"):
        check_reachable(f"127.0.0.1:{port}", timeout_s=2)
    with pytest.raises(ConfigError, match="host:port"):
        check_reachable("just-a-name")
