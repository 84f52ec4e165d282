"""The single steps as library calls: their configuration, and refusals before any server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonlab.errors import TritonlabError
from tritonlab.pipeline.steps import PerfLoad, perf_step, step_variant
from tritonlab.server.launch import ServerOptions


def test_step_variant_states_what_it_serves() -> None:
    plain = step_variant()
    assert (plain.dynamic_batching, plain.instance_count, plain.max_queue_delay_us) == (False, 1, 0)
    batched = step_variant(batching=True, delay_us=500, instances=3, max_batch=16)
    assert batched.description == "batching 500 µs, count=3"
    assert (batched.max_queue_delay_us, batched.max_batch_size) == (500, 16)
    # A delay without batching is not served: the step would say one thing and run another.
    assert step_variant(batching=False, delay_us=500).max_queue_delay_us == 0


def test_perf_step_refuses_an_unknown_protocol_before_serving(tmp_path: Path) -> None:
    missing = tmp_path / "never-read.onnx"  # not opened: the protocol is checked first
    with pytest.raises(TritonlabError, match="--protocol must be one of grpc, http"):
        perf_step(
            missing,
            None,
            step_variant(),
            PerfLoad(protocol="udp"),
            ServerOptions(),
            tmp_path / "perf",
            {},
        )
    assert not (tmp_path / "perf").exists()
