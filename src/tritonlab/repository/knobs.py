"""The serving knobs, one entry each: the table plans, explanations, labels and plots derive from.

A knob is a field of ``ServingVariant`` that a plan may set. Its entry says everything the rest of
tritonlab needs to know about it: the name a plan file uses (Triton's own, as in
``config.pbtxt``), the value rule a plan's value must meet, the slug and description a variant
that sets it gets, the wording an explanation uses for the change, the label a recommendation
prints, the question a one-knob comparison asks, whether it belongs to the dynamic batcher,
whether plots group by it, which backends accept it, what it adds to ``config.pbtxt`` beyond
the fields ``repository/config.py`` writes, the server flags it needs, and the field of tune's
search space that moves it.

A new knob is a field on ``ServingVariant`` (``variants.py``) and an entry here; a test ties the
two (every configuration field has exactly one entry).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import Any

from tritonlab.repository.knob_type import (
    Change,
    ConfigRead,
    Knob,
    ValueRule,
    Wording,
    arrow,
    differs,
    no_wording,
)
from tritonlab.repository.sequence_knobs import SEQUENCE_KNOBS
from tritonlab.repository.variants import (
    INSTANCE_KINDS,
    MODEL_BACKENDS,
    PRECISIONS,
    ServingVariant,
)

# ServingVariant fields that are not knobs: identity, free-form backend parameters, the A/A flag,
# and the config sections passed through as given.
NOT_KNOBS = ("name", "description", "extra_parameters", "control", "config_overrides")
# The local response cache's size when a plan enables the cache (Triton's ``--cache-config``):
# room for every distinct sample perf_analyzer sends many times over.
RESPONSE_CACHE_BYTES = 64 * 1024 * 1024

# Threads per instance, under each backend's own parameter name (the native Triton backends on
# an NGC container read the same keys: onnxruntime's intra_op_thread_count, and OpenVINO's
# properties INFERENCE_NUM_THREADS / NUM_STREAMS / INFERENCE_PRECISION_HINT).
THREADS_PARAMETER = {"onnxruntime": "intra_op_thread_count", "openvino": "INFERENCE_NUM_THREADS"}


def _fmt_delay(delay_us: int) -> str:
    return f"{delay_us // 1000} ms" if delay_us and delay_us % 1000 == 0 else f"{delay_us} µs"


def _batching_head(v: ServingVariant, _b: ServingVariant) -> str:
    """The seed's wording: ``batching (5 ms, count=2)`` or ``no batching, count=1``."""
    if v.dynamic_batching:
        return f"batching ({_fmt_delay(v.max_queue_delay_us)}, count={v.instance_count})"
    return f"no batching, count={v.instance_count}"


def _batching_change(before: ServingVariant, after: ServingVariant) -> str:
    if not after.dynamic_batching:
        return "disabled dynamic_batching"
    preferred = (
        f" and preferred_batch_size = {list(after.preferred_batch_sizes)}"
        if after.preferred_batch_sizes
        else ""
    )
    return (
        "enabled dynamic_batching with max_queue_delay_microseconds = "
        f"{after.max_queue_delay_us}{preferred}"
    )


def _threads_text(v: ServingVariant) -> str:
    engine = "ORT" if v.backend == "onnxruntime" else "OpenVINO"
    return f"{v.intra_op_threads or 'default'} {engine} threads"


def _engine_text(v: ServingVariant, b: ServingVariant) -> str | None:
    return v.engine if (v.backend, v.precision) != (b.backend, b.precision) else None


def _cache_server_args(variants: Sequence[ServingVariant]) -> tuple[str, ...]:
    if any(v.response_cache for v in variants):
        return (f"--cache-config=local,size={RESPONSE_CACHE_BYTES}",)
    return ()


def _batcher(config: dict[str, Any]) -> dict[str, Any]:
    section = config.get("dynamic_batching")
    return section if isinstance(section, dict) else {}


