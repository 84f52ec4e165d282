"""The configurations ``run --repository`` compares: the user's own configuration as the
baseline, and variants that each change one knob the tuned model's backend accepts.

The changes: dynamic batching switched (on at a 0 µs delay where the user has none, off where
the user has it), a 5 ms delay where the user batches with another, one instance more, one
fewer where the user runs several, and twice the threads where the backend reads a thread
count. Each variant's name and description come from the knob table, as a plan file's do.
"""

from __future__ import annotations

from dataclasses import replace

from tritonlab.experiments.plan import ExperimentPlan, PlanBasics
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.source import RepositorySource, kind_words
from tritonlab.repository.knobs import BATCHER_FIELDS, KNOB_BY_FIELD, knob_description, knob_slug
from tritonlab.repository.user_repo import baseline_variant, left_out_knobs, read_user_model
from tritonlab.repository.variants import ServingVariant

# The load a repository run measures at: the seed's concurrency.
REPOSITORY_CONCURRENCY = 8
BATCHING_DELAY_US = 5000


def own_baseline(info: OnnxModelInfo) -> ServingVariant | None:
    """A repository model's tuned model as its own configuration (the user's config.pbtxt)
    makes it, the baseline every variant changes; None for an ONNX file, which tritonlab
    configures."""
    if info.source is None:
        return None
    tuned = read_user_model(info.source.root, info.source.tuned)
    return baseline_variant(tuned.config, info.source.tuned_backend)


def repository_baseline(info: OnnxModelInfo) -> ServingVariant:
    """``own_baseline`` of a model read from a repository (the reproduction scripts call it)."""
    baseline = own_baseline(info)
    if baseline is None:
        raise ValueError("repository_baseline needs a model read from a repository")
    return baseline


def batching_off(v: ServingVariant) -> ServingVariant:
    """``v`` with batching off: switching it off drops every batcher setting with it."""
    defaults = ServingVariant("", "")
    return replace(v, dynamic_batching=False, **{f: getattr(defaults, f) for f in BATCHER_FIELDS})


def one_change_variants(baseline: ServingVariant, backend: str) -> list[ServingVariant]:
    """The variants one knob away from ``baseline`` that ``backend`` accepts."""
    changed: list[ServingVariant] = []
    if baseline.max_batch_size > 0:
        if baseline.dynamic_batching:
            changed.append(batching_off(baseline))
            if baseline.max_queue_delay_us != BATCHING_DELAY_US:
                changed.append(replace(baseline, max_queue_delay_us=BATCHING_DELAY_US))
        else:
            changed.append(replace(baseline, dynamic_batching=True, max_queue_delay_us=0))
    changed.append(replace(baseline, instance_count=baseline.instance_count + 1))
    if baseline.instance_count > 1:
        changed.append(replace(baseline, instance_count=baseline.instance_count - 1))
    if backend in KNOB_BY_FIELD["intra_op_threads"].backends:
        changed.append(replace(baseline, intra_op_threads=2 * (baseline.intra_op_threads or 1)))
    return [
        replace(v, name=knob_slug(v, baseline), description=knob_description(v, baseline))
        for v in changed
    ]


def repository_plan(
    source: RepositorySource, baseline: ServingVariant, basics: PlanBasics
) -> ExperimentPlan:
    """The baseline (the user's configuration) and its one-change variants at one load."""
    plan = basics.plan(
        [baseline, *one_change_variants(baseline, source.tuned_backend)], REPOSITORY_CONCURRENCY
    )
    what = kind_words(source.kind, source.called)
    notes = [
        f"The model is `{source.model}` of the repository `{source.root.name}`, {what}; the "
        "baseline is its own config.pbtxt as given, and every other configuration changes one "
        "knob of it (written beside it, in this run folder's models/; the repository itself "
        "is only read).",
    ]
    if source.tuned != source.model:
        notes.append(
            f"The configurations change step `{source.tuned}` ({source.tuned_reason}); the "
            "other steps run as the user configured them."
        )
    if left_out := left_out_knobs(source.tuned_backend):
        notes.append("Knobs left out: " + "; ".join(left_out) + ".")
    return replace(plan, notes=tuple(notes))


__all__ = ["REPOSITORY_CONCURRENCY", "one_change_variants", "repository_plan"]
