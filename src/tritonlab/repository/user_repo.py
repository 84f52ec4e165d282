"""A user's Triton model repository as input: read it as it is, never write it.

``read_repository_model`` reads ``<repository>/<model>/config.pbtxt`` (and the configs of the
models it needs: an ensemble's steps, the models a BLS model names in its ``model.py``), checks
that the bundled server can serve every backend involved (else one line that names the backend
and points at ``--server-bin`` or ``--url``), and describes the model as ``OnnxModelInfo`` with a
``RepositorySource``: inputs, dtypes and shapes from the config (from the ONNX file where the
config leaves them out). ``baseline_variant`` turns the tuned model's own configuration into the
``ServingVariant`` every other variant is one change from; ``repository_writer`` writes a
variant beside the user's repository (in the run folder), as a patched copy of the user's own
``config.pbtxt``: only the knobs' fields change, everything else the user wrote stays.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2

from tritonlab import gateway
from tritonlab.errors import ConfigError, ModelError
from tritonlab.models.inspect import OnnxModelInfo, TensorSpec, inspect_onnx
from tritonlab.models.source import (
    KIND_BLS,
    KIND_ENSEMBLE,
    KIND_ONNX,
    KIND_PYTHON,
    RepositorySource,
)
from tritonlab.names import check_path_name
from tritonlab.repository.config import CONFIG_FILE, knob_sections, read_config, write_config
from tritonlab.repository.knobs import KNOBS, config_values
from tritonlab.repository.variants import (
    MODEL_BACKENDS,
    PYTHON_BACKEND,
    ServingVariant,
    variant_model_name,
)

ModelConfig = model_config_pb2.ModelConfig
ENSEMBLE = "ensemble"
# The backends the bundled tritonserver serves: Triton's Python backend, and tritonlab's
# Python-based onnxruntime and OpenVINO backend folders (``backends/``).
BUNDLED_BACKENDS = (PYTHON_BACKEND, *MODEL_BACKENDS)
# Platform strings Triton maps to a backend folder (an ONNX platform to ``onnxruntime``, served
# here by the Python-based one); any other platform needs its native backend.
PLATFORM_BACKENDS = {"onnxruntime_onnx": "onnxruntime", "ensemble": ENSEMBLE}


@dataclass(frozen=True)
class UserModel:
    """One model folder of the user's repository: its config, backend and served version."""

    name: str
    folder: Path
    config: model_config_pb2.ModelConfig
    backend: str  # python, onnxruntime, openvino, ensemble, or a native backend's name

    @property
    def version_dir(self) -> Path | None:
        """The version Triton serves by default (the highest numbered folder), if any."""
        versions = [p for p in self.folder.iterdir() if p.is_dir() and p.name.isdigit()]
        return max(versions, key=lambda p: int(p.name)) if versions else None

    @property
    def onnx_file(self) -> Path | None:
        """The ONNX file of an onnxruntime/OpenVINO model, where it exists."""
        if self.backend not in MODEL_BACKENDS or self.version_dir is None:
            return None
        path = self.version_dir / (self.config.default_model_filename or "model.onnx")
        return path if path.is_file() else None

    @property
    def steps(self) -> tuple[str, ...]:
        """An ensemble's composing models, in step order (empty for other models)."""
        if self.backend != ENSEMBLE:
            return ()
        return tuple(dict.fromkeys(s.model_name for s in self.config.ensemble_scheduling.step))

    def bls_callees(self, others: set[str]) -> tuple[str, ...]:
        """The repository's models a Python model names as string literals in its ``model.py``
        (what BLS calls name); empty for other backends."""
        if self.backend != PYTHON_BACKEND or self.version_dir is None:
            return ()
        source = self.version_dir / "model.py"
        if not source.is_file():
            return ()
        try:
            tree = ast.parse(source.read_text(), str(source))
        except SyntaxError as exc:
            raise ModelError(f"{source}: not valid Python ({exc.msg}, line {exc.lineno})") from exc
        named = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        ]
        return tuple(dict.fromkeys(n for n in named if n in others and n != self.name))


def _backend_of(config: model_config_pb2.ModelConfig, where: str) -> str:
    if config.backend:
        return str(config.backend)
    if config.platform in PLATFORM_BACKENDS:
        return PLATFORM_BACKENDS[config.platform]
    if config.platform:
        return str(config.platform)
    raise ConfigError(f"{where}: the config names neither a backend nor a platform; add one")


def read_user_model(root: Path, name: str) -> UserModel:
    """One model folder of the repository at ``root``, its config read through protobuf; the
    name (``--model``, an ensemble's step, a BLS callee) must be a plain model name."""
    folder = root / check_path_name(name, f"model name in {root}")
    if not folder.is_dir():
        present = sorted(p.name for p in root.iterdir() if (p / CONFIG_FILE).is_file())
        raise ConfigError(
            f"--model {name!r}: no such model folder in {root}; models there: "
            + (", ".join(present) or "none")
        )
    config = read_config(folder / CONFIG_FILE)
    if config.name and config.name != name:
        raise ConfigError(
            f"{folder / 'config.pbtxt'}: name {config.name!r} differs from its folder {name!r}; "
            "Triton refuses that, so make them match"
        )
    return UserModel(name, folder, config, _backend_of(config, str(folder / CONFIG_FILE)))


