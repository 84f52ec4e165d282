"""``tritonlab sweep --ray`` on a real two-node Ray cluster: distribution, pairing, node loss,
resume, and the same run folder as a local sweep.

The two nodes are two network namespaces of this one machine (``netns_cluster``), each with a
``ray start`` process, one ``tritonlab`` slot and its own tritonserver. Both nodes measure at
the same time on the same two cores, so their cells are NOT comparable figures: this test
checks the mechanics (who measured what, what is kept, what is re-queued), never the speed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration_support import MAX_TRIALS, STABILITY_PCT, cli_env, tritonlab_command
from netns_cluster import Cluster, Host, available, two_host_cluster

from tritonlab.experiments.store import CellResult
from tritonlab.result_files import read_result

pytestmark = [pytest.mark.integration]
WHY_NOT = available()
if WHY_NOT:
    pytestmark.append(pytest.mark.skip(reason=WHY_NOT))

PLAN = f"""
model: simple_mlp.onnx
baseline: {{max_batch_size: 16}}
axes:
  max_queue_delay_microseconds: [0]
loads:
  concurrency: [4]
repeats: REPEATS
measurement:
  measurement_interval_ms: 400
  stability_percentage: {STABILITY_PCT:g}
  max_trials: {MAX_TRIALS}