def _group(config: dict[str, Any]) -> dict[str, Any]:
    groups = config.get("instance_group") or [{}]
    return groups[0] if isinstance(groups[0], dict) else {}


def _parameter(config: dict[str, Any], key: str | None) -> str | None:
    entry = (config.get("parameters") or {}).get(key or "", {})
    value = str(entry.get("string_value", "")).strip() if isinstance(entry, dict) else ""
    return value or None


def _read_threads(config: dict[str, Any], backend: str) -> int | None:
    value = _parameter(config, THREADS_PARAMETER.get(backend))
    try:
        return None if value is None else int(value)
    except ValueError:
        raise ValueError(f"parameter {THREADS_PARAMETER[backend]} must be an integer") from None


def _plain_choice_knob(
    name: str,
    choices: tuple[str, ...],
    section: str,
    describe: Wording,
    change: Change,
    read: ConfigRead,
) -> Knob:
    """A choice knob named ``name`` in the plan file, on the variant and in a recommendation, its
    slug the value itself where it differs from the baseline's."""
    return Knob(
        name,
        name,
        name,
        ValueRule("choice", choices=choices),
        section,
        slug=differs(name, lambda v: str(getattr(v, name))),
        describe=describe,
        change=change,
        plot_family=True,
        backends=MODEL_BACKENDS,
        read=read,
    )


