"""explanation/cost_model.py: the fitted serving cost model and what it predicts, by hand."""

from __future__ import annotations

import dataclasses
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from tritonlab.experiments.store import CellResult, save_cell
from tritonlab.explanation.cost_model import CostModel, ServingPathPoint
from tritonlab.explanation.cost_prediction import MODEL_FAILS_PCT, Prediction
from tritonlab.report.cost_model_text import cost_model_section
from tritonlab.report.run_data import load_run
from tritonlab.result_files import write_json_atomic
from tritonlab.run_layout import OPERATORS_FILE, RESULTS_DIR, SERVING_PATH_DIR
from tritonlab.stats.aggregate import VariantSummary

Names = dict[str, VariantSummary]

# Plausible terms for the recorded seed run (µs): serving path fixed and per request, the
# model's fixed and per-sample cost, the client's round trip outside the server, 2 cores.
S_EXEC, S_REQ, F, P, L0 = 380.0, 220.0, 29.0, 6.3, 500.0
IN_PROCESS = {1: F + P, 8: F + 8 * P}  # exactly on the line F + P x batch


def T(r: float, k: int = 1) -> float:
    """One execution of r requests of k samples, by hand."""
    return S_EXEC + S_REQ * r + F + P * r * k


@pytest.fixture(scope="module")
def model() -> CostModel:
    return CostModel(S_EXEC, S_REQ, F, P, L0, cores=2)


# --- fitting ---------------------------------------------------------------------------------


def test_fit_from_two_serving_points_and_in_process_timings() -> None:
    unbatched = ServingPathPoint(1.0, 600.0, 500.0)
    batched = ServingPathPoint(4.0, 1260.0, 450.0)
    fitted = CostModel.fit([batched, unbatched], IN_PROCESS, cores=2)  # any order
    assert fitted is not None
    # By hand: (1260 - 600) / (4 - 1) = 220 per request, 600 - 220 = 380 fixed.
    assert fitted.serving_per_request_us == pytest.approx(220.0)
    assert fitted.serving_fixed_us == pytest.approx(380.0)
    # The in-process line through (1, 35.3) and (8, 79.4): 6.3 per sample, 29 fixed.
    assert fitted.model_per_sample_us == pytest.approx(6.3)
    assert fitted.model_fixed_us == pytest.approx(29.0)
    # The client's round trip comes from the unbatched probe.
    assert fitted.client_overhead_us == 500.0
    assert fitted.cores == 2
    assert fitted.serving_points == (unbatched, batched)
    assert fitted.execution_us(1) == pytest.approx(T(1))
    assert fitted.execution_us(4, 2) == pytest.approx(T(4, 2))
    assert fitted.serving_us(1) == pytest.approx(600.0)
    assert fitted.model_us(8) == pytest.approx(79.4)
    assert fitted.serving_share(1) == pytest.approx(600.0 / T(1))
    assert json.loads(json.dumps(fitted.to_dict()))["serving_points"][1] == {
        "requests_per_execution": 4.0,
        "compute_us_per_execution": 1260.0,
        "client_overhead_us": 450.0,
        "gap_us": 0.0,
    }


def test_fit_without_a_batched_probe_has_no_per_request_term() -> None:
    one = ServingPathPoint(1.0, 600.0, 500.0)
    near = ServingPathPoint(1.3, 700.0, 510.0)  # less than half a request apart
    for points in ([one], [one, near]):
        fitted = CostModel.fit(points, IN_PROCESS, cores=2)
        assert fitted is not None
        assert fitted.serving_per_request_us == 0.0
        assert fitted.serving_fixed_us == 600.0


def test_fit_never_goes_negative() -> None:
    # A batched probe cheaper than the unbatched one (noise): no negative per-request cost.
    fitted = CostModel.fit(
        [ServingPathPoint(1.0, 600.0, 500.0), ServingPathPoint(4.0, 500.0, 500.0)], IN_PROCESS, 2
    )
    assert fitted is not None
    assert fitted.serving_per_request_us == 0.0
    assert fitted.serving_fixed_us == 550.0  # the line is flat: its level is the points' mean


