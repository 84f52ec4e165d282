"""The sequence batcher's rules (issue 35, item 4) on the recorded seed run, its configuration
and load rewritten as a sequence model's: the direct strategy's backlog, and a strategy change."""

from __future__ import annotations

import pytest
from test_rules import Names, ctx, scale_perf, with_settings, with_variant

from tritonlab.explanation.rules import apply_rules
from tritonlab.explanation.sequence_rules import busy_share, sequence_backlog, strategy_effect
from tritonlab.stats.aggregate import VariantSummary


def _sequences(s: VariantSummary, open_: int = 8, **variant: object) -> VariantSummary:
    s = with_variant(s, max_batch_size=0, **variant)
    return with_settings(s, requests_per_sequence=20, concurrency=open_)


def test_the_direct_backlog_is_named_instead_of_a_busy_instance(by_name: Names) -> None:
    direct = _sequences(by_name["baseline"])
    finding = sequence_backlog(ctx(direct, by_name | {"baseline": direct}))
    assert finding is not None
    assert "8 sequences were open for 1 slot (1 instance)" in finding.text
    assert "7 sequences at a time wait in the backlog" in finding.text
    busy = busy_share(direct)
    assert busy is not None and finding.figures["instance_busy_share"] == round(busy, 2)
    rules = {f.rule for f in apply_rules(ctx(direct, by_name | {"baseline": direct}))}
    assert "sequence-backlog" in rules and "saturated-server" not in rules


@pytest.mark.parametrize(
    "change",
    [
        {"open_": 1},  # one sequence for one slot: nobody waits
        {"sequence_strategy": "oldest"},  # oldest shares the instance
    ],
)
def test_no_backlog_without_more_sequences_than_slots(by_name: Names, change: dict) -> None:  # type: ignore[type-arg]
    s = _sequences(by_name["baseline"], **change)
    assert sequence_backlog(ctx(s, by_name)) is None
    assert sequence_backlog(ctx(by_name["baseline"], by_name)) is None  # not a sequence load


def test_oldest_is_named_where_throughput_rose_with_the_busy_share(by_name: Names) -> None:
    direct = _sequences(by_name["baseline"])
    oldest = scale_perf(
        _sequences(by_name["baseline"], sequence_strategy="oldest"), throughput_infer_per_s=1.5
    )
    names = by_name | {"baseline": direct}
    finding = strategy_effect(ctx(oldest, names, direct))
    assert finding is not None
    assert finding.text.startswith("direct -> oldest: throughput higher")
    assert "Why: oldest runs the oldest request among up to 4 sequences" in finding.text
    assert (
        finding.figures["instance_busy_share_after"] > finding.figures["instance_busy_share_before"]
    )


def test_a_strategy_change_that_moved_nothing_names_no_cause(by_name: Names) -> None:
    direct = _sequences(by_name["baseline"])
    oldest = _sequences(by_name["baseline"], sequence_strategy="oldest")
    finding = strategy_effect(ctx(oldest, by_name | {"baseline": direct}, direct))
    assert finding is not None and "Why: oldest runs" not in finding.text
    assert "the strategy is not named as the cause" in finding.text
    # another knob changed as well: not this rule's comparison
    wider = with_variant(oldest, instance_count=2)
    assert strategy_effect(ctx(wider, by_name | {"baseline": direct}, direct)) is None
