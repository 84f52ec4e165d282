"""Serving variants: the configuration knobs tritonlab compares, as plain validated values.

A variant is what one row of the experiment log changes: dynamic batching and its queue delay,
preferred batch sizes, ``max_batch_size``, the instance group's count and kind, the threads per
instance, the backend that runs the model (onnxruntime or OpenVINO, at a stated precision) and
the response cache; any other section of Triton's model configuration passes through as a
``config_overrides`` entry; a model that carries state is served by the sequence batcher, whose
strategy, idle timeout and candidate sequences are knobs too. ``knobs.py`` holds one entry per
knob: how plans, logs and tune name it.
Validation happens here, before any server starts, with a message that names the field to change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from tritonlab.errors import ConfigError
from tritonlab.records import Record, later

INSTANCE_KINDS = ("KIND_CPU", "KIND_GPU")
# The Python-based backends that run model.onnx (backends/<name>/model.py); the first is the
# default, and the one the correctness check's reference runs.
MODEL_BACKENDS = ("onnxruntime", "openvino")
DEFAULT_BACKEND = MODEL_BACKENDS[0]
# Triton's Python backend: a user's own model.py (``--repository``), measured and tuned on the
# knobs Triton applies to any model (batching, instances, max batch, cache).
PYTHON_BACKEND = "python"
# Inference precision: onnxruntime runs the graph's own types; OpenVINO is pinned to one of
# these (its CPU default would be bf16 where the processor has it, so it is never left open).
PRECISIONS = ("f32", "bf16", "f16")
DEFAULT_PRECISION = "f32"
DEFAULT_MAX_BATCH_SIZE = 64
# Triton's sequence batcher strategies, for a model that carries state from request to request
# (``models/state_pairs.py``): ``direct`` binds each sequence to one batch slot of one instance
# until it ends; ``oldest`` keeps up to ``max_candidate_sequences`` sequences per instance and
# runs the oldest requests among them.
SEQUENCE_STRATEGIES = ("direct", "oldest")
# Triton's own default: a sequence with no request for 1 s is ended and its slot freed.
DEFAULT_SEQUENCE_IDLE_US = 1_000_000
DEFAULT_CANDIDATE_SEQUENCES = 4
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_]*$")


@dataclass(frozen=True)
class ServingVariant(Record):
    """One serving configuration. ``name`` is a slug used in model and file names."""

    name: str
    description: str
    dynamic_batching: bool = False
    max_queue_delay_us: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    instance_count: int = 1
    instance_kind: str = "KIND_CPU"
    # onnxruntime intra-op threads per instance; None leaves onnxruntime's default.
    intra_op_threads: int | None = 1
    extra_parameters: dict[str, str] = field(default_factory=dict)
    # The backend that runs model.onnx, and the precision it computes in.
    backend: str = later(DEFAULT_BACKEND)
    precision: str = later(DEFAULT_PRECISION)
    # Triton's response cache: a repeated request is answered without running the model.
    response_cache: bool = later(False)
    # The dynamic batcher answers in request order (``dynamic_batching.preserve_ordering``).
    preserve_ordering: bool = later(False)
    # An A/A control: the baseline's configuration again under another name. Its difference
    # from the baseline is the run's noise floor; it is never a candidate or explained.
    control: bool = later(False)
    # The sequence batcher, used only for a model with state pairs (``repository/config.py``
    # writes ``sequence_batching`` for it): strategy, idle timeout, and (oldest) the candidates.
    sequence_strategy: str = later(SEQUENCE_STRATEGIES[0])
    max_sequence_idle_us: int = later(DEFAULT_SEQUENCE_IDLE_US)
    max_candidate_sequences: int = later(DEFAULT_CANDIDATE_SEQUENCES)
    # Sections of Triton's ModelConfig tritonlab does not model (``model_warmup``,
    # ``optimization``, ...), in protobuf's JSON mapping, passed through
    # to ``config.pbtxt`` as given (``repository/config.py`` checks them against the schema).
    config_overrides: dict[str, Any] = later(factory=dict)

    @property
    def engine(self) -> str:
        """The backend and precision as one label: ``onnxruntime``, ``openvino f32``."""
        if self.backend == DEFAULT_BACKEND and self.precision == DEFAULT_PRECISION:
            return self.backend
        return f"{self.backend} {self.precision}"

    def validate(self, model_batches: bool = True) -> None:
        """Raise ``ConfigError`` naming the field if Triton would reject this configuration."""
        where = f"variant '{self.name}'"
        if not _NAME_RE.fullmatch(self.name):
            raise ConfigError(
                f"{where}: name must be lower-case letters, digits and '_' "
                "(it becomes a model name)"
            )
        if self.max_batch_size < 0:
            raise ConfigError(f"{where}: max_batch_size must be >= 0, got {self.max_batch_size}")
        if not model_batches and self.dynamic_batching:
            raise ConfigError(
                f"{where}: the model has no batch axis, so Triton cannot batch its requests; "
                "turn dynamic_batching off, or export the model with a dynamic first axis"
            )
        if self.dynamic_batching and self.max_batch_size == 0:
            raise ConfigError(
                f"{where}: dynamic_batching needs max_batch_size > 0; set max_batch_size or "
                "turn dynamic_batching off"
            )
        if self.max_queue_delay_us < 0:
            raise ConfigError(
                f"{where}: max_queue_delay_microseconds must be >= 0, got {self.max_queue_delay_us}"
            )
        if not self.dynamic_batching and (
            self.max_queue_delay_us or self.preferred_batch_sizes or self.preserve_ordering
        ):
            raise ConfigError(
                f"{where}: max_queue_delay_microseconds, preferred_batch_size and "
                "preserve_ordering only apply with dynamic_batching on; enable dynamic_batching "
                "or drop them"
            )
        for size in self.preferred_batch_sizes:
            if size < 1 or size > self.max_batch_size:
                raise ConfigError(
                    f"{where}: preferred_batch_size {size} must be between 1 and "
                    f"max_batch_size ({self.max_batch_size})"
                )
        if self.instance_count < 1:
            raise ConfigError(
                f"{where}: instance_group count must be >= 1, got {self.instance_count}"
            )
        if self.instance_kind not in INSTANCE_KINDS:
            raise ConfigError(
                f"{where}: instance_group kind must be one of {', '.join(INSTANCE_KINDS)}, "
                f"got {self.instance_kind!r}"
            )
        if self.intra_op_threads is not None and self.intra_op_threads < 0:
            raise ConfigError(
                f"{where}: intra_op_thread_count must be >= 0, got {self.intra_op_threads}"
            )
        if self.backend not in (*MODEL_BACKENDS, PYTHON_BACKEND):
            raise ConfigError(
                f"{where}: backend must be one of {', '.join(MODEL_BACKENDS)}, got {self.backend!r}"
            )
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"{where}: precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.backend == "onnxruntime" and self.precision != DEFAULT_PRECISION:
            raise ConfigError(
                f"{where}: onnxruntime runs the graph's own types; precision {self.precision} "
                "needs backend openvino (or export the model in that precision)"
            )
        if self.sequence_strategy not in SEQUENCE_STRATEGIES:
            raise ConfigError(
                f"{where}: sequence strategy must be one of {', '.join(SEQUENCE_STRATEGIES)}, "
                f"got {self.sequence_strategy!r}"
            )
        if self.max_sequence_idle_us < 1 or self.max_candidate_sequences < 1:
            raise ConfigError(
                f"{where}: max_sequence_idle_microseconds and max_candidate_sequences must be "
                f">= 1, got {self.max_sequence_idle_us} and {self.max_candidate_sequences}"
            )
        if self.backend == "openvino" and self.instance_kind == "KIND_GPU":
            raise ConfigError(
                f"{where}: the openvino backend runs on the CPU here (its GPU plugin is for "
                "Intel GPUs); use instance_kind KIND_CPU, or backend onnxruntime for KIND_GPU"
            )


def seed_comparison_variants(max_batch_size: int = DEFAULT_MAX_BATCH_SIZE) -> list[ServingVariant]:
    """The seed's four configurations: a baseline and three single-variable changes."""
    plain = partial(ServingVariant, max_batch_size=max_batch_size)
    batching = partial(plain, dynamic_batching=True)
    return [
        plain("baseline", "baseline (no batching, count=1)"),
        batching("batch_5ms_x1", "batching (5 ms, count=1)", max_queue_delay_us=5000),
        batching(
            "batch_5ms_x2", "batching (5 ms, count=2)", max_queue_delay_us=5000, instance_count=2
        ),
        batching("batch_0ms_x1", "batching (0 ms, count=1)", max_queue_delay_us=0),
    ]


