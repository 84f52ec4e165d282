"""``tritonlab capacity`` on the committed example runs: the capacity at a p99 budget with its
interval, the replicas for a target, the misuse refused in one line, and deploy sized from the
same figure. Every expected figure is computed here from the stored cells, never typed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tritonlab.cli import app
from tritonlab.decisions.capacity import (
    Interval,
    P99Holds,
    capacity_of,
    load_kind,
)
from tritonlab.deploy.capacity_run import CapacityReport, run_capacity
from tritonlab.deploy.kubernetes import DeployOptions, write_deployment
from tritonlab.deploy.pick import resolve_pick
from tritonlab.errors import ConfigError
from tritonlab.report.run_data import load_run
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.verdicts import centre_interval

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def _points_of(run: str, key: ConfigKey) -> list:  # type: ignore[type-arg]
    return [s for s in load_run(EXAMPLES / run).summaries if ConfigKey.of(s) == key]


def _expected(run: str, key: ConfigKey, budget_us: float) -> tuple[str, float, float, float]:
    """(load key, median, low, high) of the best point whose p99 interval's upper end is within
    the budget, computed straight from the summaries and ``centre_interval``."""
    best = None
    for s in _points_of(run, key):
        p99 = [math.log(v) for v in s.latency_p99.values]
        ci = centre_interval(p99, p_value=False)
        if ci is None or math.exp(ci.high) > budget_us:
            continue
        if best is None or s.throughput.median > best.throughput.median:
            best = s
    assert best is not None
    tput = centre_interval([math.log(v) for v in best.throughput.values], p_value=False)
    assert tput is not None
    return best.load_key, best.throughput.median, math.exp(tput.low), math.exp(tput.high)


@pytest.mark.parametrize(
    ("run", "budget_ms"),
    [
        ("simple_mlp_sweep", 10.0),
        ("simple_mlp_sweep", 5.0),
        ("bert_encoder_sweep", 2000.0),
        ("resnet18_cnn_tune", 2000.0),
        ("bert_encoder_tune", 3000.0),
    ],
)
def test_capacity_of_the_pick_carries_its_interval(run: str, budget_ms: float) -> None:
    report = run_capacity(EXAMPLES / run, 20000, budget_ms * 1000)
    (row,) = report.rows  # a sweep or a tune: its pick only
    point = row.capacity.point
    assert point is not None and row.replicas is not None
    key = ConfigKey.of(
        next(
            s
            for s in load_run(EXAMPLES / run).summaries
            if str(ConfigKey.of(s)) == row.capacity.config_key
        )
    )
    load, median, low, high = _expected(run, key, budget_ms * 1000)
    assert point.load_key == load
    assert point.throughput_infer_per_s == pytest.approx(median)
    assert point.throughput_ci95_infer_per_s == pytest.approx((low, high))
    assert point.p99_holds == P99Holds.BY_INTERVAL
    assert row.replicas.at_median == math.ceil(20000 / median)
    assert row.replicas.fewest == math.ceil(20000 / high)
    assert row.replicas.cautious == math.ceil(20000 / low)
    assert row.replicas.fewest <= row.replicas.at_median <= row.replicas.cautious


def test_the_sweep_pick_is_the_default_and_a_plain_run_sizes_every_configuration() -> None:
    sweep = load_run(EXAMPLES / "simple_mlp_sweep")
    assert sweep.recommendations and sweep.recommendations.throughput_pick
    report = run_capacity(EXAMPLES / "simple_mlp_sweep", 20000, 10000)
    assert report.selection == "the sweep's throughput-first pick"
    assert report.rows[0].capacity.variant == sweep.recommendations.throughput_pick.point.variant
    plain = run_capacity(EXAMPLES / "simple_mlp", 20000, 10000)
    variants = {s.variant.name for s in load_run(EXAMPLES / "simple_mlp").summaries}
    assert {r.capacity.variant for r in plain.rows} == variants
    assert "same hardware only" in plain.hardware_note
    one = run_capacity(EXAMPLES / "simple_mlp", 20000, 10000, config="batch_0ms_x1")
    assert [r.capacity.variant for r in one.rows] == ["batch_0ms_x1"]


def test_a_point_whose_p99_holds_by_its_median_only_is_not_counted() -> None:
    """Budget between a point's median p99 and its interval's upper end: not counted."""
    key_points = _points_of("simple_mlp_sweep", ConfigKey("batch_0us_x2", "grpc", 1, None))
    c16 = next(s for s in key_points if s.load_key == "grpc_b1_c16")
    p99 = Interval.of(c16.latency_p99)
    assert p99 is not None and p99.high is not None
    budget = (p99.median + p99.high) / 2
    capacity = capacity_of(key_points, budget)
    judged = next(p for p in capacity.points if p.load_key == "grpc_b1_c16")
    assert judged.p99_holds == P99Holds.MEDIAN_ONLY
    assert capacity.point is not None and capacity.point.load_key != "grpc_b1_c16"


def test_closed_and_open_loop_points_are_told_apart() -> None:
    """(A trace's points, used alone: tests/unit/test_trace_example.py, on a run with them.)"""
    points = _points_of("simple_mlp_sweep", ConfigKey("batch_0us_x2", "grpc", 1, None))
    assert {load_kind(s).name for s in points} == {"concurrency", "rate"}


def test_json_is_the_typed_record(tmp_path: Path) -> None:
    out = tmp_path / "cap.json"
    result = runner.invoke(
        app,
        [
            "capacity",
            str(EXAMPLES / "simple_mlp_sweep"),
            "--target-load",
            "20000",
            "--p99-budget-ms",
            "10",
            "--json",
            str(out),
            "--markdown",
            str(tmp_path / "cap.md"),
        ],
    )
    assert result.exit_code == 0, result.output
    stored = CapacityReport.from_dict(json.loads(out.read_text()))
    assert stored == run_capacity(EXAMPLES / "simple_mlp_sweep", 20000, 10000)
    row = json.loads(out.read_text())["rows"][0]
    assert {"throughput_infer_per_s", "throughput_ci95_infer_per_s", "latency_p99_ci95_us"} <= set(
        row["capacity"]["point"]
    )
    assert "| provision |" in (tmp_path / "cap.md").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent/run", "--target-load", "100", "--p99-budget-ms", "10"], "no such folder"),
        (
            [str(EXAMPLES / "plans"), "--target-load", "100", "--p99-budget-ms", "10"],
            "not a finished tritonlab run",
        ),
        (
            [str(EXAMPLES / "simple_mlp"), "--target-load", "0", "--p99-budget-ms", "10"],
            "--target-load must be positive",
        ),
        (
            [str(EXAMPLES / "simple_mlp"), "--target-load", "100", "--p99-budget-ms", "-1"],
            "--p99-budget-ms must be positive",
        ),
        (
            [str(EXAMPLES / "simple_mlp_sweep"), "--target-load", "100", "--p99-budget-ms", "0.1"],
            "no load point of batch_0us_x2/grpc/b1 holds the p99 budget of 0.1 ms",
        ),
        (
            [
                str(EXAMPLES / "simple_mlp"),
                "--target-load",
                "100",
                "--p99-budget-ms",
                "10",
                "--config",
                "nope",
            ],
            "--config nope: no such configuration",
        ),
    ],
)
def test_misuse_is_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["capacity", *args])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert message in text, text


