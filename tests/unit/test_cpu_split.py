"""The CPU split (``cpu_split.py``): who gets which CPUs, and a started process really runs
on its share (a real child process, its affinity read back from the kernel)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tritonlab.cpu_split import CpuSplit, decide_split, pinned
from tritonlab.experiments.manifest import Manifest
from tritonlab.stats.comparability import manifest_differences


@pytest.mark.parametrize(
    ("cpus", "server", "client"),
    [
        ((0, 1), (0,), (1,)),
        ((0, 1, 2, 3), (0, 1, 2), (3,)),
        (tuple(range(8)), tuple(range(6)), (6, 7)),
        ((3, 5, 9), (3, 5), (9,)),
    ],
)
def test_perf_analyzer_gets_a_quarter_at_least_one(
    cpus: tuple[int, ...], server: tuple[int, ...], client: tuple[int, ...]
) -> None:
    split = decide_split(True, starts_server=True, cpus=cpus)
    assert (split.server_cpus, split.client_cpus) == (server, client)
    assert split.split
    assert not set(split.server_cpus) & set(split.client_cpus)
    assert f"CPU {', '.join(map(str, server))}" in split.describe()


@pytest.mark.parametrize(
    ("wanted", "starts", "cpus", "why"),
    [
        (False, True, (0, 1), "--no-cpu-split"),
        (True, False, (0, 1), "not one tritonlab starts"),
        (True, True, (0,), "nothing to split"),
    ],
)
def test_no_split_says_why(wanted: bool, starts: bool, cpus: tuple[int, ...], why: str) -> None:
    split = decide_split(wanted, starts_server=starts, cpus=cpus)
    assert not split.split
    assert split.server_cpus == split.client_cpus == ()
    assert why in split.reason and "shared every CPU" in split.describe()


def _affinity_of_child(cpus: tuple[int, ...]) -> set[int]:
    code = "import os; print(sorted(os.sched_getaffinity(0)))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=pinned(cpus),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {int(c) for c in out.strip().strip("[]").split(",")}


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux CPU affinity")
def test_a_started_process_runs_on_its_share_only() -> None:
    mine = tuple(sorted(os.sched_getaffinity(0)))
    assert _affinity_of_child((mine[-1],)) == {mine[-1]}
    assert _affinity_of_child(()) == set(mine)  # not pinned: wherever this process may run


def test_runs_with_another_placement_are_not_comparable(seed_manifest: Manifest) -> None:
    base = seed_manifest
    assert base.cpu_split is None  # recorded before the split: shared
    split = Manifest.from_dict(
        {**base.to_dict(), "cpu_split": CpuSplit((0,), (1,), "test").to_dict()}
    )
    found = manifest_differences(base, split)
    assert any("CPUs of the server and perf_analyzer" in d for d in found["machine"])
    assert not manifest_differences(split, split)