def test_fit_needs_both_measurements() -> None:
    point = ServingPathPoint(1.0, 600.0, 500.0)
    assert CostModel.fit([], IN_PROCESS, cores=2) is None
    assert CostModel.fit([point], {1: 35.3}, cores=2) is None  # one batch size: no line
    assert CostModel.fit([point], {}, cores=2) is None


def _by_hand(cells: list[CellResult]) -> tuple[float, float, float]:
    requests, per_execution, client = [], [], []
    for c in cells:
        s, m = c.server, c.perf.measurement
        assert s is not None and m is not None
        requests.append(s.request_count / s.execution_count)
        per_execution.append(s.compute_us_per_inference * s.inference_count / s.execution_count)
        queue_to_overhead = (
            s.queue_us_per_request
            + s.compute_input_us_per_request
            + s.compute_infer_us_per_request
            + s.compute_output_us_per_request
            + s.overhead_us_per_request
        )
        client.append(max(0.0, m.latency_avg_us - queue_to_overhead))
    return (
        statistics.median(requests),
        statistics.median(per_execution),
        statistics.median(client),
    )


def test_serving_path_point_from_cells(by_name: Names) -> None:
    cells = list(by_name["batch_0ms_x1"].cells)
    point = ServingPathPoint.from_cells(cells)
    assert point is not None
    assert (
        point.requests_per_execution,
        point.compute_us_per_execution,
        point.client_overhead_us,
    ) == pytest.approx(_by_hand(cells))
    assert 3.5 < point.requests_per_execution < 4.5  # the 0 ms batcher's batches of about 4
    # The gap: one instance's cycle (requests per execution / requests per second) less its
    # compute, by hand for every cell, then the median.
    gaps = []
    for c in cells:
        assert c.server is not None and c.perf.measurement is not None
        r = c.server.request_count / c.server.execution_count
        cycle = r / c.perf.measurement.throughput_infer_per_s * 1e6
        gaps.append(max(0.0, cycle - c.server.compute_us_per_inference * c.server.mean_batch_size))
    assert point.gap_us == pytest.approx(statistics.median(gaps))
    # Cells without server statistics carry no point.
    assert ServingPathPoint.from_cells([dataclasses.replace(c, server=None) for c in cells]) is None
    assert ServingPathPoint.from_cells([]) is None


def test_gap_slows_a_busy_instance_and_leaves_out_the_all_in_flight_probe(by_name: Names) -> None:
    points = [
        ServingPathPoint(1.0, 250.0, 500.0, 10.0),
        ServingPathPoint(4.0, 600.0, 500.0, 150.0),
        ServingPathPoint(8.0, 650.0, 500.0, 600.0),  # its gap holds the clients' round trip
    ]
    fitted = CostModel.fit(points, IN_PROCESS, cores=2)
    assert fitted is not None
    assert fitted.gap_us(1.0) == 10.0
    assert fitted.gap_us(2.5) == pytest.approx(80.0)  # interpolated between 1 and 4
    assert fitted.gap_us(8.0) == 150.0  # held beyond the last probe used
    base = fitted.predict(by_name["baseline"])
    t1 = fitted.execution_us(1.0)
    assert base.throughput_infer_per_s == pytest.approx(1e6 / (t1 + 10.0))
    without = dataclasses.replace(fitted, serving_points=())
    assert without.gap_us(4.0) == 0.0