recommend: {{latency_budget_p99_us: 1000000}}
"""
ROUNDS = 4
CELLS = {f"{v}__grpc_b1_c4__r{r}" for v in ("baseline", "batch_0us") for r in range(1, ROUNDS + 1)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # Under pytest-xdist the module's tests may run on two workers at once, each with this
    # fixture: the namespaces carry the worker's number so the two clusters never share one
    # (a shared name made one worker's teardown SIGKILL the other's run).
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    with two_host_cluster(tmp_path_factory.mktemp("ray"), f"t{worker}") as made:
        yield made


def _cells(out_dir: Path) -> dict[str, CellResult]:
    return {
        p.stem: CellResult.from_dict(json.loads(p.read_text()))
        for p in sorted((out_dir / "results" / "cells").glob("*.json"))
    }


def _start(host: Host, args: list[str], cwd: Path, env: dict[str, str], tag: str):  # type: ignore[no-untyped-def]
    stdout, stderr = cwd / f"{tag}.stdout", cwd / f"{tag}.stderr"
    with open(stdout, "w") as out, open(stderr, "w") as err:
        proc = subprocess.Popen(
            host.command(*tritonlab_command(), *args),
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    return proc, stdout, stderr


def _wait(proc: subprocess.Popen[str], ok, what: str, timeout_s: float = 240) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert proc.poll() is None, f"the sweep ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _measuring_processes(host: Host) -> list[str]:
    found = []
    for pid in host.pids():
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if name.startswith(("tritonserver", "perf_analyzer", "triton_python")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:160]
            except OSError:
                continue
            found.append(f"{name} ({pid}, ppid {stat[1]}, pgid {stat[2]}): {args.decode()}")
    return found


@pytest.mark.timeout(600)
def test_sweep_on_two_nodes_survives_a_lost_node_and_resumes(
    cluster: Cluster, demo_onnx: Path, tmp_path: Path
) -> None:
    (tmp_path / "simple_mlp.onnx").write_bytes(demo_onnx.read_bytes())
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("REPEATS", str(ROUNDS)))
    out_dir = tmp_path / "cluster-run"
    env = cli_env() | cluster.env | {"TRITONLAB_CEILING_WINDOW_S": "1"}
    args = ["sweep", str(plan), "--out", str(out_dir), "--ray", cluster.address]
    args += ["--no-progress", "--max-repeats", str(ROUNDS)]
    worker_label_prefix = cluster.worker.address + "/"

    # 1. Both nodes measure; the worker's host dies once it has stored a cell.
    proc, _, stderr = _start(cluster.head, args, tmp_path, env, "first")
    try:
        _wait(
            proc,
            lambda: any(c.node.startswith(worker_label_prefix) for c in _cells(out_dir).values()),
            "a cell from the worker node",
        )
        before_kill = _cells(out_dir)
        cluster.worker.kill()
        faults = out_dir / "results" / "faults.json"
        _wait(
            proc,
            lambda: faults.exists() and "was lost" in faults.read_text(),
            "the driver to notice the lost node",
        )
        # 2. The head alone goes on; Ctrl-C once it has stored one cell more.
        lost_at = len(_cells(out_dir))
        _wait(proc, lambda: len(_cells(out_dir)) >= lost_at + 1, "a cell after the loss")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code != 0, "Ctrl-C must not look like success"
    interrupted = _cells(out_dir)
    assert {c: d.to_dict() for c, d in before_kill.items()} == {
        c: interrupted[c].to_dict() for c in before_kill
    }, "a cell stored before the node was lost changed"
    deadline = time.monotonic() + 20
    while _measuring_processes(cluster.head) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _measuring_processes(cluster.head), "a server or perf_analyzer outlived Ctrl-C"
    assert not cluster.worker.pids(), "the killed host still runs processes"
    manifest = read_result(out_dir / "results" / "manifest.json")
    lost = [n for n in manifest["nodes"] if n.get("lost_utc")]
    assert [n["address"] for n in lost] == [cluster.worker.address], manifest["nodes"]
    faults = read_result(out_dir / "results" / "faults.json")
    assert any("was lost" in f["what"] for f in faults), faults

    # 3. The same command resumes on the node that is left, and finishes.
    proc, stdout, stderr = _start(cluster.head, args, tmp_path, env, "resume")
    code = proc.wait(timeout=400)
    assert code == 0, stderr.read_text()[-3000:]
    summary = stdout.read_text()
    assert f"reused {len(interrupted)}" in summary, summary
    assert "measuring with the classic engine" in stderr.read_text()  # the plan's blocks
    cells = _cells(out_dir)
    assert set(cells) == CELLS
    assert {c: d.to_dict() for c, d in interrupted.items()} == {
        c: cells[c].to_dict() for c in interrupted
    }
    nodes = {c.node for c in cells.values()}
    assert len(nodes) == 2 and all(nodes), nodes
    # Whole rounds per node: a round not touched by the loss has both cells on one node.
    by_round: dict[int, set[str]] = {}
    for cell in cells.values():
        by_round.setdefault(cell.repeat, set()).add(cell.node)
    assert any(len(n) == 1 for n in by_round.values()), by_round
    assert not _measuring_processes(cluster.head)
    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert "## Where the cells ran" in log
    for node in nodes:
        assert node in log
    analyses = read_result(out_dir / "results" / "summary.json")["analyses"]
    summaries = [v["summary"] for a in analyses for v in a["variants"]]
    rounds = {str(r) for s in summaries for r in s["throughput_infer_per_s"]["rounds"]}
    assert rounds and all("#" in r for r in rounds), rounds  # paired by node and round
    assert "paired by node and round" in log

    # 4. The same layout as a local sweep of the same plan.
    local_plan = tmp_path / "local.yaml"
    local_plan.write_text(PLAN.replace("REPEATS", "2"))
    local_dir = tmp_path / "local-run"
    local = subprocess.run(
        [
            *tritonlab_command(),
            *("sweep", str(local_plan), "--out", str(local_dir)),
            # the engine a Ray run measures with (the plan's blocks are switched to classic)
            *("--no-progress", "--max-repeats", "2", "--engine", "classic"),
        ],
        cwd=tmp_path,
        env=cli_env() | {"TRITONLAB_CEILING_WINDOW_S": "1"},
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert local.returncode == 0, local.stderr[-3000:]

    def layout(run: Path) -> set[str]:
        # faults.json exists where faults were met (a lost node here), locally as well
        skip = ("results/cells/", "results/faults.json", "benchmarks/", "server/", "inputs/")
        return {
            p.relative_to(run).as_posix()
            for p in run.rglob("*")
            if p.is_file() and not p.relative_to(run).as_posix().startswith(skip)
        }

    assert layout(out_dir) == layout(local_dir)


@pytest.mark.timeout(300)
def test_tune_measures_on_a_cluster_node(cluster: Cluster, tmp_path: Path) -> None:
    """tune's search is sequential: it runs on one node of the cluster, each cell naming it."""
    out_dir = tmp_path / "tuned"
    env = cli_env() | cluster.env
    args = ["tune", "simple_mlp", "--out", str(out_dir), "--ray", cluster.address]
    args += ["--time-budget", "15", "--window-ms", "400", "--max-race-rounds", "2"]
    args += ["--keep-protocol", "--max-instances", "2"]
    alive = [h for h in (cluster.head, cluster.worker) if h.pids()]
    proc, _stdout, stderr = _start(alive[0], args, tmp_path, env, "tune")
    code = proc.wait(timeout=280)
    assert code == 0, stderr.read_text()[-3000:]
    cells = _cells(out_dir)
    assert cells, "the budget still lets the first cells finish"
    assert len({c.node for c in cells.values()}) == 1 and all(c.node for c in cells.values())
    tune = read_result(out_dir / "results" / "tune.json")
    assert tune["steps"] and tune["pick"], tune
    assert "Where the cells ran" in (out_dir / "docs" / "experiment_log.md").read_text()
    assert not _measuring_processes(alive[0])