def test_no_point_within_budget_names_the_lowest_p99() -> None:
    points = _points_of("simple_mlp_sweep", ConfigKey("batch_0us_x2", "grpc", 1, None))
    lowest = min(p.latency_p99.median for p in points)
    with pytest.raises(ConfigError) as caught:
        run_capacity(EXAMPLES / "simple_mlp_sweep", 100, 100)
    assert f"the lowest p99 measured is {lowest / 1000:,.2f} ms" in str(caught.value)


def test_deploy_sizes_the_hpa_from_the_same_figure(tmp_path: Path) -> None:
    run = EXAMPLES / "simple_mlp_sweep"
    report = run_capacity(run, 20000, 10000)
    (row,) = report.rows
    assert row.capacity.point is not None and row.replicas is not None
    pick = resolve_pick(run, p99_budget_us=10000)
    assert pick.capacity == row.capacity
    assert pick.load_key == row.capacity.point.load_key
    write_deployment(pick, run, tmp_path, DeployOptions(target_load_infer_per_s=20000))
    (hpa,) = [d for d in yaml.safe_load_all((tmp_path / "hpa.yaml").read_text()) if d]
    assert hpa["spec"]["minReplicas"] == row.replicas.cautious
    notes = hpa["metadata"]["annotations"]
    assert (
        f"{row.capacity.point.throughput_infer_per_s:,.0f} infer/s"
        in notes["tritonlab/measured-capacity-per-replica"]
    )
    assert notes["tritonlab/capacity-rule"] == row.capacity.rule


def test_deploy_without_a_budget_keeps_the_median_sizing(tmp_path: Path) -> None:
    run = EXAMPLES / "simple_mlp_sweep"
    pick = resolve_pick(run)
    write_deployment(pick, run, tmp_path, DeployOptions(target_load_infer_per_s=20000))
    (hpa,) = [d for d in yaml.safe_load_all((tmp_path / "hpa.yaml").read_text()) if d]
    assert hpa["spec"]["minReplicas"] == math.ceil(20000 / pick.throughput_infer_per_s)
    assert "tritonlab/capacity-rule" not in hpa["metadata"]["annotations"]


def test_a_capacity_at_the_highest_load_measured_is_a_lower_bound_and_says_so() -> None:
    from tritonlab.deploy.capacity_run import run_capacity
    from tritonlab.deploy.capacity_text import notes

    # the pick, and a configuration with Poisson points beside its concurrency curve (a rate
    # in req/s is no "higher load" than a concurrency: only points of one kind compare)
    for config in (None, "batch_1000us"):
        report = run_capacity(EXAMPLES / "simple_mlp_sweep", 20000.0, 50_000.0, config)
        row = report.rows[0]
        assert row.capacity.point is not None
        assert row.capacity.point.load_key.startswith("grpc_b1_c")
        loads = [p for p in row.capacity.points if p.load_key.startswith("grpc_b1_c")]
        top = max(loads, key=lambda p: int(p.load_key.rsplit("_c", 1)[1]))
        assert row.capacity.at_least == (row.capacity.point.load_key == top.load_key)
        assert any("at least this much" in n for n in notes(report)) == row.capacity.at_least
