"""The comparison for a model that carries state: how the sequence batcher shares the instances.

A model with state pairs (``models/state_pairs.py``) is served by Triton's sequence batcher, so
it cannot use the dynamic batcher, and what decides its latency is how concurrent sequences
reach the instances. ``sequence_plan`` compares, one change each from a baseline that binds each
sequence to a slot (``direct``) on one instance: the ``oldest`` strategy with as many candidate
sequences as the load keeps open, and a second instance. perf_analyzer sends sequences of
``REQUESTS_PER_SEQUENCE`` requests; its concurrency is the number of sequences open at a time.
``without_batching`` adapts another configuration set (``--configs``) to such a model.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from tritonlab.experiments.plan import ExperimentPlan, PlanBasics
from tritonlab.models.state_pairs import StateTensor
from tritonlab.repository.variants import ServingVariant

# perf_analyzer's own default length, held fixed (no +/- 20% variation): every cell's sequences
# are alike, and a sequence's first request (state from zeros) is one request in 20.
REQUESTS_PER_SEQUENCE = 20
# Sequences open at a time: more than one instance's single slot, so that the strategies differ.
CONCURRENT_SEQUENCES = 4


def _state_words(states: tuple[StateTensor, ...]) -> str:
    return ", ".join(f"{t.input} -> {t.output}" for t in states)


def _sequence_note(states: tuple[StateTensor, ...], batched: bool) -> str:
    return (
        f"The model carries state ({_state_words(states)}: each output is the next request's "
        "input), so it is served by Triton's sequence batcher: every request names its sequence, "
        "and the backend adapter keeps each sequence's state between its requests, from zeros at "
        "its start (Triton's implicit state needs a backend written against its C API; the "
        "Python-based backends here have none). The state tensors are not served: a client sends "
        f"only the other inputs. perf_analyzer sends sequences of {REQUESTS_PER_SEQUENCE} "
        "requests; its concurrency is the number of sequences open at a time. "
        + (
            "The dynamic batcher cannot serve such a model, so no configuration uses it."
            if batched
            else "The model has no batch axis, so every configuration is served with "
            "max_batch_size 0: one sequence per instance at a time under the direct strategy."
        )
    )


def _measured(plan: ExperimentPlan) -> ExperimentPlan:
    measurement = replace(plan.measurement, requests_per_sequence=REQUESTS_PER_SEQUENCE)
    return replace(plan, measurement=measurement)


def sequence_plan(
    basics: PlanBasics, states: tuple[StateTensor, ...], batched: bool
) -> ExperimentPlan:
    """Direct against oldest against two instances, at ``CONCURRENT_SEQUENCES`` sequences."""
    concurrency = basics.concurrency or CONCURRENT_SEQUENCES
    plain = partial(ServingVariant, max_batch_size=basics.max_batch_size if batched else 0)
    variants = [
        plain("baseline", "baseline (direct sequences, count=1)"),
        plain(
            "seq_oldest",
            f"oldest of {concurrency} sequences, count=1",
            sequence_strategy="oldest",
            max_candidate_sequences=concurrency,
        ),
        plain("instances_2", "direct sequences, count=2", instance_count=2),
    ]
    plan = _measured(basics.plan(variants, CONCURRENT_SEQUENCES))
    return replace(plan, notes=(*plan.notes, _sequence_note(states, batched)))


def without_batching(
    plan: ExperimentPlan, states: tuple[StateTensor, ...], batched: bool
) -> ExperimentPlan:
    """Another configuration set for a model that carries state: its dynamic-batching
    configurations dropped (the sequence batcher serves it), sequences measured."""
    kept = tuple(v for v in plan.variants if not v.dynamic_batching)
    dropped = [v.name for v in plan.variants if v.dynamic_batching]
    note = _sequence_note(states, batched) + (
        f" Dropped for it: {', '.join(dropped)}." if dropped else ""
    )
    return replace(_measured(plan), variants=kept, notes=(*plan.notes, note))
