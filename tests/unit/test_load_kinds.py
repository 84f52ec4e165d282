"""The load-kind table: every kind's key, words, checks and perf_analyzer arguments, a plan
file's fixed rates (Poisson and evenly spaced), and what differs between the two downstream
(workload comparability, the cost model's queue wait)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tritonlab.errors import PlanError
from tritonlab.experiments.load_kinds import LOAD_KINDS, PLAN_KEYS, kind_of
from tritonlab.experiments.plan import LoadKey, LoadPoint
from tritonlab.experiments.plan_file import parse_plan
from tritonlab.perf.settings import PerfSettings
from tritonlab.perf.trace import TraceStats
from tritonlab.stats.workload import same_offered_load

TRACE = TraceStats(
    name="bursts",
    sha256="0" * 64,
    request_count=10,
    duration_s=1.0,
    mean_rate_per_s=10.0,
    interarrival_cv=1.5,
    peak_rate_per_s=20.0,
)

LOADS = {
    "concurrency": (LoadPoint(), "grpc_b1_c8", "concurrency 8"),
    "rate": (
        LoadPoint(concurrency=None, request_rate_per_s=200.0),
        "grpc_b1_r200",
        "200 req/s Poisson",
    ),
    "constant": (
        LoadPoint(concurrency=None, request_rate_per_s=200.0, request_distribution="constant"),
        "grpc_b1_k200",
        "200 req/s constant",
    ),
    "peak": (
        LoadPoint(concurrency=None, peak_fraction=0.7),
        "grpc_b1_p70",
        "70% of peak, Poisson",
    ),
    "trace": (
        LoadPoint(concurrency=None, trace=TRACE),
        "grpc_b1_tbursts",
        "trace bursts (mean 10.0 req/s, inter-arrival CV 1.50)",
    ),
}


def test_every_kind_in_the_table_is_tested_and_named_once() -> None:
    names = [k.name for k in LOAD_KINDS]
    assert sorted(names) == sorted(LOADS) and len(set(names)) == len(names)
    assert len({k.letter for k in LOAD_KINDS}) == len(LOAD_KINDS)
    assert PLAN_KEYS == ("request_rate", "constant_rate")


@pytest.mark.parametrize("name", sorted(LOADS))
def test_a_kind_builds_its_key_and_words_and_the_key_parses_back(name: str) -> None:
    load, key, words = LOADS[name]
    assert kind_of(load).name == name
    assert load.key == key
    assert load.label == f"grpc, batch 1, {words}"
    load.validate()
    parsed = LoadKey.parse(key)
    assert parsed is not None and parsed.load[0] == kind_of(load).letter
    assert load.open_loop is (name != "concurrency")
    assert LoadPoint.from_dict(load.to_dict()) == load


def test_files_written_before_the_table_read_and_dump_as_they_were() -> None:
    """The distribution is stored only where it is not Poisson, the default."""
    assert "request_distribution" not in LOADS["rate"][0].to_dict()
    assert LOADS["constant"][0].to_dict()["request_distribution"] == "constant"
    with pytest.raises(ValueError):
        LoadPoint.from_dict({"concurrency": None, "request_rate_per_s": 1.0,
                             "request_distribution": "uniform"})  # fmt: skip


@pytest.mark.parametrize(
    ("load", "message"),
    [
        (LoadPoint(concurrency=0), "concurrency must be >= 1, got 0"),
        (LoadPoint(concurrency=None, request_rate_per_s=-1.0, request_distribution="constant"),
         "request rate must be > 0, got -1.0"),
        (LoadPoint(concurrency=None, peak_fraction=3.0),
         "peak fraction must be in (0, 2], got 3.0"),
        (LoadPoint(concurrency=None, trace=TRACE, request_rate_per_s=5.0),
         "a trace load has no request rate or peak fraction of its own"),
    ],
)  # fmt: skip
def test_a_kind_refuses_what_perf_analyzer_could_not_run(load: LoadPoint, message: str) -> None:
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load.validate()


def _settings(load: LoadPoint) -> PerfSettings:
    from tritonlab.experiments.plan import ExperimentPlan
    from tritonlab.repository.variants import seed_comparison_variants

    plan = ExperimentPlan("m", tuple(seed_comparison_variants())[:1], (load,))
    return plan.perf_settings(load, "m", "127.0.0.1:1", {})


def test_the_distribution_reaches_perf_analyzer_and_the_words() -> None:
    constant, poisson = _settings(LOADS["constant"][0]), _settings(LOADS["rate"][0])
    args = constant.to_args("out.csv")
    assert args[args.index("--request-distribution") + 1] == "constant"
    assert args[args.index("--request-rate-range") + 1] == "200"
    assert "--async" in args and "--concurrency-range" not in args
    assert poisson.to_args("out.csv")[args.index("--request-distribution") + 1] == "poisson"
    assert constant.load_label() == "request rate 200/s (constant)"
    assert poisson.load_label() == "request rate 200/s (Poisson)"
    assert "request_distribution" not in poisson.to_dict()


def test_poisson_and_evenly_spaced_at_one_rate_are_not_the_same_offered_load() -> None:
    class Row:
        def __init__(self, settings: PerfSettings) -> None:
            self.model_name, self.load_key, self.settings = "m", "k", settings

    constant, poisson = _settings(LOADS["constant"][0]), _settings(LOADS["rate"][0])
    assert not same_offered_load(Row(constant), Row(poisson))
    assert same_offered_load(Row(constant), Row(replace(constant)))
    assert not same_offered_load(Row(constant), Row(replace(constant, request_rate_per_s=201.0)))


PLAN = {
    "model": "demo",
    "loads": {"concurrency": [2, 8], "request_rate": [300, 100], "constant_rate": 200},
}


def test_a_plan_file_asks_for_fixed_rates_at_the_reference_protocol_and_batch() -> None:
    plan = parse_plan(PLAN, "plan.yaml", Path("."))
    keys = [ld.key for ld in plan.experiment.loads]
    assert keys == ["grpc_b1_c8", "grpc_b1_c2", "grpc_b1_r100", "grpc_b1_r300", "grpc_b1_k200"]


@pytest.mark.parametrize(
    ("rates", "message"),
    [
        ([0], "plan.yaml: loads.constant_rate[0]: must be a number > 0, got 0"),
        ([5, 5], "plan.yaml: loads.constant_rate: values must be distinct, got ['5', '5']"),
        ([2e6], "plan.yaml: loads.constant_rate: each at most 1e+06, got 2e+06"),
        (["fast"], "plan.yaml: loads.constant_rate[0]: must be a number > 0, got 'fast'"),
    ],
)
def test_a_plan_files_bad_rates_are_one_line_naming_the_key(rates: list, message: str) -> None:
    data = {"model": "demo", "loads": {"constant_rate": rates}}
    with pytest.raises(PlanError) as caught:
        parse_plan(data, "plan.yaml", Path("."))
    assert str(caught.value) == message


def test_evenly_spaced_requests_wait_less_in_the_cost_model(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    """Kingman: below capacity Poisson arrivals queue, evenly spaced ones (CV 0) do not; the
    prediction is otherwise the same."""
    from tritonlab.report.run_data import load_run

    shutil.copytree(fixtures_dir / "cnn_run", tmp_path / "run")
    run = load_run(tmp_path / "run")
    model = run.cost_model
    assert model is not None
    summary = next(s for s in run.summaries if s.variant.name == "baseline")
    half_peak = 0.5 * (summary.throughput.median or 0)  # req/s at client batch 1
    settings = replace(summary.settings, concurrency=None, request_rate_per_s=half_peak)
    poisson = model.predict(replace(summary, settings=settings))
    constant = model.predict(
        replace(summary, settings=replace(settings, request_distribution="constant"))
    )
    assert poisson.regime == constant.regime == "open loop below capacity"
    assert poisson.queue_us is not None and poisson.queue_us > 0
    assert constant.queue_us == 0.0
    assert constant.throughput_infer_per_s == poisson.throughput_infer_per_s


def test_the_rate_within_budget_is_a_poisson_rate() -> None:
    """Evenly spaced requests queue less: a constant rate within the budget says nothing of
    what random traffic at that rate gets, so it does not raise a configuration's figure."""
    from tritonlab.decisions.frontier import max_rates_within_budget
    from tritonlab.decisions.recommend_records import OperatingPoint

    def point(rate: float, distribution: str) -> OperatingPoint:
        key = "r" if distribution == "poisson" else "k"
        return OperatingPoint(
            variant="baseline",
            description="baseline",
            load_key=f"grpc_b1_{key}{rate:g}",
            protocol="grpc",
            batch_size=1,
            concurrency=None,
            request_rate_per_s=rate,
            throughput_infer_per_s=rate,
            latency_p99_us=1000.0,
            request_distribution=distribution,  # type: ignore[arg-type]
        )

    rates = max_rates_within_budget([point(500, "poisson"), point(800, "constant")], 5000.0)
    assert list(rates.values()) == [500]