KNOBS: tuple[Knob, ...] = (
    Knob(
        "dynamic_batching",
        "dynamic_batching",
        "dynamic_batching",
        ValueRule("bool"),
        "dynamic_batching",
        slug=lambda v, _b: f"batch_{v.max_queue_delay_us}us" if v.dynamic_batching else "nobatch",
        describe=_batching_head,
        change=_batching_change,
        tune_field="batching",
        read=lambda c, _b: "dynamic_batching" in c,
    ),
    Knob(
        "max_queue_delay_microseconds",
        "max_queue_delay_us",
        "max_queue_delay",
        ValueRule("int", 0),
        "dynamic_batching",
        slug=no_wording,  # in the batching slug
        describe=no_wording,  # in the batching head
        change=arrow("max_queue_delay_microseconds", "max_queue_delay_us"),
        batcher=True,
        read=lambda c, _b: int(_batcher(c).get("max_queue_delay_microseconds", 0)),
    ),
    Knob(
        "preferred_batch_size",
        "preferred_batch_sizes",
        "preferred_batch_size",
        ValueRule("ints", 1),
        "dynamic_batching",
        slug=lambda v, _b: (
            "pref" + "_".join(str(s) for s in v.preferred_batch_sizes)
            if v.preferred_batch_sizes
            else None
        ),
        describe=lambda v, _b: (
            f"preferred {list(v.preferred_batch_sizes)}" if v.preferred_batch_sizes else None
        ),
        change=lambda _b, a: f"preferred_batch_size = {list(a.preferred_batch_sizes) or 'none'}",
        question="Does telling the batcher which batch size to form stop it from waiting?",
        batcher=True,
        plot_family=True,
        read=lambda c, _b: tuple(int(s) for s in _batcher(c).get("preferred_batch_size", ())),
    ),
    Knob(
        "max_batch_size",
        "max_batch_size",
        "max_batch_size",
        ValueRule("int", 1),
        "max_batch_size",
        slug=differs("max_batch_size", lambda v: f"max{v.max_batch_size}"),
        describe=differs("max_batch_size", lambda v: f"max_batch_size {v.max_batch_size}"),
        change=arrow("max_batch_size", "max_batch_size"),
        question="Does a different batch ceiling change what the batcher forms?",
        plot_family=True,
        tune_field="max_batch",
        read=lambda c, _b: int(c.get("max_batch_size", 0)),
    ),
    Knob(
        "instance_count",
        "instance_count",
        "instance_group count",
        ValueRule("int", 1),
        "instance_group",
        slug=lambda v, b: (
            f"x{v.instance_count}"
            if v.instance_count != b.instance_count or v.instance_count > 1
            else None
        ),
        describe=no_wording,  # in the batching head
        change=arrow("instance_group count", "instance_count"),
        plot_family=True,
        tune_field="instances",
        read=lambda c, _b: int(_group(c).get("count", 0)) or 1,
    ),
    Knob(
        "instance_kind",
        "instance_kind",
        "instance_group kind",
        ValueRule("choice", choices=INSTANCE_KINDS),
        "instance_group",
        slug=differs("instance_kind", lambda v: v.instance_kind.removeprefix("KIND_").lower()),
        describe=differs("instance_kind", lambda v: v.instance_kind),
        change=arrow("instance_group kind", "instance_kind"),
        plot_family=True,
        # KIND_AUTO (or none) runs on the CPU of a machine without a GPU
        read=lambda c, _b: "KIND_GPU" if _group(c).get("kind") == "KIND_GPU" else "KIND_CPU",
    ),
    Knob(
        "intra_op_thread_count",
        "intra_op_threads",
        "intra-op threads",
        ValueRule("optional_int", 0),
        "parameters",
        slug=differs(
            "intra_op_threads",
            lambda v: f"t{v.intra_op_threads if v.intra_op_threads is not None else 'auto'}",
        ),
        describe=differs("intra_op_threads", _threads_text),
        change=arrow("intra_op_thread_count", "intra_op_threads"),
        question=(
            "Do more intra-op threads per instance make each execution faster, and do they "
            "serve more than the same cores given to instances?"
        ),
        plot_family=True,
        tune_field="threads",
        backends=MODEL_BACKENDS,
        read=_read_threads,
    ),
    _plain_choice_knob(
        "backend",
        MODEL_BACKENDS,
        "backend",
        describe=_engine_text,  # backend and precision as one label
        change=lambda b, a: f"backend {b.backend} -> {a.backend} ({a.precision})",
        read=lambda _c, backend: backend,
    ),
    _plain_choice_knob(
        "precision",
        PRECISIONS,
        "parameters",
        describe=no_wording,  # in the backend's label
        change=lambda b, a: f"{a.backend} precision {b.precision} -> {a.precision}",
        read=lambda c, backend: (
            _parameter(c, "INFERENCE_PRECISION_HINT") or PRECISIONS[0]
            if backend == "openvino"
            else PRECISIONS[0]
        ),
    ),
    Knob(
        "preserve_ordering",
        "preserve_ordering",
        "preserve_ordering",
        ValueRule("bool"),
        "dynamic_batching",
        slug=differs(
            "preserve_ordering", lambda v: "ordered" if v.preserve_ordering else "unordered"
        ),
        describe=differs(
            "preserve_ordering", lambda v: "ordered" if v.preserve_ordering else "unordered"
        ),
        change=lambda _b, a: (
            "set dynamic_batching's preserve_ordering: "
            + ("true" if a.preserve_ordering else "false")
        ),
        question="Does returning responses in request order cost throughput or tail latency?",
        batcher=True,
        plot_family=True,
        config=lambda v: (
            {"dynamic_batching": {"preserve_ordering": True}} if v.preserve_ordering else {}
        ),
        read=lambda c, _b: bool(_batcher(c).get("preserve_ordering", False)),
    ),
    Knob(
        "response_cache",
        "response_cache",
        "response_cache",
        ValueRule("bool"),
        "response_cache",
        slug=differs("response_cache", lambda v: "cache" if v.response_cache else "nocache"),
        describe=differs(
            "response_cache", lambda v: "response cache" if v.response_cache else "no cache"
        ),
        change=lambda _b, a: (
            "enabled the response cache (response_cache { enable: true })"
            if a.response_cache
            else "disabled the response cache"
        ),
        question=(
            "Does Triton's response cache answer repeated requests without running the model, "
            "and what does it cost where a request is not in the cache?"
        ),
        plot_family=True,
        config=lambda v: {"response_cache": {"enable": True}} if v.response_cache else {},
        server_args=_cache_server_args,
        # Held, never moved: perf_analyzer cycles through a few samples, so a cache would
        # always win on traffic that is not the user's.
        tune_held=True,
        read=lambda c, _b: bool((c.get("response_cache") or {}).get("enable", False)),
    ),
    *SEQUENCE_KNOBS,
)

