"""The YAML plan loader: expansion into one-change variants and load points, and its errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tritonlab.errors import PlanError
from tritonlab.experiments.opening import plan_fingerprint
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.experiments.plan_file import (
    demo_plan_path,
    load_demo_plan,
    load_plan,
    parse_plan,
)
from tritonlab.explanation.rule_support import changed_fields


def _parse(data: Any, tmp_path: Path | None = None) -> Any:
    return parse_plan(data, "plan.yaml", tmp_path or Path("."))


def _error(data: Any) -> str:
    with pytest.raises(PlanError) as info:
        _parse(data)
    return str(info.value)


BASE: dict[str, Any] = {"model": "demo"}


def _configs(plan: Any) -> list[Any]:
    """The plan's configurations, without the block engine's A/A control."""
    return [v for v in plan.experiment.variants if not v.control]


def test_demo_plan_expands_to_one_change_variants() -> None:
    plan = load_demo_plan()
    exp = plan.experiment
    assert plan.source == "demo_sweep.yaml" and plan.is_demo
    assert [v.name for v in exp.variants] == [
        "baseline",
        "batch_0us",
        "batch_1000us",
        "batch_5000us",
        "batch_0us_x2",
        "batch_5000us_pref8",
        "baseline_aa",  # the block engine's A/A control
    ]
    assert exp.variants[-1].control and exp.measurement.engine == "blocks"
    assert exp.variants[0].description == "baseline (no batching, count=1)"
    assert exp.variants[3].description == "batching (5 ms, count=1)"
    # Every variant is one change from the earlier variant it differs from least.
    for i, variant in enumerate(exp.variants[1:-1], start=1):
        nearest = min(len(changed_fields(e, variant)) for e in exp.variants[:i])
        assert nearest == 1, variant.name
    assert [ld.key for ld in exp.loads] == [
        "grpc_b1_c8",
        "grpc_b1_c1",
        "grpc_b1_c4",
        "grpc_b1_c16",
        "http_b1_c8",
        "grpc_b1_p50",
        "grpc_b1_p80",
    ]
    assert plan.latency_budget_p99_us == 10000.0
    assert plan.target_load_infer_per_s == 2000.0
    # 10 short blocks; with --engine classic, 3 rounds of long cells and no control.
    assert exp.repeats == 10
    classic = plan.with_engine("classic").experiment
    assert classic.repeats == 3 and not any(v.control for v in classic.variants)
    assert len(classic.variants) * len(classic.loads) * classic.repeats <= 130
    assert plan.with_engine("classic").with_engine("blocks") == plan


def test_the_engine_comes_from_the_plan_and_repeats_given_are_kept() -> None:
    plan = _parse({**BASE, "repeats": 4, "measurement": {"engine": "classic"}})
    assert plan.engine == "classic" and plan.experiment.repeats == 4
    assert [v.name for v in _configs(plan)] == ["baseline"]
    blocks = plan.with_engine("blocks")
    assert blocks.experiment.repeats == 4  # the plan's own repeats, whatever the engine
    assert [v.name for v in blocks.experiment.variants] == ["baseline", "baseline_aa"]
    assert "measurement.engine: must be one of blocks, classic" in _error(
        {**BASE, "measurement": {"engine": "fast"}}
    )
    with pytest.raises(PlanError, match="--engine must be one of"):
        plan.with_engine("fast")


def test_fresh_inputs_are_a_measurement_setting_kept_out_of_older_fingerprints() -> None:
    """measurement.fresh_inputs reaches the plan's measurement settings and its stored form;
    a plan without it stores what plans stored before the setting existed."""
    fresh = _parse({**BASE, "measurement": {"fresh_inputs": True}}).experiment.measurement
    assert fresh.fresh_inputs and fresh.to_dict()["fresh_inputs"] is True
    plain = _parse(BASE).experiment.measurement
    assert not plain.fresh_inputs and "fresh_inputs" not in plain.to_dict()
    assert "measurement.fresh_inputs" in _error({**BASE, "measurement": {"fresh_inputs": "yes"}})


def test_demo_plan_file_is_shipped_with_the_package() -> None:
    path = demo_plan_path()
    assert path.is_file()
    assert yaml.safe_load(path.read_text())["model"] == "demo"


def test_axes_without_anchor_vary_from_the_baseline_and_enable_batching() -> None:
    plan = _parse({**BASE, "axes": {"max_queue_delay_microseconds": [0, 500]}})
    baseline, zero, half = _configs(plan)
    assert not baseline.dynamic_batching
    assert (zero.dynamic_batching, zero.max_queue_delay_us, zero.name) == (True, 0, "batch_0us")
    assert (half.max_queue_delay_us, half.name) == (500, "batch_500us")
    # Switching batching on with its delay counts as one change for the explanations.
    assert changed_fields(baseline, half) == ["dynamic_batching"]


def test_axis_value_equal_to_the_anchor_is_dropped() -> None:
    plan = _parse(
        {
            **BASE,
            "anchor": {"dynamic_batching": True},
            "axes": {"max_queue_delay_microseconds": [0, 2000], "instance_count": [1, 2]},
        }
    )
    assert [v.name for v in _configs(plan)] == [
        "baseline",
        "batch_0us",
        "batch_2000us",
        "batch_0us_x2",
    ]


def test_turning_batching_off_drops_the_anchor_batcher_settings() -> None:
    plan = _parse(
        {
            **BASE,
            "anchor": {"dynamic_batching": True, "max_queue_delay_microseconds": 100},
            "axes": {"dynamic_batching": [False], "instance_count": [2]},
        }
    )
    names = [v.name for v in _configs(plan)]
    # dynamic_batching: false on the anchor is the baseline again, so it adds nothing.
    assert names == ["baseline", "batch_100us", "batch_100us_x2"]


def test_turning_batching_off_drops_every_batcher_setting_preserve_ordering_too() -> None:
    """A plan whose anchor preserves ordering can still switch batching off (review finding:
    only the delay and preferred sizes were dropped, so the variant failed validation)."""
    plan = _parse(
        {
            **BASE,
            "anchor": {"dynamic_batching": True, "preserve_ordering": True},
            "combined": [{"changes": {"dynamic_batching": False, "instance_count": 2}}],
        }
    )
    off = [v for v in _configs(plan) if v.instance_count == 2]
    assert off and not off[0].dynamic_batching and not off[0].preserve_ordering


def test_every_knob_and_combined_variants() -> None:
    plan = _parse(
        {
            **BASE,
            "baseline": {"max_batch_size": 32},
            "anchor": {"dynamic_batching": True},
            "axes": {
                "preferred_batch_size": [[4, 8], 16],
                "max_batch_size": [8],
                "intra_op_thread_count": [2, None],
                "instance_kind": ["KIND_GPU"],
            },
            "combined": [
                {
                    "name": "trap_fix",
                    "description": "5 ms + preferred 8",
                    "changes": {"max_queue_delay_microseconds": 5000, "preferred_batch_size": 8},
                }
            ],
        }
    )
    by_name = {v.name: v for v in plan.experiment.variants}
    assert by_name["batch_0us_pref4_8"].preferred_batch_sizes == (4, 8)
    assert by_name["batch_0us_pref16"].preferred_batch_sizes == (16,)
    assert by_name["batch_0us_max8"].max_batch_size == 8
    assert by_name["batch_0us_t2"].intra_op_threads == 2
    assert by_name["batch_0us_tauto"].intra_op_threads is None
    assert by_name["batch_0us_gpu"].instance_kind == "KIND_GPU"
    fix = by_name["trap_fix"]
    assert (fix.description, fix.max_queue_delay_us, fix.preferred_batch_sizes) == (
        "5 ms + preferred 8",
        5000,
        (8,),
    )


def test_loads_reference_first_then_curve_protocols_batches_and_open_loop() -> None:
    plan = _parse(
        {
            **BASE,
            "loads": {
                "protocol": ["http", "grpc"],
                "batch_size": [1, 4],
                "concurrency": {"start": 1, "stop": 16, "factor": 2},
                "reference_concurrency": 4,
                "open_loop": {"peak_fractions": [0.9, 0.5, 0.5], "protocol": ["grpc", "http"]},
            },
        }
    )
    assert [ld.key for ld in plan.experiment.loads] == [
        "http_b1_c4",
        "http_b1_c1",
        "http_b1_c2",
        "http_b1_c8",
        "http_b1_c16",
        "grpc_b1_c4",
        "http_b4_c4",
        "grpc_b1_p50",
        "grpc_b1_p90",
        "http_b1_p50",
        "http_b1_p90",
    ]
    open_loop = plan.experiment.loads[-1]
    assert open_loop.open_loop and open_loop.concurrency is None
    assert open_loop.peak_fraction == 0.9


def test_concurrency_step_range_and_default_reference() -> None:
    loads = _parse({**BASE, "loads": {"concurrency": {"start": 2, "stop": 7, "step": 2}}})
    # 8 is not among the levels, so the reference is the middle level.
    assert [ld.key for ld in loads.experiment.loads] == ["grpc_b1_c4", "grpc_b1_c2", "grpc_b1_c6"]


def test_defaults() -> None:
    plan = _parse(BASE)
    exp = plan.experiment
    assert [v.name for v in exp.variants] == ["baseline", "baseline_aa"]
    assert exp.variants[0].max_batch_size == 64
    assert [ld.concurrency for ld in exp.loads] == [8, 1, 2, 4, 16]
    assert exp.repeats == 10 and exp.measurement.engine == "blocks"
    assert exp.measurement.measurement_interval_ms == 1000
    assert plan.latency_budget_p99_us is None and plan.target_load_infer_per_s is None
    assert exp.model_name == "simple_mlp"


def test_onnx_path_is_relative_to_the_plan_file(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "resnet.onnx").write_bytes(b"not checked here")
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text("model: models/resnet.onnx\nrepeats: 1\n")
    plan = load_plan(plan_path)
    assert plan.model_path == (tmp_path / "models" / "resnet.onnx").resolve()
    assert plan.experiment.model_name == "resnet"
    assert not plan.is_demo


def test_error_names_the_offending_list_item() -> None:
    message = _error({**BASE, "loads": {"concurrency": [1, 2, "x"]}})
    assert message == "plan.yaml: loads.concurrency[2]: must be an integer >= 1, got 'x'"


def test_unknown_keys_list_the_allowed_ones() -> None:
    message = _error({**BASE, "sweeps": {}})
    allowed = "allowed: model, repository, step, name, baseline"
    assert message.startswith(f"plan.yaml: sweeps: unknown key; {allowed}")
    message = _error({**BASE, "axes": {"batch_delay": [1]}})
    assert "axes.batch_delay: unknown key; allowed: dynamic_batching, max_queue_delay" in message
    message = _error({**BASE, "loads": {"open_loop": {"rates": [1]}}})
    assert "loads.open_loop.rates: unknown key; allowed: peak_fractions, protocol" in message
    message = _error({**BASE, "measurement": {"window": 5}})
    assert "measurement.window: unknown key; allowed: engine, measurement_interval_ms" in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, "plan.yaml: model: missing"),
        ({"model": 3}, "plan.yaml: model: must be an ONNX path or 'demo', got 3"),
        ({**BASE, "repeats": 0}, "plan.yaml: repeats: must be an integer >= 1, got 0"),
        ({**BASE, "repeats": True}, "plan.yaml: repeats: must be an integer >= 1, got True"),
        (
            {**BASE, "baseline": {"dynamic_batching": "yes"}},
            "plan.yaml: baseline.dynamic_batching: must be true or false, got 'yes'",
        ),
        (
            {**BASE, "baseline": {"instance_kind": "CPU"}},
            "plan.yaml: baseline.instance_kind: must be one of KIND_CPU, KIND_GPU, got 'CPU'",
        ),
        (
            {**BASE, "axes": {"max_queue_delay_microseconds": [100, -1]}},
            "plan.yaml: axes.max_queue_delay_microseconds[1]: must be an integer >= 0, got -1",
        ),
        (
            {**BASE, "axes": {"preferred_batch_size": [[4, 0]]}},
            "plan.yaml: axes.preferred_batch_size[0][1]: must be an integer >= 1, got 0",
        ),
        (
            {**BASE, "loads": {"protocol": ["grpc", "udp"]}},
            "plan.yaml: loads.protocol[1]: must be one of grpc, http, got 'udp'",
        ),
        (
            {**BASE, "loads": {"concurrency": [1, 1]}},
            "plan.yaml: loads.concurrency: levels must be distinct, got [1, 1]",
        ),
        (
            {**BASE, "loads": {"concurrency": [1, 2], "reference_concurrency": 8}},
            "plan.yaml: loads.reference_concurrency: must be one of loads.concurrency [1, 2]",
        ),
        (
            {**BASE, "loads": {"open_loop": {"peak_fractions": [0.5, 0]}}},
            "plan.yaml: loads.open_loop.peak_fractions[1]: must be a number > 0, got 0",
        ),
        (
            {**BASE, "loads": {"open_loop": {"peak_fractions": [3]}}},
            "plan.yaml: loads.open_loop.peak_fractions[0]: must be at most 2",
        ),
        (
            {**BASE, "loads": {"open_loop": {"peak_fractions": [0.5], "protocol": "http"}}},
            "plan.yaml: loads.open_loop.protocol[0]: must be one of grpc, got 'http'",
        ),
        (
            {**BASE, "loads": {"open_loop": {}}},
            "plan.yaml: loads.open_loop.peak_fractions: missing",
        ),
        (
            {**BASE, "recommend": {"latency_budget_p99_us": "5ms"}},
            "plan.yaml: recommend.latency_budget_p99_us: must be a number > 0, got '5ms'",
        ),
        (
            {**BASE, "combined": [{"name": "x"}]},
            "plan.yaml: combined[0].changes: missing",
        ),
        ({**BASE, "combined": {"a": 1}}, "plan.yaml: combined: must be a list of variants"),
        (
            {**BASE, "baseline": {"max_batch_size": 4}, "loads": {"batch_size": [1, 8]}},
            "plan.yaml: loads.batch_size: client batch size 8 exceeds max_batch_size 4 of "
            "baseline (baseline)",
        ),
        (
            {**BASE, "combined": [{"changes": {"preferred_batch_size": [128]}}]},
            "plan.yaml: combined[0]: variant 'batch_0us_pref128': preferred_batch_size 128 "
            "must be between 1 and max_batch_size (64)",
        ),
        (
            {
                **BASE,
                "axes": {"instance_count": [2]},
                "combined": [{"changes": {"instance_count": 2}}],
            },
            "plan.yaml: combined[0]: same configuration as axes.instance_count[0]",
        ),
        (
            {**BASE, "combined": [{"name": "baseline", "changes": {"instance_count": 2}}]},
            "plan.yaml: combined[0]: variant name 'baseline' is already used",
        ),
        (
            {**BASE, "combined": [{"name": "Bad Name", "changes": {"instance_count": 2}}]},
            "plan.yaml: combined[0]: variant 'Bad Name': name must be lower-case",
        ),
        (None, "plan.yaml: (top): the plan is empty"),
        ([1, 2], "plan.yaml: (top): must be a mapping, got [1, 2]"),
    ],
)
def test_errors_name_file_and_key(data: Any, expected: str) -> None:
    assert _error(data).startswith(expected)


def test_missing_onnx_file(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match=r"plan\.yaml: model: .*nope\.onnx does not exist"):
        parse_plan({"model": "nope.onnx"}, "plan.yaml", tmp_path)


def test_invalid_yaml_says_where(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("model: demo\nloads: [1, 2\n")
    with pytest.raises(PlanError, match=r"bad\.yaml: not valid YAML at line \d+, column \d+"):
        load_plan(path)
    with pytest.raises(PlanError, match="cannot read the plan"):
        load_plan(tmp_path / "absent.yaml")


def test_command_line_overrides_of_the_recommendation_settings() -> None:
    plan = _parse({**BASE, "recommend": {"latency_budget_p99_us": 5000}})
    assert plan.with_recommend(None, None).latency_budget_p99_us == 5000.0
    changed = plan.with_recommend(2000.0, 1500.0)
    assert (changed.latency_budget_p99_us, changed.target_load_infer_per_s) == (2000.0, 1500.0)
    assert changed.manifest_entry().latency_budget_p99_us == 2000.0


def test_peak_fraction_load_point() -> None:
    load = LoadPoint("grpc", 2, None, peak_fraction=0.75)
    assert load.key == "grpc_b2_p75"
    assert load.label == "grpc, batch 2, 75% of peak, Poisson"
    assert "peak_fraction" in load.to_dict()
    with pytest.raises(PlanError, match="peak fraction"):
        LoadPoint("grpc", 1, None, peak_fraction=2.5).validate()
    # The runner fills in the rate; the key stays that of the fraction.
    rated = LoadPoint("grpc", 2, None, request_rate_per_s=1234.0, peak_fraction=0.75)
    assert rated.key == "grpc_b2_p75"
    assert rated.label == "grpc, batch 2, 75% of peak = 1234 req/s, Poisson"


def test_open_loop_cells_use_async_requests() -> None:
    plan = load_demo_plan().experiment
    closed, rated = plan.loads[0], LoadPoint("grpc", 1, None, 900.0, 0.5)
    assert not plan.perf_settings(closed, "m", "u", {}).async_mode
    settings = plan.perf_settings(rated, "m", "u", {})
    assert settings.async_mode and settings.concurrency is None
    args = settings.to_args("x.csv")
    assert "--async" in args and args[args.index("--request-rate-range") + 1] == "900"


def test_plans_without_open_loop_keep_their_stored_fingerprint(seed_run_dir: Path) -> None:
    """Old run folders still resume: the seed plan's fingerprint did not change."""
    manifest = json.loads((seed_run_dir / "results" / "manifest.json").read_text())
    plan = ExperimentPlan.from_dict(manifest["plan"])
    assert plan_fingerprint(plan, manifest["model"]["sha256"]) == manifest["plan_fingerprint"]


