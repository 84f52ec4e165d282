"""Load keys: built and parsed in one place (``experiments.plan.LoadKey``), unchanged on disk."""

from __future__ import annotations

import pytest

from tritonlab.experiments.plan import LoadKey, LoadPoint, sequence_length_of


@pytest.mark.parametrize(
    ("point", "key"),
    [
        (LoadPoint(), "grpc_b1_c8"),
        (LoadPoint("http", 4, 16), "http_b4_c16"),
        (LoadPoint(concurrency=None, request_rate_per_s=200.0), "grpc_b1_r200"),
        (LoadPoint(concurrency=None, request_rate_per_s=2.5), "grpc_b1_r2.5"),
        (LoadPoint(concurrency=None, peak_fraction=0.7), "grpc_b1_p70"),
        (LoadPoint(concurrency=4, sequence_length=128), "grpc_b1_c4_s128"),
    ],
)
def test_load_key_round_trip(point: LoadPoint, key: str) -> None:
    assert point.key == key  # the keys on disk are what they were
    parsed = LoadKey.parse(key)
    assert parsed is not None and str(parsed) == key
    assert parsed.protocol == point.protocol and parsed.batch_size == point.batch_size
    assert parsed.sequence_length == point.sequence_length == sequence_length_of(key)


@pytest.mark.parametrize("key", ["", "grpc", "grpc_c8", "grpc_bx_c8", "grpc_b1_c8_x", "a_b1_c8_s"])
def test_load_key_parse_rejects_other_strings(key: str) -> None:
    assert LoadKey.parse(key) is None
    assert sequence_length_of(key) is None
