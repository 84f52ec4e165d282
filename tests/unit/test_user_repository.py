"""A user's Triton repository read as it is (issue 23): the baseline from its config.pbtxt, the
variants as patched copies, the models it needs, the one-line errors, the step statistics."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from repository_factory import tree_digest, write_test_repository

from tritonlab.errors import ConfigError
from tritonlab.experiments.repository_plan import (
    one_change_variants,
    repository_baseline,
)
from tritonlab.explanation.steps import queue_growth, steps_table
from tritonlab.models.source import KIND_BLS, KIND_ENSEMBLE, KIND_ONNX, KIND_PYTHON
from tritonlab.repository.config import read_config
from tritonlab.repository.layout import add_model, load_order
from tritonlab.repository.user_repo import (
    baseline_variant,
    patched_config,
    read_repository_model,
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_repository(tmp_path_factory.mktemp("repos") / "user-repo")


def test_each_kind_is_read_with_what_it_needs(repo: Path) -> None:
    kinds = {
        name: read_repository_model(repo, name).source
        for name in ("scorer", "double", "chain", "bls_chain")
    }
    assert {n: s.kind for n, s in kinds.items() if s} == {
        "scorer": KIND_ONNX,
        "double": KIND_PYTHON,
        "chain": KIND_ENSEMBLE,
        "bls_chain": KIND_BLS,
    }
    chain, bls = kinds["chain"], kinds["bls_chain"]
    assert chain is not None and chain.called == ("double", "scorer")
    assert bls is not None and bls.called == ("double", "scorer")  # named in its model.py
    info = read_repository_model(repo, "scorer")
    assert info.runs_onnx and info.opset == 17 and info.batched
    assert [s.name for s in info.inputs] == ["features_in"]
    python = read_repository_model(repo, "double")
    assert not python.runs_onnx and python.path.name == "config.pbtxt"


def test_the_baseline_is_the_users_config_and_a_variant_changes_one_section(repo: Path) -> None:
    config = read_config(repo / "scorer" / "config.pbtxt")
    base = baseline_variant(config, "onnxruntime")
    assert (base.max_batch_size, base.instance_count, base.intra_op_threads) == (8, 2, 1)
    assert base.dynamic_batching and base.max_queue_delay_us == 100
    same = patched_config(config, base, base, "scorer")
    assert same == config  # the baseline is the user's config, unchanged
    off = replace(base, dynamic_batching=False, max_queue_delay_us=0)
    patched = patched_config(config, off, base, "scorer__off")
    assert not patched.HasField("dynamic_batching") and patched.name == "scorer__off"
    assert patched.platform == "onnxruntime_onnx" and patched.instance_group[0].count == 2
    threads = patched_config(config, replace(base, intra_op_threads=4), base, "t")
    assert threads.parameters["intra_op_thread_count"].string_value == "4"
    openvino = patched_config(config, replace(base, backend="openvino"), base, "ov")
    assert openvino.backend == "openvino" and not openvino.platform


def test_one_change_variants_follow_the_backend(repo: Path) -> None:
    onnx = read_repository_model(repo, "scorer")
    base = repository_baseline(onnx)
    names = [v.name for v in one_change_variants(base, "onnxruntime")]
    assert names == ["nobatch_x2", "batch_5000us_x2", "batch_100us_x3", "batch_100us_x1",
                     "batch_100us_x2_t2"]  # fmt: skip
    python = read_repository_model(repo, "double")
    pbase = repository_baseline(python)
    assert pbase.backend == "python" and pbase.intra_op_threads is None
    assert [v.name for v in one_change_variants(pbase, "python")] == ["batch_0us", "nobatch_x2"]


def test_variants_are_written_beside_the_repository_never_in_it(repo: Path, tmp_path: Path) -> None:
    before = tree_digest(repo)
    info = read_repository_model(repo, "chain", step="scorer")
    base = repository_baseline(info)
    two = replace(base, name="x3", instance_count=3)
    out = tmp_path / "models"
    baseline_model = add_model(out, info, "chain", base)
    model = add_model(out, info, "chain", two)
    assert tree_digest(repo) == before
    assert load_order(model) == ["double", "scorer__x3", "chain__x3"]
    assert baseline_model.called == (("double", "double"), ("scorer", "scorer"))
    ensemble = read_config(out / "chain__x3" / "config.pbtxt")
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == ["double", "scorer__x3"]
    assert read_config(out / "scorer__x3" / "config.pbtxt").instance_group[0].count == 3
    # the ONNX file is shared (hard link or copy), the config is the written one
    assert (out / "scorer__x3" / "1" / "model.onnx").read_bytes() == (
        repo / "scorer" / "1" / "model.onnx"
    ).read_bytes()
    (out / "scorer__x3" / "config.pbtxt").write_text("changed")
    assert tree_digest(repo) == before, "writing the copy never wrote through to the user's file"


def test_errors_name_what_to_change(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tensorrt_plan.*--server-bin"):
        read_repository_model(repo, "engine_plan")
    assert read_repository_model(repo, "engine_plan", native=True).source is not None
    with pytest.raises(ConfigError, match=r"no such model folder.*models there: bls_chain"):
        read_repository_model(repo, "nope")
    with pytest.raises(ConfigError, match="not a step of ensemble 'chain'; its steps: double"):
        read_repository_model(repo, "chain", step="postprocess")
    with pytest.raises(ConfigError, match="--step applies to an ensemble"):
        read_repository_model(repo, "scorer", step="scorer")
    with pytest.raises(ConfigError, match="not a folder"):
        read_repository_model(tmp_path / "missing", "scorer")


def test_step_shares_and_queue_growth_from_stored_cells() -> None:
    from tritonlab.experiments.store import CellResult

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "seed_run" / "results" / "cells"
    cell = CellResult.from_dict(
        __import__("json").loads(sorted(fixture.glob("*.json"))[0].read_text())
    )
    assert cell.server is not None
    zero = {"compute_input_us_per_request": 0.0, "compute_output_us_per_request": 0.0}
    slow = replace(cell.server, queue_us_per_request=900.0, compute_infer_us_per_request=100.0,
                   **zero)  # fmt: skip
    fast = replace(cell.server, queue_us_per_request=100.0, compute_infer_us_per_request=100.0,
                   **zero)  # fmt: skip
    low = replace(cell, steps={"pre": fast, "cnn": fast})
    low = replace(low, perf=replace(cell.perf, settings=replace(cell.perf.settings, concurrency=1)))
    high = replace(cell, steps={"pre": fast, "cnn": slow}, load_key="grpc_b1_c16")
    high = replace(
        high, perf=replace(cell.perf, settings=replace(cell.perf.settings, concurrency=16))
    )
    table = steps_table([low, high])
    assert [r.binding.step for r in table] == ["pre", "cnn"]  # a tie goes to the first
    slow_us, fast_us = slow.request_us_per_request, fast.request_us_per_request
    assert table[1].binding.share == pytest.approx(slow_us / (slow_us + fast_us))
    growth = {g.step: g.grows for g in queue_growth(table, cell.variant.name)}
    assert growth == {"pre": False, "cnn": True}


def test_a_sweep_plan_takes_a_repository_and_its_backends_knobs(repo: Path, tmp_path: Path) -> None:
    from tritonlab.errors import PlanError
    from tritonlab.experiments.plan_file import parse_plan

    data = {
        "repository": str(repo),
        "model": "double",
        "axes": {"instance_count": [3], "dynamic_batching": [True]},
    }
    plan = parse_plan(data, "plan.yaml", tmp_path)
    assert plan.repository == repo and plan.experiment.model_name == "double"
    baseline, *others = [v for v in plan.experiment.variants if not v.control]
    assert baseline.backend == "python" and baseline.intra_op_threads is None
    assert [v.name for v in others] == ["nobatch_x3", "batch_0us"]
    with pytest.raises(PlanError, match="the python backend does not read it"):
        parse_plan({**data, "axes": {"intra_op_thread_count": [2]}}, "plan.yaml", tmp_path)
    with pytest.raises(PlanError, match="no such model folder"):
        parse_plan({**data, "model": "nope"}, "plan.yaml", tmp_path)
    chain = parse_plan({**data, "model": "chain", "step": "scorer"}, "plan.yaml", tmp_path)
    assert chain.step == "scorer" and chain.experiment.variants[0].max_batch_size == 8