def test_the_cost_model_reads_the_run_folder(
    seed_run_dir: Path, by_name: Names, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(seed_run_dir, run_dir)
    assert load_run(run_dir).cost_model is None  # no operators.json in the seed run
    write_json_atomic(
        run_dir / RESULTS_DIR / OPERATORS_FILE,
        {
            "profile": {"operators": []},
            "in_process_us_per_execution": {str(b): t for b, t in IN_PROCESS.items()},
        },
    )
    assert load_run(run_dir).cost_model is None  # ... and no identity-model cells
    # Stand-ins for the identity probes: the baseline's cells (one request per execution)
    # and the 0 ms batcher's (about four).
    for source, name in (("baseline", "serving_path_1"), ("batch_0ms_x1", "serving_path_b")):
        for c in by_name[source].cells:
            variant = dataclasses.replace(c.variant, name=name)
            cell = dataclasses.replace(c, variant=variant, cell_id=f"{name}__r{c.repeat}")
            save_cell(run_dir, cell, SERVING_PATH_DIR)
    fitted = load_run(run_dir).cost_model
    assert fitted is not None
    low = ServingPathPoint.from_cells(list(by_name["baseline"].cells))
    high = ServingPathPoint.from_cells(list(by_name["batch_0ms_x1"].cells))
    assert low is not None and high is not None
    assert fitted.serving_points == (low, high)
    slope = (high.compute_us_per_execution - low.compute_us_per_execution) / (
        high.requests_per_execution - low.requests_per_execution
    )
    assert fitted.serving_per_request_us == pytest.approx(max(0.0, slope))
    assert fitted.model_fixed_us == pytest.approx(F)
    assert fitted.client_overhead_us == low.client_overhead_us


# --- closed-loop predictions on the recorded seed run ----------------------------------------


def test_baseline_is_no_batching(model: CostModel, by_name: Names) -> None:
    s = by_name["baseline"]
    p = model.predict(s)
    assert p.regime == "no batching"
    assert p.requests_per_execution == 1.0
    assert p.execution_us == pytest.approx(T(1))
    # One instance (cores left to the server > 1): min(1 / T(1), 8 / (T(1) + L0)) = 1 / T(1).
    assert p.throughput_infer_per_s == pytest.approx(1e6 / T(1))
    # Little's law: 8 in flight at X, minus execution and client: 8 T(1) - T(1) - L0.
    assert p.queue_us == pytest.approx(8 * T(1) - T(1) - L0)
    assert p.measured_throughput_infer_per_s == s.throughput.median
    assert p.measured_requests_per_execution == pytest.approx(1.0)
    assert p.measured_queue_us == s.queue_us.median


@pytest.mark.parametrize("name", ["batch_5ms_x1", "batch_5ms_x2"])
def test_5ms_at_concurrency_8_is_the_queue_delay_trap(
    model: CostModel, by_name: Names, name: str
) -> None:
    s = by_name[name]
    assert s.variant.max_batch_size == 64 and s.settings.concurrency == 8
    assert s.variant.max_queue_delay_us == 5000
    p = model.predict(s)
    assert p.regime.startswith("queue-delay trap")
    assert p.requests_per_execution == 8.0  # every batch takes everything in flight
    assert p.execution_us == pytest.approx(T(8))
    # c / (D + T(c) + L0), by hand.
    assert p.throughput_infer_per_s == pytest.approx(8 / (5000 + T(8) + L0) * 1e6)
    assert p.throughput_infer_per_s == pytest.approx(1036.35, abs=0.01)
    assert p.queue_us == pytest.approx(5000.0)  # each request waits out the delay
    assert p.failure() is None  # within 25% of the recorded throughput
    assert abs(p.throughput_error_pct or 100.0) < 5


def test_0ms_batching_forms_batches_of_c_over_n_plus_one(model: CostModel, by_name: Names) -> None:
    s = by_name["batch_0ms_x1"]
    p = model.predict(s)
    assert p.regime == "requests already waiting form the batch"
    assert p.requests_per_execution == 4.0  # 8 / (1 + 1)
    assert p.execution_us == pytest.approx(T(4))
    x = min(4 / T(4), 8 / (T(4) + L0))
    assert p.throughput_infer_per_s == pytest.approx(x * 1e6)
    assert p.queue_us == pytest.approx(8 / x - T(4) - L0)
    assert p.measured_requests_per_execution == pytest.approx(s.mean_batch.median)
    assert p.failure() is None


def test_batch_target_reached_leaves_at_once(model: CostModel, by_name: Names) -> None:
    s = by_name["batch_5ms_x1"]
    pref = dataclasses.replace(
        s, variant=dataclasses.replace(s.variant, preferred_batch_sizes=(8,))
    )
    p = model.predict(pref)
    assert p.regime == "batches of the target leave at once"
    assert p.requests_per_execution == 8.0
    x = min(8 / T(8), 8 / (T(8) + L0))
    assert p.throughput_infer_per_s == pytest.approx(x * 1e6)
    # A smaller target caps the batch below c / (N + 1).
    small = dataclasses.replace(
        s, variant=dataclasses.replace(s.variant, preferred_batch_sizes=(2,))
    )
    assert model.predict(small).requests_per_execution == 2.0


def test_0ms_batching_at_the_target_still_forms_c_over_n_plus_one(
    model: CostModel, by_name: Names
) -> None:
    s = by_name["batch_0ms_x1"]
    at_target = dataclasses.replace(s, settings=dataclasses.replace(s.settings, concurrency=64))
    p = model.predict(at_target)
    assert p.regime == "requests already waiting form the batch"
    assert p.requests_per_execution == 32.0  # 64 / (1 + 1), not the target of 64


def test_a_delay_shorter_than_an_execution_is_no_trap(model: CostModel, by_name: Names) -> None:
    s = by_name["batch_5ms_x1"]
    short = dataclasses.replace(s, variant=dataclasses.replace(s.variant, max_queue_delay_us=100))
    p = model.predict(short)
    assert p.regime == "requests already waiting form the batch"
    assert p.requests_per_execution == 4.0


def test_instances_are_capped_by_the_cores_left(model: CostModel, by_name: Names) -> None:
    s = by_name["baseline"]
    two = dataclasses.replace(s, variant=dataclasses.replace(s.variant, instance_count=2))
    client = s.perf_analyzer_cores.median
    assert client is not None and 0 < client < 1
    parallel = min(2.0, 2 - client)
    p = model.predict(two)
    assert p.throughput_infer_per_s == pytest.approx(min(parallel / T(1), 8 / (T(1) + L0)) * 1e6)


def test_client_batch_counts_samples(model: CostModel, by_name: Names) -> None:
    s = by_name["batch_0ms_x1"]
    k2 = dataclasses.replace(s, settings=dataclasses.replace(s.settings, batch_size=2))
    p = model.predict(k2)
    assert p.requests_per_execution == 4.0
    assert p.execution_us == pytest.approx(T(4, 2))
    x = min(4 / T(4, 2), 8 / (T(4, 2) + L0))
    assert p.throughput_infer_per_s == pytest.approx(2 * x * 1e6)  # inferences, not requests
    assert p.measured_requests_per_execution == pytest.approx((s.mean_batch.median or 0) / 2)


# --- open loop -------------------------------------------------------------------------------


def _open(s: VariantSummary, rate: float) -> VariantSummary:
    return dataclasses.replace(
        s,
        load_key=f"grpc_b1_r{rate:g}",
        settings=dataclasses.replace(s.settings, concurrency=None, request_rate_per_s=rate),
    )


def test_open_loop_below_capacity_returns_the_offered_rate(
    model: CostModel, by_name: Names
) -> None:
    p = model.predict(_open(by_name["baseline"], 1000.0))
    assert p.regime == "open loop below capacity"
    assert p.throughput_infer_per_s == pytest.approx(1000.0)
    # M/D/1: rho / (2 (1 - rho)) T with rho = lambda T.
    rho = 1000.0 / 1e6 * T(1)
    assert p.queue_us == pytest.approx(rho / (2 * (1 - rho)) * T(1))
    assert p.load_key == "grpc_b1_r1000"


def test_open_loop_with_a_delay_waits_for_the_batch(model: CostModel, by_name: Names) -> None:
    p = model.predict(_open(by_name["batch_5ms_x1"], 1000.0))
    assert p.regime == "open loop below capacity"
    r = 1 + 0.001 * 5000  # the requests that arrive within the delay
    assert p.requests_per_execution == pytest.approx(r)
    assert p.throughput_infer_per_s == pytest.approx(1000.0)
    rho = 0.001 * T(r) / r
    fill = 5000.0  # the first request waits the delay, the others half of it on average
    expected = rho / (2 * (1 - rho)) * T(r) + (fill + (r - 1) * fill / 2) / r
    assert p.queue_us == pytest.approx(expected)


def test_open_loop_above_capacity_is_overloaded(model: CostModel, by_name: Names) -> None:
    p = model.predict(_open(by_name["baseline"], 2000.0))
    assert p.regime.startswith("overloaded")
    assert p.throughput_infer_per_s == pytest.approx(1e6 / T(1))
    assert p.queue_us is None


# --- where the model fails -------------------------------------------------------------------


def _prediction(**changes: Any) -> Prediction:
    base = Prediction(
        variant="v",
        description="v",
        load_key="grpc_b1_c8",
        regime="requests already waiting form the batch",
        requests_per_execution=4.0,
        execution_us=1300.0,
        throughput_infer_per_s=3000.0,
        queue_us=800.0,
        measured_requests_per_execution=4.0,
        measured_execution_us=1300.0,
        measured_throughput_infer_per_s=3000.0,
        measured_queue_us=700.0,
    )
    return dataclasses.replace(base, **changes)


def test_failure_names_the_batch_term() -> None:
    p = _prediction(measured_requests_per_execution=8.0, measured_throughput_infer_per_s=5000.0)
    assert p.fails
    assert p.throughput_error_pct == pytest.approx(-40.0)
    assert p.batch_error_pct == pytest.approx(-50.0)
    text = p.failure()
    assert text is not None
    assert text.startswith(
        "batches formed differently (8.0 requests per execution measured, 4.0 predicted)"
    )
    assert "an execution cost" not in text


def test_failure_names_the_execution_term(model: CostModel, by_name: Names) -> None:
    # The recorded baseline: executions cost 397 µs, far below these terms' T(1) = 635 µs.
    p = model.predict(by_name["baseline"])
    assert p.throughput_error_pct is not None and p.throughput_error_pct < -MODEL_FAILS_PCT
    text = p.failure()
    assert text is not None
    assert f"an execution cost {p.measured_execution_us:,.0f} µs, not {T(1):,.0f} µs" in text
    assert "batches formed differently" not in text


def test_failure_with_both_terms_right_blames_parallelism() -> None:
    p = _prediction(measured_throughput_infer_per_s=2000.0)
    text = p.failure()
    assert text is not None
    assert "parallelism or the client's round trip" in text


def test_no_failure_within_25_pct() -> None:
    assert _prediction(measured_throughput_infer_per_s=3000.0 / 1.24).failure() is None
    assert _prediction(measured_throughput_infer_per_s=3000.0 / 0.76).failure() is None
    assert _prediction(measured_throughput_infer_per_s=3000.0 / 1.26).failure() is not None
    unmeasured = _prediction(measured_throughput_infer_per_s=None)
    assert unmeasured.throughput_error_pct is None
    assert not unmeasured.fails and unmeasured.failure() is None


def test_prediction_to_dict_is_json(model: CostModel, by_name: Names) -> None:
    data = json.loads(json.dumps(model.predict(by_name["baseline"]).to_dict()))
    assert data["regime"] == "no batching"
    assert data["failure"].startswith("an execution cost")
    assert data["throughput_error_pct"] == pytest.approx(100 * (1e6 / T(1) / 2461.24 - 1))


# --- the log section -------------------------------------------------------------------------


def test_cost_model_section(model: CostModel, seed_summaries: list[VariantSummary]) -> None:
    predictions = [model.predict(s) for s in seed_summaries]
    text = "\n".join(cost_model_section(model, predictions))
    assert text.startswith("## Serving cost model: predicted against measured")
    assert "T(r) = S_exec + S_req·r + F + P·r·k" in text
    assert "| S_exec: serving path, fixed per execution | 380 |" in text
    assert "| P: model, per sample | 6.3 |" in text
    assert "| baseline (no batching, count=1) | grpc_b1_c8 | no batching | 1.0 / 1.0 |" in text
    assert "queue-delay trap: every batch waits out the delay | 8.0 / 8.0" in text
    assert "1 miss by more than 25%" in text
    assert "Where the model fails (|error| > 25%):" in text
    assert "- baseline (no batching, count=1) at grpc_b1_c8: predicted 1,574" in text
    missing = "\n".join(cost_model_section(None, []))
    assert "Not available for this run" in missing


def test_a_right_total_for_a_wrong_reason_is_listed_apart(model: CostModel) -> None:
    # The queue-delay trap's throughput is set by the delay, so a slow execution barely moves
    # it: the total is within 25%, the execution term is not, and the log says so.
    p = _prediction(measured_execution_us=2600.0)
    assert not p.fails and p.failure() is None
    assert p.term_misses() == [
        "an execution cost 2,600 µs, not 1,300 µs (not shown by these figures; it may be the one "
        "instance sharing its core with the server's other work, or the model running colder "
        "than in-process)"
    ]
    # two instances may contend with each other (issue 36 audit: one instance was said to)
    two = dataclasses.replace(p, instances=2)
    assert (
        "(not shown by these figures; it may be instances contending for the cores, or the model"
        in two.term_misses()[0]
    )
    text = "\n".join(cost_model_section(model, [p, _prediction()]))
    assert "the right total for a partly wrong reason" in text
    assert "- v at grpc_b1_c8: an execution cost 2,600 µs" in text
    assert "Where the model fails" not in text
    assert p.to_dict()["term_misses"] == p.term_misses()


def test_an_execution_cheaper_than_predicted_is_not_blamed_on_contention() -> None:
    p = _prediction(measured_execution_us=600.0)
    assert p.term_misses() == [
        "an execution cost 600 µs, not 1,300 µs (cheaper than on the serving-path probes, "
        "which ran at another load or protocol)"
    ]


def test_execution_time_is_one_figure_per_repeat(by_name: Names) -> None:
    # One definition (ServerStatsDelta.compute_us_per_execution) behind the rules, the cost
    # model's measured column and its serving-path points.
    s = by_name["batch_0ms_x1"]
    by_hand = []
    for c in s.cells:
        assert c.server is not None
        by_hand.append(c.server.compute_us_per_inference * c.server.mean_batch_size)
    assert s.execution_us.values == pytest.approx(tuple(by_hand))
    assert s.execution_us.rounds == tuple(c.repeat for c in s.cells)


def test_a_miss_with_both_terms_near_says_how_near_not_as_predicted() -> None:
    """Issue 36 audit: "execution cost and batch size were as predicted" for 359 µs predicted
    against 452 measured (within 25%, not as predicted): the line gives both figures."""
    p = _prediction(measured_execution_us=1500.0, measured_throughput_infer_per_s=2000.0)
    assert p.fails and p.term_misses() == []
    failure = p.failure() or ""
    assert "each within 25% of the prediction either way (an execution 1,500 µs against 1,300)" in (
        failure
    )
    assert "as predicted" not in failure and "most of the error" not in failure
    # 1,650 µs is 27% over 1,300, though 1,300 is 21% under 1,650: a miss (issue 36 audit)
    over = _prediction(measured_execution_us=1650.0, measured_throughput_infer_per_s=2000.0)
    assert over.term_misses() and "an execution cost 1,650 µs, not 1,300 µs" in (
        over.failure() or ""
    )