AA_CONTROL_NAME = "baseline_aa"


def aa_control(baseline: ServingVariant) -> ServingVariant:
    """The A/A control of ``baseline``: the same configuration, served under another name."""
    return replace(
        baseline,
        name=AA_CONTROL_NAME,
        description="A/A control (the baseline again, another model name)",
        control=True,
    )


def for_model(variant: ServingVariant, model_batches: bool) -> ServingVariant:
    """``variant`` as served: a model without a batch axis is served with max_batch_size 0."""
    return variant if model_batches else replace(variant, max_batch_size=0)


def batch_target(variant: ServingVariant) -> tuple[int, str]:
    """The batch size (in samples) the dynamic batcher waits for, and which field sets it."""
    if variant.preferred_batch_sizes:
        return min(variant.preferred_batch_sizes), "preferred_batch_size"
    return variant.max_batch_size, "max_batch_size"


# The model names tritonlab serves under: no '__', which separates a variant's name from it.
MODEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_model_name(name: str) -> bool:
    """Whether ``name`` is a model name tritonlab writes (letters, digits, '_', '.', '-',
    starting with a letter or digit, no '__'): safe as a folder name and in a config."""
    return bool(MODEL_NAME_RE.fullmatch(name)) and "__" not in name


def variant_model_name(model_name: str, variant: ServingVariant) -> str:
    """The Triton model name a variant is served under; the baseline keeps the plain name."""
    return model_name if variant.name == "baseline" else f"{model_name}__{variant.name}"


def served_model_of(triton_name: str) -> str:
    """The model a variant's Triton name was built from (``variant_model_name`` read back: a
    model name holds no '__')."""
    return triton_name.split("__", 1)[0]
