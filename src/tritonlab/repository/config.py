"""Build, write and read ``config.pbtxt`` through Triton's own protobuf schema.

The configuration is assembled as a plain dict, parsed into ``model_config_pb2.ModelConfig``
with ``json_format.ParseDict`` (which rejects unknown fields and bad enum values), and written
with ``text_format``. Nothing here formats protobuf text by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from tritonlab import gateway
from tritonlab.errors import ConfigError
from tritonlab.models.inspect import OnnxModelInfo, TensorSpec
from tritonlab.models.state_pairs import served_view, state_tensors
from tritonlab.repository.knobs import (
    KNOB_SECTIONS,
    THREADS_PARAMETER,
    config_additions,
    merge_sections,
)
from tritonlab.repository.sequence_knobs import sequence_section
from tritonlab.repository.triton_rules import io_problem
from tritonlab.repository.variants import ServingVariant

ModelConfig = model_config_pb2.ModelConfig
MODEL_FILENAME = "model.onnx"
# The config parameter naming (a JSON list) the rank-0 tensors of a model without batching,
# declared [1] to Triton; the backend adapter reshapes them (``backends/adapter.py``).
SCALARS_PARAMETER = "tritonlab_scalar_tensors"
# The config parameter (JSON) of a model that carries state: its state pairs (``StateTensor``)
# and the names of the sequence batcher's control inputs; the backend adapter reads both.
SEQUENCE_PARAMETER = "tritonlab_sequence"
SEQUENCE_CONTROLS = {
    "start": "TRITONLAB_SEQUENCE_START",
    "end": "TRITONLAB_SEQUENCE_END",
    "id": "TRITONLAB_SEQUENCE_ID",
}


def _tensor(spec: TensorSpec, batched: bool) -> dict[str, Any]:
    tensor: dict[str, Any] = {"name": spec.name, "data_type": spec.triton_dtype}
    if not spec.dims and batched:
        # One value per sample ([batch] in the graph): Triton needs at least one dim, so the
        # tensor is declared [1] and reshaped to the graph's [] (the standard Triton idiom).
        return tensor | {"dims": [1], "reshape": {"shape": []}}
    if not spec.dims:
        # A scalar (rank 0) of a model without batching: Triton refuses an empty reshape there,
        # so it is declared [1] as it is, and the backend adapter hands the engine rank 0
        # (the tensors named in ``SCALARS_PARAMETER``).
        return tensor | {"dims": [1]}
    return tensor | {"dims": list(spec.dims)}


def scalar_names(info: OnnxModelInfo) -> list[str]:
    """The rank-0 inputs and outputs of a model without batching (served as [1])."""
    if info.batched:
        return []
    return [s.name for s in (*info.inputs, *info.outputs) if not s.dims]


# The config.pbtxt fields the model (not a knob) decides; with the knobs' sections
# (``knobs.KNOB_SECTIONS``), what tritonlab writes itself and no override may replace.
MODEL_SECTIONS = {
    "name": "the model's name",
    "platform": "the backend knob",
    "default_model_filename": "the model file",
    "input": "the model's graph (or --shape)",
    "output": "the model's graph",
    "ensemble_scheduling": "the ensemble's own config.pbtxt",
}
OWNED_SECTIONS = MODEL_SECTIONS | {
    section: f"the knob{'s' if len(names) > 1 else ''} {', '.join(names)}"
    for section, names in KNOB_SECTIONS.items()
}


def override_problem(overrides: dict[str, Any]) -> str | None:
    """Why ``overrides`` (ModelConfig sections, protobuf JSON) cannot pass through, as ``section:
    what to change``; None when each is a field tritonlab does not write, valid in the schema."""
    fields = ModelConfig.DESCRIPTOR.fields_by_name
    for section, value in overrides.items():
        if section in OWNED_SECTIONS:
            return f"{section}: tritonlab writes it; set it through {OWNED_SECTIONS[section]}"
        if section not in fields:
            near = sorted(f for f in fields if f not in OWNED_SECTIONS)
            return f"{section}: not a field of Triton's ModelConfig; one of {', '.join(near)}"
        try:
            json_format.ParseDict({section: value}, ModelConfig())
        except json_format.ParseError as exc:
            return f"{section}: Triton's schema refuses it ({exc})"
    return None


def knob_sections(variant: ServingVariant, batched: bool = True) -> dict[str, Any]:
    """The sections of ``config.pbtxt`` the knobs set (protobuf JSON), then the variant's
    ``config_overrides`` as given (``user_repo.patched_config`` changes a user's config there)."""
    config: dict[str, Any] = {
        "backend": variant.backend,
        "max_batch_size": variant.max_batch_size if batched else 0,
        "instance_group": [{"count": variant.instance_count, "kind": variant.instance_kind}],
    }
    if variant.dynamic_batching:
        batching: dict[str, Any] = {"max_queue_delay_microseconds": variant.max_queue_delay_us}
        if variant.preferred_batch_sizes:
            batching["preferred_batch_size"] = list(variant.preferred_batch_sizes)
        config["dynamic_batching"] = batching
    parameters = dict(variant.extra_parameters)
    threads_key = THREADS_PARAMETER.get(variant.backend)
    if threads_key and variant.intra_op_threads is not None:
        parameters[threads_key] = str(variant.intra_op_threads)
    if variant.backend == "openvino":
        # One stream per instance: Triton's instances are the parallelism, as with onnxruntime.
        parameters.setdefault("NUM_STREAMS", "1")
        parameters["INFERENCE_PRECISION_HINT"] = variant.precision
    if parameters:
        config["parameters"] = {k: {"string_value": v} for k, v in sorted(parameters.items())}
    problem = override_problem(variant.config_overrides)
    if problem is not None:
        raise ConfigError(f"variant '{variant.name}': config_overrides.{problem}")
    return merge_sections(config, config_additions(variant)) | variant.config_overrides


def _sequence_batching(variant: ServingVariant) -> dict[str, Any]:
    """The ``sequence_batching`` section: the knobs' settings and the control inputs through
    which the adapter learns each request's sequence, its start and its end."""
    controls = [
        (SEQUENCE_CONTROLS["start"], "CONTROL_SEQUENCE_START"),
        (SEQUENCE_CONTROLS["end"], "CONTROL_SEQUENCE_END"),
    ]
    control_input = [
        {"name": name, "control": [{"kind": kind, "int32_false_true": [0, 1]}]}
        for name, kind in controls
    ]
    control_input.append(
        {
            "name": SEQUENCE_CONTROLS["id"],
            "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_UINT64"}],
        }
    )
    return sequence_section(variant) | {"control_input": control_input}


