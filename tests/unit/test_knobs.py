"""The knob table: one entry per ServingVariant configuration field, and what derives from it."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from tritonlab.errors import ConfigError, PlanError
from tritonlab.experiments.plan_checks import KNOBS as PLAN_KNOBS
from tritonlab.experiments.plan_checks import PlanChecker
from tritonlab.models.inspect import OnnxModelInfo, TensorSpec
from tritonlab.repository.config import build_model_config, config_dict
from tritonlab.repository.knobs import (
    CONFIG_FIELDS,
    KNOB_LABELS,
    KNOBS,
    NOT_KNOBS,
    RESPONSE_CACHE_BYTES,
    describe_change,
    knob_description,
    knob_slug,
    server_args,
)
from tritonlab.repository.variants import ServingVariant


def test_every_configuration_field_has_exactly_one_knob() -> None:
    variant_fields = {f.name for f in fields(ServingVariant)} - set(NOT_KNOBS)
    knob_fields = [k.field for k in KNOBS]
    assert len(knob_fields) == len(set(knob_fields))
    assert set(knob_fields) == variant_fields
    assert set(CONFIG_FIELDS) == variant_fields | {"extra_parameters", "config_overrides"}
    assert len({k.plan_name for k in KNOBS}) == len(KNOBS)
    assert set(KNOB_LABELS) == variant_fields
    assert {k.plan_name: k.field for k in KNOBS} == PLAN_KNOBS


def test_a_knob_at_its_default_is_not_named_and_a_change_is_worded() -> None:
    base = ServingVariant("baseline", "")
    for knob in KNOBS:
        if knob.field in ("dynamic_batching", "instance_count"):
            continue  # always in the head of the name and description
        assert knob.slug(base, base) is None, knob.plan_name
        assert knob.describe(base, base) is None, knob.plan_name
    for knob in KNOBS:
        assert describe_change(knob.field, base, base)


def test_response_cache_end_to_end_through_the_table() -> None:
    base = ServingVariant("baseline", "", dynamic_batching=False)
    cached = replace(base, response_cache=True)
    assert knob_slug(cached, base) == "nobatch_cache"
    assert knob_description(cached, base) == "no batching, count=1, response cache"
    assert describe_change("response_cache", base, cached).startswith("enabled the response cache")
    assert server_args([base]) == ()
    assert server_args([base, cached]) == (f"--cache-config=local,size={RESPONSE_CACHE_BYTES}",)
    x, y = TensorSpec("x", "TYPE_FP32", (4,)), TensorSpec("y", "TYPE_FP32", (2,))
    info = OnnxModelInfo(Path("m.onnx"), (x,), (y,), batched=True, opset=17, file_size_bytes=1)
    assert config_dict(info, cached, "m")["response_cache"] == {"enable": True}
    assert "response_cache" not in config_dict(info, base, "m")
    assert build_model_config(info, cached, "m").response_cache.enable  # Triton's own schema
    assert ServingVariant.from_dict(cached.to_dict()) == cached
    assert "response_cache" not in base.to_dict()  # older records stay byte-identical


def test_preserve_ordering_a_knob_added_in_two_source_files() -> None:
    """preserve_ordering came in as a ServingVariant field and one table entry (nothing else
    in src/ names it): the plan file, names, wording, the batcher check and config.pbtxt (inside
    dynamic_batching, by Triton's own schema) follow."""
    from tritonlab.experiments.plan_file import parse_plan

    plan = parse_plan(
        {
            "model": "demo",
            "anchor": {"dynamic_batching": True},
            "axes": {"preserve_ordering": [True]},
        },
        "plan.yaml",
        Path("."),
    )
    anchor, ordered = (
        v for v in plan.experiment.variants if not v.control and v.name != "baseline"
    )
    assert ordered.preserve_ordering and ordered.name == "batch_0us_ordered"
    assert describe_change("preserve_ordering", anchor, ordered).endswith("preserve_ordering: true")
    x, y = TensorSpec("x", "TYPE_FP32", (4,)), TensorSpec("y", "TYPE_FP32", (2,))
    info = OnnxModelInfo(Path("m.onnx"), (x,), (y,), batched=True, opset=17, file_size_bytes=1)
    assert config_dict(info, ordered, "m")["dynamic_batching"] == {
        "max_queue_delay_microseconds": 0,
        "preserve_ordering": True,
    }
    assert build_model_config(info, ordered, "m").dynamic_batching.preserve_ordering
    assert not build_model_config(info, anchor, "m").dynamic_batching.preserve_ordering
    with pytest.raises(ConfigError, match="preserve_ordering only apply with dynamic_batching"):
        replace(ServingVariant("baseline", ""), preserve_ordering=True).validate()
    src = Path(__file__).resolve().parents[2] / "src" / "tritonlab"
    naming = sorted(
        str(p.relative_to(src)) for p in src.rglob("*.py") if "preserve_ordering" in p.read_text()
    )
    assert naming == ["repository/knobs.py", "repository/variants.py"]


def test_the_plan_checker_follows_each_knobs_value_rule() -> None:
    check = PlanChecker("plan.yaml")
    assert check.knob("response_cache", True, "p") is True
    assert check.knob("preferred_batch_size", 8, "p") == (8,)
    assert check.knob("intra_op_thread_count", None, "p") is None
    with pytest.raises(PlanError, match="p: must be true or false"):
        check.knob("response_cache", "yes", "p")
    with pytest.raises(PlanError, match="must be one of KIND_CPU"):
        check.knob("instance_kind", "KIND_TPU", "p")
    with pytest.raises(PlanError, match="integer >= 1"):
        check.knob("instance_count", 0, "p")


def test_tune_fields_name_fields_of_tunes_search_space() -> None:
    from tritonlab.decisions.search_space import Knobs

    space = {f.name for f in fields(Knobs)}
    for knob in KNOBS:
        assert knob.tune_field is None or knob.tune_field in space, knob.plan_name
    start = Knobs(held=(("response_cache", True),))
    assert start.variant().response_cache and start.variant_name.endswith("_cache")
    assert start.description.endswith(", response cache")
    assert Knobs.from_dict(start.to_dict()) == start
    assert "held" not in Knobs().to_dict()


def test_tune_holds_only_the_knobs_the_table_marks_and_checks_their_values() -> None:
    from tritonlab.errors import PlanError
    from tritonlab.pipeline.tune_request import parse_holds

    assert parse_holds(["response_cache=true"]) == (("response_cache", True),)
    assert parse_holds([]) == ()
    with pytest.raises(PlanError, match="must be true or false"):
        parse_holds(["response_cache=yes please"])
    with pytest.raises(PlanError, match="the name one of response_cache"):
        parse_holds(["instance_count=4"])  # a knob tune moves itself
    with pytest.raises(PlanError, match="give name=value"):
        parse_holds(["response_cache"])


def test_the_plan_file_page_shows_every_knob() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "sweeps.md").read_text()
    for knob in KNOBS:
        assert f"  {knob.plan_name}: " in page, knob.plan_name