def test_fingerprint_depends_on_the_plan_not_on_the_recommendation_settings() -> None:
    a = _parse({**BASE, "recommend": {"latency_budget_p99_us": 5000}})
    b = _parse({**BASE, "recommend": {"latency_budget_p99_us": 9000}})
    c = _parse({**BASE, "repeats": 2})
    assert plan_fingerprint(a.experiment, "m") == plan_fingerprint(b.experiment, "m")
    assert plan_fingerprint(a.experiment, "m") != plan_fingerprint(c.experiment, "m")
    round_trip = ExperimentPlan.from_dict(
        json.loads(json.dumps(load_demo_plan().experiment.to_dict()))
    )
    assert round_trip == load_demo_plan().experiment


def test_sequence_lengths_are_a_load_axis_at_the_reference() -> None:
    plan = _parse({**BASE, "loads": {"concurrency": [1, 8], "sequence_length": [128, 32, 512]}})
    keys = [ld.key for ld in plan.experiment.loads]
    assert keys == ["grpc_b1_c8_s128", "grpc_b1_c1_s128", "grpc_b1_c8_s32", "grpc_b1_c8_s512"]
    with pytest.raises(PlanError, match="distinct"):
        _parse({**BASE, "loads": {"sequence_length": [32, 32]}})
    with pytest.raises(PlanError, match=r"sequence_length\[0\]"):
        _parse({**BASE, "loads": {"sequence_length": [0]}})


@pytest.mark.parametrize(
    ("model", "builtin"),
    [("demo", "simple_mlp"), ("bert_encoder", "bert_encoder"), ("resnet18_cnn", "resnet18_cnn")],
)
def test_built_in_models_by_name(model: str, builtin: str) -> None:
    plan = parse_plan({"model": model}, "plan.yaml", Path("."))
    assert plan.builtin == builtin and plan.model_path is None
    assert plan.experiment.model_name == builtin