def _set_sequence_knob(variant: ServingVariant) -> str | None:
    """The sequence knob a variant sets (for a model that carries no state), else None."""
    default = ServingVariant(variant.name, "")
    for field in ("sequence_strategy", "max_sequence_idle_us", "max_candidate_sequences"):
        if getattr(variant, field) != getattr(default, field):
            return field
    return None


def config_dict(info: OnnxModelInfo, variant: ServingVariant, model_name: str) -> dict[str, Any]:
    """The model configuration as a dict in protobuf's JSON mapping. A model with state pairs
    is served by the sequence batcher, its state tensors kept by the adapter, not served."""
    variant.validate(model_batches=info.batched)
    states = state_tensors(info)
    served = served_view(info)
    config: dict[str, Any] = {
        "name": model_name,
        "default_model_filename": MODEL_FILENAME,
        "input": [_tensor(s, info.batched) for s in served.inputs],
        "output": [_tensor(s, info.batched) for s in served.outputs],
    }
    sections = knob_sections(variant, info.batched)
    parameters = sections.setdefault("parameters", {})
    if scalars := scalar_names(served):
        parameters[SCALARS_PARAMETER] = {"string_value": json.dumps(scalars)}
    if states:
        if variant.dynamic_batching:
            raise ConfigError(
                f"variant '{variant.name}': the model carries state ({states[0].input} -> "
                f"{states[0].output}), so it is served by the sequence batcher; turn "
                "dynamic_batching off (Triton runs one batcher per model)"
            )
        sections["sequence_batching"] = _sequence_batching(variant)
        value = {"states": [t.to_json() for t in states], "controls": SEQUENCE_CONTROLS}
        parameters[SEQUENCE_PARAMETER] = {"string_value": json.dumps(value, sort_keys=True)}
    elif (field := _set_sequence_knob(variant)) is not None:
        raise ConfigError(
            f"variant '{variant.name}': {field} applies to a model that carries state (a state "
            "input and output pair); this model has none, so drop it"
        )
    if not parameters:
        sections.pop("parameters")
    return {"name": model_name, "backend": sections.pop("backend"), **config, **sections}


def build_model_config(
    info: OnnxModelInfo, variant: ServingVariant, model_name: str
) -> model_config_pb2.ModelConfig:
    """The validated protobuf ``ModelConfig`` for serving ``info`` as ``variant``."""
    try:
        config = json_format.ParseDict(config_dict(info, variant, model_name), ModelConfig())
    except json_format.ParseError as exc:
        raise ConfigError(f"invalid model configuration for '{model_name}': {exc}") from exc
    if (problem := io_problem(config)) is not None:
        raise ConfigError(
            f"the configuration of '{model_name}' would not load in Triton: {problem}"
        )
    return config


CONFIG_FILE = "config.pbtxt"


def config_to_text(config: model_config_pb2.ModelConfig) -> str:
    """The configuration as ``config.pbtxt`` text (protobuf text format)."""
    return str(text_format.MessageToString(config))


def write_config(config: model_config_pb2.ModelConfig, path: Path) -> None:
    """Write ``config.pbtxt`` through the gateway (a new file, then a rename)."""
    gateway.write_text(path, config_to_text(config))


def parse_config_text(text: str, source: str = "config.pbtxt") -> model_config_pb2.ModelConfig:
    """Parse ``config.pbtxt`` text into a ``ModelConfig`` (``ConfigError`` naming ``source``)."""
    config = ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    return config


def read_config(path: Path) -> model_config_pb2.ModelConfig:
    """Read a model folder's ``config.pbtxt``; a missing or invalid file is a ``ConfigError``."""
    if not path.exists():
        raise ConfigError(f"{path} not found; every model folder needs a config.pbtxt")
    return parse_config_text(path.read_text(), str(path))