def test_a_delay_sweep_groups_by_every_knob_but_batching_and_the_delay() -> None:
    from tritonlab.report.load_plots import FAMILY_FIELDS, OFF_FIELDS

    assert set(FAMILY_FIELDS) == set(CONFIG_FIELDS) - {
        "dynamic_batching",
        "max_queue_delay_us",
        "extra_parameters",
        "config_overrides",  # passed through as given: the plots group by the knobs
    }
    assert "preferred_batch_sizes" not in OFF_FIELDS and "instance_count" in OFF_FIELDS


def test_a_one_knob_change_never_reads_as_changes_together() -> None:
    """Every knob changed alone gets its own question, or one that names it by its plan name."""
    from tritonlab.explanation.explain import _background

    for knob in KNOBS:
        text = _background([knob.field], ServingVariant("a", ""), ServingVariant("b", ""), 2)
        assert "together" not in text, knob.plan_name
        if text.startswith("What does changing"):
            assert knob.plan_name in text, text


def test_knobs_adding_to_one_section_keep_both_settings() -> None:
    from tritonlab.repository.knobs import merge_sections

    base = {"dynamic_batching": {"max_queue_delay_microseconds": 0}, "name": "m"}
    merged = merge_sections(base, {"dynamic_batching": {"preserve_ordering": True}})
    assert merged["dynamic_batching"] == {
        "max_queue_delay_microseconds": 0,
        "preserve_ordering": True,
    }
    assert base["dynamic_batching"] == {"max_queue_delay_microseconds": 0}  # not changed
