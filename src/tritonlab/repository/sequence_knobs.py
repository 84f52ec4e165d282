"""The sequence batcher's knobs: how Triton schedules the requests of a model that carries state.

A model with state pairs (``models/state_pairs.py``) is served by Triton's sequence batcher
(``repository/config.py`` writes the section): every request names its sequence, and the
requests of one sequence reach one model instance in order. Three settings decide how sequences
share the instances, each a knob here with Triton's own name:

- ``sequence_strategy`` (``direct`` or ``oldest``): direct binds a sequence to one batch slot
  until it ends, so with more sequences than slots the rest wait in a backlog; oldest keeps up
  to ``max_candidate_sequences`` sequences per instance and runs whichever requests are oldest;
- ``max_sequence_idle_microseconds``: a sequence without a request for this long is ended and
  its slot freed (its state dropped);
- ``max_candidate_sequences``: oldest's pool of sequences per instance.
"""

from __future__ import annotations

from typing import Any

from tritonlab.repository.knob_type import Knob, ValueRule, arrow, differs
from tritonlab.repository.variants import SEQUENCE_STRATEGIES, ServingVariant


def _batcher(config: dict[str, Any]) -> dict[str, Any]:
    section = config.get("sequence_batching")
    return section if isinstance(section, dict) else {}


def _strategy_text(v: ServingVariant) -> str:
    if v.sequence_strategy == "oldest":
        return f"oldest of {v.max_candidate_sequences} sequences"
    return "direct sequences"


def sequence_section(v: ServingVariant) -> dict[str, Any]:
    """The ``sequence_batching`` settings the knobs decide (protobuf JSON, no control inputs)."""
    section: dict[str, Any] = {"max_sequence_idle_microseconds": v.max_sequence_idle_us}
    if v.sequence_strategy == "oldest":
        section["oldest"] = {"max_candidate_sequences": v.max_candidate_sequences}
    else:
        section["direct"] = {}
    return section


SEQUENCE_KNOBS: tuple[Knob, ...] = (
    Knob(
        "sequence_strategy",
        "sequence_strategy",
        "sequence_batching strategy",
        ValueRule("choice", choices=SEQUENCE_STRATEGIES),
        "sequence_batching",
        slug=differs("sequence_strategy", lambda v: f"seq_{v.sequence_strategy}"),
        describe=differs("sequence_strategy", _strategy_text),
        change=lambda b, a: (
            f"sequence_batching strategy {b.sequence_strategy} -> {a.sequence_strategy}"
            + (
                f" (max_candidate_sequences = {a.max_candidate_sequences})"
                if a.sequence_strategy == "oldest"
                else ""
            )
        ),
        question=(
            "Do sequences served oldest-first, sharing an instance, wait less than sequences "
            "bound to one slot each until they end?"
        ),
        plot_family=True,
        read=lambda c, _b: "oldest" if "oldest" in _batcher(c) else SEQUENCE_STRATEGIES[0],
    ),
    Knob(
        "max_sequence_idle_microseconds",
        "max_sequence_idle_us",
        "max_sequence_idle",
        ValueRule("int", 1),
        "sequence_batching",
        slug=differs("max_sequence_idle_us", lambda v: f"idle{v.max_sequence_idle_us}us"),
        describe=differs(
            "max_sequence_idle_us", lambda v: f"idle timeout {v.max_sequence_idle_us / 1e6:g} s"
        ),
        change=arrow("max_sequence_idle_microseconds", "max_sequence_idle_us"),
        question="Does ending idle sequences sooner free slots for waiting ones?",
        plot_family=True,
        read=lambda c, _b: int(_batcher(c).get("max_sequence_idle_microseconds", 1_000_000)),
    ),
    Knob(
        "max_candidate_sequences",
        "max_candidate_sequences",
        "max_candidate_sequences",
        ValueRule("int", 1),
        "sequence_batching",
        slug=differs("max_candidate_sequences", lambda v: f"cand{v.max_candidate_sequences}"),
        describe=lambda v, b: (
            f"{v.max_candidate_sequences} candidate sequences"
            if v.max_candidate_sequences != b.max_candidate_sequences
            and v.sequence_strategy == b.sequence_strategy
            else None
        ),
        change=arrow("max_candidate_sequences", "max_candidate_sequences"),
        question="Does a larger pool of candidate sequences let the oldest strategy batch more?",
        plot_family=True,
        read=lambda c, _b: int(
            (_batcher(c).get("oldest") or {}).get("max_candidate_sequences", 4) or 4
        ),
    ),
)