def check_servable(model: UserModel, native: bool) -> None:
    """A backend the bundled server lacks is one line naming it and the ways to serve it."""
    if native or model.backend in (*BUNDLED_BACKENDS, ENSEMBLE):
        return
    what = (
        f"platform {model.config.platform!r}"
        if model.config.platform
        else f"backend {model.backend!r}"
    )
    raise ConfigError(
        f"model {model.name!r} needs Triton's native {what}, which the bundled tritonserver "
        "lacks (it has python, and tritonlab's Python-based onnxruntime and openvino); serve the "
        "repository with an NGC container's tritonserver (--server-bin "
        "/opt/tritonserver/bin/tritonserver) or measure a server that already runs it (--url)"
    )


def _tensors(config_tensors: Any) -> tuple[TensorSpec, ...]:
    return tuple(
        TensorSpec(
            t.name, model_config_pb2.DataType.Name(t.data_type), tuple(int(d) for d in t.dims)
        )
        for t in config_tensors
    )


def _needed(root: Path, top: UserModel, native: bool) -> tuple[dict[str, UserModel], str]:
    """Every model ``top`` needs (its steps or callees, recursively) and ``top``'s kind."""
    others = {p.name for p in root.iterdir() if (p / CONFIG_FILE).is_file()}
    models = {top.name: top}
    todo = [top]
    while todo:
        model = todo.pop()
        check_servable(model, native)
        for called in (*model.steps, *model.bls_callees(others)):
            if called not in models:
                models[called] = read_user_model(root, called)
                todo.append(models[called])
    if top.backend == ENSEMBLE:
        kind = KIND_ENSEMBLE
    elif top.backend == PYTHON_BACKEND:
        kind = KIND_BLS if len(models) > 1 else KIND_PYTHON
    else:
        kind = KIND_ONNX
    return models, kind


def read_repository_model(
    root: Path,
    name: str,
    step: str | None = None,
    native: bool = False,
    reference: Path | None = None,
) -> OnnxModelInfo:
    """The model ``name`` of the repository at ``root``, described for measuring: ``step`` is an
    ensemble's step to tune (``--step``), ``native`` refuses no backend (``--server-bin``),
    ``reference`` the user's expected answers (``--reference``)."""
    if not root.is_dir():
        raise ConfigError(f"--repository {root}: not a folder; pass a Triton model repository")
    top = read_user_model(root, name)
    models, kind = _needed(root, top, native)
    called = tuple(n for n in models if n != name)
    tuned, reason = name, ""
    if kind == KIND_ENSEMBLE:
        if step is not None and step not in top.steps:
            raise ConfigError(
                f"--step {step!r}: not a step of ensemble {name!r}; its steps: "
                + ", ".join(top.steps)
            )
        if step is not None:
            tuned, reason = step, "chosen with --step"
        else:
            compute = [s for s in top.steps if models[s].backend != PYTHON_BACKEND]
            tuned = (compute or list(top.steps))[0]
            reason = "the first step that runs a model graph (no --step given)"
        if models[tuned].backend == ENSEMBLE:
            raise ConfigError(f"step {tuned!r} of {name!r} is itself an ensemble; pass --step")
    elif step is not None:
        raise ConfigError(f"--step applies to an ensemble; {name!r} is a {kind} model")
    inputs, outputs = _tensors(top.config.input), _tensors(top.config.output)
    path = top.onnx_file or top.folder / CONFIG_FILE
    opset = 0
    if top.onnx_file is not None:
        graph = inspect_onnx(top.onnx_file)
        inputs, outputs, opset = inputs or graph.inputs, outputs or graph.outputs, graph.opset
    if not inputs or not outputs:
        raise ConfigError(
            f"{top.folder / 'config.pbtxt'}: declare every input and output (name, data_type, "
            "dims); tritonlab sends what the config says"
        )
    size = sum(
        f.stat().st_size for m in models.values() for f in m.folder.rglob("*") if f.is_file()
    )
    source = RepositorySource(
        root=root,
        model=name,
        kind=kind,
        tuned=tuned,
        tuned_backend=models[tuned].backend,
        called=called,
        needed=(*called, name),
        tuned_reason=reason,
        reference=reference,
    )
    return OnnxModelInfo(
        path=path,
        inputs=inputs,
        outputs=outputs,
        batched=top.config.max_batch_size > 0,
        opset=opset,
        file_size_bytes=size,
        source=source,
    )


def _as_dict(config: model_config_pb2.ModelConfig) -> dict[str, Any]:
    return dict(json_format.MessageToDict(config, preserving_proto_field_name=True))