KNOB_BY_PLAN_NAME = {k.plan_name: k for k in KNOBS}
KNOB_BY_FIELD = {k.field: k for k in KNOBS}
# The knob the cache rule explains (``explanation/knob_rules.cache_effect``).
RESPONSE_CACHE = KNOB_BY_PLAN_NAME["response_cache"]
# What ``tune --hold`` accepts: the knobs tune holds and never moves.
HELD_KNOBS = {k.plan_name: k for k in KNOBS if k.tune_held}
# Every configuration field, in the table's order: what two variants are compared on.
CONFIG_FIELDS = (*(k.field for k in KNOBS), "extra_parameters", "config_overrides")
BATCHER_FIELDS = frozenset(k.field for k in KNOBS if k.batcher)
KNOB_LABELS = {k.field: k.label for k in KNOBS}
# The config.pbtxt fields the knobs write -> the knobs' plan names (what a user sets instead).
KNOB_SECTIONS: dict[str, tuple[str, ...]] = {}
for _knob in KNOBS:
    KNOB_SECTIONS[_knob.section] = (*KNOB_SECTIONS.get(_knob.section, ()), _knob.plan_name)


def changed_overrides(v: ServingVariant, baseline: ServingVariant) -> list[str]:
    """The ``config_overrides`` sections ``v`` sets differently from ``baseline``, sorted."""
    mine, theirs = v.config_overrides, baseline.config_overrides
    return sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))


def knob_slug(v: ServingVariant, baseline: ServingVariant) -> str:
    """A variant's name from what it sets: ``batch_0us``, ``batch_5000us_pref8``, ``nobatch_x2``
    (``cfg_model_warmup``: a config override that differs)."""
    parts = [part for k in KNOBS if (part := k.slug(v, baseline))]
    changed = changed_overrides(v, baseline)
    return "_".join(parts + (["cfg_" + "_".join(changed)] if changed else []))


def knob_description(v: ServingVariant, baseline: ServingVariant) -> str:
    """The seed's wording: ``batching (5 ms, count=2)``, plus any other knob that differs."""
    parts = [part for k in KNOBS if (part := k.describe(v, baseline))]
    changed = changed_overrides(v, baseline)
    if changed:
        parts.append(f"config {', '.join(changed)} overridden")
    return ", ".join(parts)


def describe_change(field_name: str, before: ServingVariant, after: ServingVariant) -> str:
    """How an explanation words the change of one field from ``before`` to ``after``."""
    knob = KNOB_BY_FIELD.get(field_name)
    if knob is None and field_name == "config_overrides":
        return f"overrode {', '.join(changed_overrides(after, before))} in config.pbtxt"
    return knob.change(before, after) if knob else f"{field_name} changed"


def merge_sections(base: dict[str, Any], additions: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``additions``; a dict section both hold keeps the settings of both."""
    merged = dict(base)
    for key, value in additions.items():
        held = merged.get(key)
        merged[key] = held | value if isinstance(held, dict) and isinstance(value, dict) else value
    return merged


def config_additions(v: ServingVariant) -> dict[str, Any]:
    """What the knobs add to ``config.pbtxt`` (protobuf JSON) beyond ``repository/config.py``."""
    return reduce(merge_sections, (k.config(v) for k in KNOBS if k.config), {})


def config_values(config: dict[str, Any], backend: str) -> dict[str, Any]:
    """Every knob's value in a user's config (protobuf JSON with proto field names)."""
    return {k.field: k.read(config, backend) for k in KNOBS if k.read is not None}


def server_args(variants: Sequence[ServingVariant]) -> tuple[str, ...]:
    """The tritonserver flags the variants' knobs need (e.g. a response cache's size)."""
    return tuple(arg for k in KNOBS if k.server_args for arg in k.server_args(variants))
