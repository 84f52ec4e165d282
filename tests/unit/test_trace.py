"""Traces: parsing (and refusing) CSVs, their figures, the seeded generator, trace load keys,
windows of whole cycles and perf_analyzer's command line under a trace."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tritonlab.errors import PlanError
from tritonlab.experiments.plan import (
    ExperimentPlan,
    LoadKey,
    LoadPoint,
    distinct_traces,
    trace_load,
)
from tritonlab.perf.settings import PerfSettings
from tritonlab.perf.trace import (
    TraceError,
    TraceStats,
    adherence,
    peak_rate_per_s,
    read_trace,
    trace_name,
)
from tritonlab.perf.trace_gen import TraceSpec, generate, write_trace_csv
from tritonlab.repository.variants import ServingVariant


def _write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_timestamps_become_a_cycle_closed_by_the_mean_gap(tmp_path: Path) -> None:
    trace = read_trace(_write(tmp_path, "timestamp_s,other\n0,a\n0.1,b\n0.3,c\n0.6,d\n"))
    assert trace.intervals_us.tolist() == [200000, 100000, 200000, 300000]
    s = trace.stats
    assert (s.request_count, s.duration_s, s.mean_rate_per_s) == (4, 0.8, 5.0)
    assert s.interarrival_cv == pytest.approx(np.std([2, 1, 2, 3]) / 2, abs=1e-6)
    assert len(s.sha256) == 64
    assert trace.interval_file_text() == "200000\n100000\n200000\n300000\n"


@pytest.mark.parametrize(
    ("header", "values", "expected"),
    [("interarrival_ms", "1.5\n2.5\n", [1500, 2500]), ("interval_us", "10\n30\n", [10, 30])],
)
def test_intervals_are_read_as_written(
    tmp_path: Path, header: str, values: str, expected: list[int]
) -> None:
    trace = read_trace(_write(tmp_path, f"{header}\n{values}"))
    assert trace.intervals_us.tolist() == expected
    assert trace.stats.duration_s == sum(expected) / 1e6


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "is empty"),
        ("when\n1\n2\n", "has no time column"),
        ("timestamp_s,interval_us\n1,2\n", "give only one"),
        ("timestamp_s\n0\nnan\n", "must be finite"),
        ("interval_us\n5\ninf\n", "must be finite"),
        ("interval_us\n5\n-3\n", "is negative"),
        ("timestamp_s\n0\n2\n1\n", "goes back in time"),
        ("timestamp_s\n0\nabc\n", "is not a number"),
        ("interval_us\n5\n", "at least 2"),
        ("interval_us\n0\n0\n", "no duration"),
        ("interval_us\n700000000\n1\n", "at most 600 s"),
    ],
)
def test_a_broken_trace_is_one_clear_line(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(TraceError, match=fragment) as info:
        read_trace(_write(tmp_path, text))
    assert "\n" not in str(info.value)
    assert isinstance(info.value, PlanError)  # the CLI's one-line errors


def test_a_missing_or_binary_trace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot be read"):
        read_trace(tmp_path / "nope.csv")
    path = tmp_path / "b.csv"
    path.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(TraceError, match="not UTF-8"):
        read_trace(path)


def test_trace_names_are_key_and_file_safe() -> None:
    assert trace_name(Path("My Bursty_trace (v2).csv")) == "my-bursty-trace-v2"
    assert trace_name(Path("'\";.csv")) == "trace"
    assert "_" not in trace_name(Path("a_b_c.csv"))


def test_peak_rate_wraps_around_the_cycle() -> None:
    # 4 requests 0.1 s apart, then 0.7 s quiet: any 1 s window holds at most 4 (0.8 s cycle: 5)
    assert peak_rate_per_s(np.array([700000, 100000, 100000, 100000])) == 4.0
    assert peak_rate_per_s(np.array([100000, 100000])) == 10.0


@pytest.mark.parametrize("kind", ["poisson", "bursts", "diurnal"])
def test_the_generator_is_deterministic_by_seed(kind: str, tmp_path: Path) -> None:
    spec = TraceSpec(kind, 4.0, 300.0, 50.0, 0.5, 0.5, seed=3)
    first, again = generate(spec), generate(spec)
    assert np.array_equal(first, again)
    assert int(first.sum()) == 4_000_000  # the cycle's intervals sum to its duration
    assert not np.array_equal(first, generate(TraceSpec(kind, 4.0, 300.0, 50.0, seed=4)))
    stats = read_trace(write_trace_csv(first, tmp_path / f"{kind}.csv")).stats
    assert stats.duration_s == 4.0


def test_bursts_are_burstier_than_poisson() -> None:
    poisson = read_cv(TraceSpec("poisson", 20.0, 200.0, seed=1))
    bursts = read_cv(TraceSpec("bursts", 20.0, 400.0, 0.0, 0.5, 0.5, seed=1))
    assert 0.9 < poisson < 1.1
    assert bursts > 2 * poisson


def read_cv(spec: TraceSpec) -> float:
    gaps = generate(spec).astype(float)
    return float(gaps.std() / gaps.mean())


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (TraceSpec("zipf", 1.0, 10.0), "--kind must be one of"),
        (TraceSpec("poisson", 0.0, 10.0), "--duration-s must be in"),
        (TraceSpec("poisson", 1.0, -1.0), "--rate must be > 0"),
        (TraceSpec("bursts", 1.0, 10.0, 20.0), "--low-rate must be between"),
        (TraceSpec("poisson", 1.0, 1e9), "over 2,000,000 requests"),
        (TraceSpec("poisson", 0.001, 1.0), "drew 0 request"),
    ],
)
def test_the_generator_refuses_what_makes_no_trace(spec: TraceSpec, says: str) -> None:
    with pytest.raises(PlanError, match=re.escape(says)):
        generate(spec)


STATS = TraceStats("bursts", "ab" * 32, 400, 2.0, 200.0, 3.1, 400.0)


def test_a_trace_load_has_its_own_key_label_and_window() -> None:
    load = LoadPoint("grpc", 1, None, trace=STATS)
    assert load.key == "grpc_b1_tbursts"
    assert LoadKey.parse(load.key) == LoadKey("grpc", 1, "tbursts")
    assert "trace bursts (mean 200.0 req/s, inter-arrival CV 3.10)" in load.label
    assert load.open_loop
    load.validate()
    assert load.window_ms(800) == 2000  # whole 2 s cycles, at least the plan's window
    assert load.window_ms(4500) == 6000
    assert LoadPoint.from_dict(load.to_dict()) == load


def test_plans_without_a_trace_keep_their_stored_form() -> None:
    assert "trace" not in LoadPoint().to_dict()


def test_perf_settings_replay_the_interval_file() -> None:
    plan = ExperimentPlan("m", (ServingVariant("baseline", "b"),))
    load = LoadPoint("grpc", 1, None, trace=STATS)
    with pytest.raises(PlanError, match="interval file"):
        plan.perf_settings(load, "m", "u:1", {})
    settings = plan.perf_settings(load, "m", "u:1", {}, None, "traces/my file.txt")
    args = settings.to_args("out.csv")
    assert args[args.index("--request-intervals") + 1] == "traces/my file.txt"
    assert "--async" in args
    assert "--concurrency-range" not in args and "--request-rate-range" not in args
    assert args[args.index("--measurement-interval") + 1] == "2000"
    assert PerfSettings.from_dict(settings.to_dict()) == settings
    assert "request_intervals" not in plan.perf_settings(LoadPoint(), "m", "u", {}).to_dict()


def test_adherence_is_within_five_percent() -> None:
    assert adherence(STATS, 192.0, 1, []).kept_to
    assert not adherence(STATS, 180.0, 1, []).kept_to
    behind = adherence(STATS, 800.0, 4, ["Perf Analyzer was not able to keep up with the rate"])
    assert behind.kept_to and behind.behind_warnings == 1


def test_two_different_traces_may_not_share_a_name(tmp_path: Path) -> None:
    a = read_trace(_write(tmp_path, "interval_us\n1\n2\n", "x.csv"))
    (tmp_path / "sub").mkdir()
    b = read_trace(_write(tmp_path / "sub", "interval_us\n3\n4\n", "x.csv"))
    assert distinct_traces([a, a]) == [a]
    with pytest.raises(PlanError, match="both named"):
        distinct_traces([a, b])
    assert trace_load(a, "http", 2).key == "http_b2_tx"


def test_a_plan_file_replays_its_traces(tmp_path: Path) -> None:
    from tritonlab.experiments.plan_file import load_plan

    _write(tmp_path, "interval_us\n1000\n3000\n", "burst.csv")
    plan_path = _write(
        tmp_path, "model: demo\nloads: {concurrency: [2], trace: burst.csv}\n", "plan.yaml"
    )
    sweep = load_plan(plan_path)
    assert [ld.key for ld in sweep.experiment.loads] == ["grpc_b1_c2", "grpc_b1_tburst"]
    assert [t.stats.name for t in sweep.traces] == ["burst"]
    assert sweep.with_trace(sweep.traces[0]).experiment.loads == sweep.experiment.loads
    _write(tmp_path, "model: demo\nloads: {trace: [nope.csv]}\n", "bad.yaml")
    with pytest.raises(PlanError, match=r"loads\.trace: trace .*nope\.csv"):
        load_plan(tmp_path / "bad.yaml")


def test_a_replay_falls_behind_only_when_many_requests_were_late() -> None:
    from tritonlab.perf.trace import delayed_pct, replay_fell_behind

    few = ["Perf Analyzer was not able to keep up with the desired request rate. 3.99% of the "
           "requests were delayed."]  # fmt: skip
    many = [few[0].replace("3.99%", "12.5%")]
    assert delayed_pct(few) == 3.99 and delayed_pct([]) == 0.0
    assert not replay_fell_behind(few) and not replay_fell_behind([])
    assert replay_fell_behind(many)