def baseline_variant(config: model_config_pb2.ModelConfig, backend: str) -> ServingVariant:
    """The configuration the user runs, as the variant every other is one change from."""
    if len(config.instance_group) > 1:
        raise ConfigError(
            f"model {config.name!r} has {len(config.instance_group)} instance_group entries; "
            "tritonlab varies one group, so merge them (or measure it as it is with `tritonlab "
            "perf`)"
        )
    try:
        values = config_values(_as_dict(config), backend)
    except ValueError as exc:
        raise ConfigError(f"model {config.name!r}: {exc}") from exc
    batching = (
        f"batching ({values['max_queue_delay_us']} µs)"
        if values["dynamic_batching"]
        else "no batching"
    )
    return ServingVariant(
        "baseline", f"your configuration ({batching}, count={values['instance_count']})", **values
    )


def left_out_knobs(backend: str) -> list[str]:
    """The knobs the tuned model's backend does not accept, each with why (for the log)."""
    return [
        f"`{k.plan_name}`: the {backend} backend does not read it"
        for k in KNOBS
        if backend not in k.backends
    ]


def _patch_section(held: Any, before: Any, after: Any) -> Any:
    """A section of the user's config with a knob's change: the keys the knobs own (those
    their sections held before or hold after) from ``after``, the user's other keys kept."""
    if isinstance(after, list) and after and isinstance(after[0], dict):
        first = held[0] if isinstance(held, list) and held else {}
        old = before[0] if isinstance(before, list) and before else {}
        return [_patch_section(first, old, after[0]), *(held[1:] if isinstance(held, list) else [])]
    if isinstance(after, dict):
        owned = set(before or {}) | set(after)
        return {k: v for k, v in (held or {}).items() if k not in owned} | after
    return after


def patched_config(
    config: model_config_pb2.ModelConfig,
    variant: ServingVariant,
    baseline: ServingVariant,
    served_name: str,
) -> model_config_pb2.ModelConfig:
    """The user's ``config`` served as ``served_name`` with ``variant``'s knobs where they differ
    from ``baseline``: only the keys the knobs set change, the rest stays as written."""
    user = _as_dict(config)
    before, after = knob_sections(baseline), knob_sections(variant)
    for section in sorted(set(before) | set(after)):
        if before.get(section) == after.get(section):
            continue
        if section not in after:
            user.pop(section, None)
        else:
            user[section] = _patch_section(user.get(section), before.get(section), after[section])
    if before["backend"] != after["backend"]:
        user.pop("platform", None)  # the backend now names what serves the model
    user["name"] = served_name
    try:
        return json_format.ParseDict(user, ModelConfig())
    except json_format.ParseError as exc:
        raise ConfigError(f"variant {variant.name!r} of {config.name!r}: {exc}") from exc


def _place_tree(source: Path, target: Path) -> None:
    """Copy a model folder into the run's repository: ``config.pbtxt`` (rewritten for the variant)
    copied, every other file (only read) hard-linked where possible."""
    gateway.copy_tree_in(source, target, link=lambda path: path.name != CONFIG_FILE)


@dataclass(frozen=True)
class WrittenVariant:
    """Where a variant went: its served name and the served names of the models it calls."""

    served_name: str
    folder: Path
    called: tuple[tuple[str, str], ...]  # (model in the user's repository, served name)


def served_names(
    source: RepositorySource, model_name: str, variant: ServingVariant
) -> tuple[str, str]:
    """The names ``variant`` is served under: the measured model's and the tuned model's."""
    served = variant_model_name(model_name, variant)
    if source.tuned == source.model:
        return served, served
    return served, source.tuned if variant.name == "baseline" else f"{source.tuned}__{variant.name}"


def write_repository_variant(
    repo_dir: Path, source: RepositorySource, model_name: str, variant: ServingVariant
) -> WrittenVariant:
    """Write ``variant`` of the repository model into ``repo_dir``: the tuned model's config
    patched, an ensemble's tuned step renamed, every other needed model copied."""
    models = {n: read_user_model(source.root, n) for n in source.needed}
    tuned = models[source.tuned]
    baseline = baseline_variant(tuned.config, source.tuned_backend)
    served, tuned_served = served_names(source, model_name, variant)
    gateway.mkdir(repo_dir)
    called = tuple((n, tuned_served if n == source.tuned else n) for n in source.called)
    for name in source.called:
        if name != source.tuned and not (repo_dir / name).exists():
            _place_tree(models[name].folder, repo_dir / name)
    _place_tree(tuned.folder, repo_dir / tuned_served)
    write_config(
        patched_config(tuned.config, variant, baseline, tuned_served),
        repo_dir / tuned_served / CONFIG_FILE,
    )
    if source.tuned != source.model:  # an ensemble: its tuned step renamed for the variant
        top = models[source.model]
        config = ModelConfig()
        config.CopyFrom(top.config)
        config.name = served
        for step in config.ensemble_scheduling.step:
            if step.model_name == source.tuned:
                step.model_name = tuned_served
        if variant.max_batch_size and config.max_batch_size > variant.max_batch_size:
            config.max_batch_size = variant.max_batch_size  # no step may batch less
        _place_tree(top.folder, repo_dir / served)
        write_config(config, repo_dir / served / CONFIG_FILE)
    return WrittenVariant(served, repo_dir / served, called)
