"""Sweep plans from YAML: load, validate (naming the offending key), and expand into an
``ExperimentPlan``.

Design: one factor at a time around a reference, plus an explicit list of combined variants.
A full factorial of every axis would multiply the cost (5 delays x 3 batch sizes x 2 instance
counts x 2 kinds = 60 configurations before any load point), and a cell that differs from every
other cell in three knobs cannot be explained. So ``baseline`` is the reference every verdict is
measured against; ``anchor`` (optional, changes to the baseline, measured as its own variant) is
the point the ``axes`` vary from, each axis value one variant with exactly that knob changed (a
batcher knob on a reference without batching turns batching on too, counted as one change);
``combined`` lists variants of several changes, each explained against the earlier variant it
differs from least. Loads follow the same rule (``plan_loads``). The full schema, with
defaults, is in ``docs/sweeps.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from tritonlab.bounded_read import FileRefused, read_capped
from tritonlab.errors import ConfigError, PlanError
from tritonlab.experiments.blocks import DEFAULT_BLOCKS, ENGINE_BLOCKS, ENGINES
from tritonlab.experiments.manifest import SweepEntry
from tritonlab.experiments.plan import (
    ExperimentPlan,
    MeasurementSettings,
    distinct_traces,
    trace_load,
)
from tritonlab.experiments.plan_checks import (
    KNOBS,
    PlanChecker,
    check_load_limits,
    check_variant_count,
    shown,
)
from tritonlab.experiments.plan_limits import MAX_REPEATS, MAX_RETRIES, MAX_TRIALS, MAX_WINDOW_MS
from tritonlab.experiments.plan_loads import parse_loads
from tritonlab.experiments.repository_plan import batching_off, repository_baseline
from tritonlab.models.zoo import BUILTIN_MODELS, DEFAULT_MODEL
from tritonlab.perf.trace import Trace, read_trace
from tritonlab.repository.knobs import BATCHER_FIELDS, KNOB_BY_FIELD, knob_description, knob_slug
from tritonlab.repository.user_repo import read_repository_model
from tritonlab.repository.variants import DEFAULT_MAX_BATCH_SIZE, ServingVariant, aa_control

DEMO_MODEL = "demo"


def builtin_name(model: str) -> str | None:
    """``model`` as a built-in model name (``demo`` means the default MLP), or None."""
    if model == DEMO_MODEL:
        return DEFAULT_MODEL
    return model if model in BUILTIN_MODELS else None


DEMO_PLAN_NAME = "demo_sweep.yaml"

TOP_KEYS = (
    "model",
    "repository",
    "step",
    "name",
    "baseline",
    "anchor",
    "axes",
    "combined",
    "loads",
    "repeats",
    "measurement",
    "recommend",
)
COMBINED_KEYS = ("name", "description", "changes")
RECOMMEND_KEYS = ("latency_budget_p99_us", "target_load_infer_per_s")
MEASUREMENT_KEYS = (
    "engine",
    "measurement_interval_ms",
    "stability_percentage",
    "max_trials",
    "retries_when_unstable",
    "fresh_inputs",
)
DEFAULT_REPEATS = 3  # the classic engine's; the block engine's is DEFAULT_BLOCKS
MAX_PLAN_BYTES = 4 * 1024 * 1024  # a plan file is a page of YAML
DEFAULT_ENGINE = ENGINE_BLOCKS


@dataclass(frozen=True)
class SweepPlan:
    """A loaded plan file: the model to serve, the expanded plan, and what to recommend for."""

    source: str
    model: str  # DEMO_MODEL or the ONNX path as written in the plan
    model_path: Path | None  # resolved ONNX path; None for the demo model
    experiment: ExperimentPlan
    latency_budget_p99_us: float | None = None
    target_load_infer_per_s: float | None = None
    repeats_given: int | None = None  # the plan's own ``repeats`` (None: the engine's default)
    # A model of a Triton repository (``repository:``, relative to the plan; ``model:`` then
    # names the model in it, ``step:`` an ensemble's step): its own config is the baseline.
    repository: Path | None = None
    step: str | None = None
    # The traces the plan's trace loads replay (``loads.trace``, ``--load-trace``).
    traces: tuple[Trace, ...] = ()

    @property
    def is_demo(self) -> bool:
        """Whether the plan serves a built-in model (no ONNX path or repository of the user's)."""
        return self.model_path is None and self.repository is None

    @property
    def builtin(self) -> str | None:
        """The built-in model the plan names (``demo`` is the MLP), None for a user's model."""
        return builtin_name(self.model) if self.is_demo else None

    def with_recommend(
        self, latency_budget_p99_us: float | None, target_load_infer_per_s: float | None
    ) -> SweepPlan:
        """Command-line overrides of the recommendation settings (None keeps the plan's)."""
        return replace(
            self,
            latency_budget_p99_us=latency_budget_p99_us or self.latency_budget_p99_us,
            target_load_infer_per_s=target_load_infer_per_s or self.target_load_infer_per_s,
        )

    @property
    def engine(self) -> str:
        """The measurement engine the plan uses: ``blocks`` or ``classic``."""
        return self.experiment.measurement.engine

    def with_engine(self, engine: str | None) -> SweepPlan:
        """The plan measured by ``engine`` (None keeps the plan's): its default repeats unless
        the plan gave them, and the block engine's A/A control (the baseline served again)."""
        if engine is None or engine == self.engine:
            return self
        if engine not in ENGINES:
            raise PlanError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        plan = self.experiment
        experiment = replace(
            plan,
            variants=with_engine_controls(tuple(v for v in plan.variants if not v.control), engine),
            repeats=engine_repeats(engine, self.repeats_given),
            measurement=replace(plan.measurement, engine=engine),
        )
        return replace(self, experiment=experiment)

    def with_trace(self, trace: Trace | None) -> SweepPlan:
        """The plan with ``trace`` replayed too, at its first load's protocol, batch size and
        sequence length (``sweep --load-trace``; None: the plan as it is)."""
        if trace is None:
            return self
        first = self.experiment.loads[0]
        load = trace_load(trace, first.protocol, first.batch_size, first.sequence_length)
        traces = distinct_traces([*self.traces, trace])
        loads = self.experiment.loads
        if load.key not in {ld.key for ld in loads}:
            loads = (*loads, load)
        return replace(self, experiment=replace(self.experiment, loads=loads), traces=tuple(traces))

    def manifest_entry(self) -> SweepEntry:
        """What the run folder's manifest records under ``sweep`` (read by the report)."""
        return SweepEntry(
            self.source, self.model, self.latency_budget_p99_us, self.target_load_infer_per_s
        )


def _apply(reference: ServingVariant, changes: dict[str, Any]) -> ServingVariant:
    """``reference`` with ``changes``; a batcher setting on a non-batching reference enables it."""
    if BATCHER_FIELDS & changes.keys() and "dynamic_batching" not in changes:
        changes = {"dynamic_batching": True, **changes}
    if "config_overrides" in changes:  # added to the reference's, section by section
        changes = changes | {
            "config_overrides": reference.config_overrides | changes["config_overrides"]
        }
    variant = replace(reference, **changes)
    if not variant.dynamic_batching and not BATCHER_FIELDS & changes.keys():
        return batching_off(variant)  # the reference's batcher settings go with it
    return variant


def _variants(
    check: PlanChecker, data: dict[str, Any], start: ServingVariant | None = None
) -> tuple[list[ServingVariant], list[str]]:
    """All variants (baseline first) and the plan path each came from; ``start``: a
    repository model's own configuration, which the baseline's changes apply to."""
    baseline = _apply(
        start or ServingVariant("baseline", "", max_batch_size=DEFAULT_MAX_BATCH_SIZE),
        check.changes(data.get("baseline", {}), "baseline"),
    )
    baseline = replace(baseline, description=f"baseline ({knob_description(baseline, baseline)})")
    found: list[tuple[ServingVariant, str]] = [(baseline, "baseline")]

    def add(variant: ServingVariant, path: str, named: bool = False) -> None:
        if not named:
            variant = replace(
                variant,
                name=knob_slug(variant, baseline),
                description=knob_description(variant, baseline),
            )
        unnamed = replace(variant, name="", description="")
        for other, other_path in found:
            if replace(other, name="", description="") == unnamed:  # the same knobs
                if named:
                    raise check.fail(path, f"same configuration as {other_path} ({other.name})")
                return  # an axis value equal to its reference adds nothing
            if other.name == variant.name:
                raise check.fail(path, f"variant name {variant.name!r} is already used")
        found.append((variant, path))

    anchor = baseline
    if "anchor" in data:
        anchor = _apply(baseline, check.changes(data["anchor"], "anchor"))
        add(anchor, "anchor")
    axes = check.mapping(data.get("axes", {}), "axes", tuple(KNOBS))
    for knob, values in axes.items():
        for i, value in enumerate(check.items(values, f"axes.{knob}")):
            path = f"axes.{knob}[{i}]"
            add(_apply(anchor, {KNOBS[knob]: check.knob(knob, value, path)}), path)
    combined = data.get("combined", [])
    if not isinstance(combined, list):
        raise check.fail("combined", f"must be a list of variants, got {shown(combined)}")
    for i, entry in enumerate(combined):
        path = f"combined[{i}]"
        item = check.mapping(entry, path, COMBINED_KEYS)
        if "changes" not in item:
            raise check.fail(f"{path}.changes", "missing: list the knobs this variant changes")
        variant = _apply(anchor, check.changes(item["changes"], f"{path}.changes"))
        name = item.get("name", knob_slug(variant, baseline))
        if not isinstance(name, str):
            raise check.fail(f"{path}.name", f"must be a string, got {shown(name)}")
        description = item.get("description", knob_description(variant, baseline))
        add(replace(variant, name=name, description=str(description)), path, named=True)
    if start is not None:  # a repository's model: only the knobs its backend reads
        for variant, path in found:
            for field_name, entry in KNOB_BY_FIELD.items():
                changed = getattr(variant, field_name) != getattr(baseline, field_name)
                if changed and start.backend not in entry.backends:
                    raise check.fail(
                        path, f"{entry.plan_name}: the {start.backend} backend does not read it"
                    )
    for variant, path in found:
        try:
            variant.validate(model_batches=True)
        except ConfigError as exc:
            raise check.fail(path, str(exc)) from None
    return [v for v, _ in found], [p for _, p in found]


def engine_repeats(engine: str, given: int | None) -> int:
    """The plan's repeats, or the engine's default: 10 short blocks, or 3 classic rounds."""
    if given is not None:
        return given
    return DEFAULT_BLOCKS if engine == ENGINE_BLOCKS else DEFAULT_REPEATS


def with_engine_controls(
    variants: tuple[ServingVariant, ...], engine: str
) -> tuple[ServingVariant, ...]:
    """``variants`` and, under the block engine, the A/A control of the first (the baseline)."""
    return (*variants, aa_control(variants[0])) if engine == ENGINE_BLOCKS else variants


def _measurement(check: PlanChecker, value: Any) -> MeasurementSettings:
    data = check.mapping(value, "measurement", MEASUREMENT_KEYS)
    default = MeasurementSettings(measurement_interval_ms=1000)

    def given(key: str, read: Callable[..., Any], *bounds: int) -> Any:
        return read(data.get(key, getattr(default, key)), f"measurement.{key}", *bounds)

    return MeasurementSettings(
        engine=check.choice(data.get("engine", DEFAULT_ENGINE), "measurement.engine", ENGINES),
        measurement_interval_ms=given("measurement_interval_ms", check.integer, 100, MAX_WINDOW_MS),
        stability_percentage=given("stability_percentage", check.number),
        max_trials=given("max_trials", check.integer, 3, MAX_TRIALS),
        retries_when_unstable=given("retries_when_unstable", check.integer, 0, MAX_RETRIES),
        fresh_inputs=given("fresh_inputs", check.boolean),
    )


def _repository(
    check: PlanChecker, data: dict[str, Any], base_dir: Path
) -> tuple[Path | None, str | None, ServingVariant | None]:
    """The plan's repository (relative to the plan), its ensemble step, and the model's own
    configuration as the starting point (None, None, None without ``repository:``)."""
    if "repository" not in data:
        if "step" in data:
            raise check.fail("step", "goes with repository: (an ensemble's step)")
        return None, None, None
    root = data["repository"]
    if not isinstance(root, str) or not root.strip():
        raise check.fail("repository", f"must be a folder path, got {shown(root)}")
    step = data.get("step")
    if step is not None and not isinstance(step, str):
        raise check.fail("step", f"must be a model name, got {shown(step)}")
    path = (base_dir / root).resolve()
    try:
        info = read_repository_model(path, str(data["model"]), step)
    except ConfigError as exc:
        raise check.fail("repository", str(exc)) from None
    return path, step, repository_baseline(info)


def parse_plan(data: Any, source: str, base_dir: Path) -> SweepPlan:
    """Validate a plan already read from YAML; ONNX paths are relative to ``base_dir``."""
    check = PlanChecker(source)
    if data is None:
        raise check.fail("(top)", "the plan is empty; start from docs/sweeps.md")
    data = check.mapping(data, "", TOP_KEYS)
    if "model" not in data:
        raise check.fail("model", f"missing: an ONNX path relative to the plan, or {DEMO_MODEL!r}")
    model = data["model"]
    if not isinstance(model, str) or not model.strip():
        raise check.fail("model", f"must be an ONNX path or {DEMO_MODEL!r}, got {shown(model)}")
    repository, step, start = _repository(check, data, base_dir)
    builtin = None if repository else builtin_name(model)
    model_path = None if builtin or repository else (base_dir / model).resolve()
    if model_path is not None and not model_path.is_file():
        raise check.fail(
            "model",
            f"{model_path} does not exist (paths are relative to the plan; built-in models: "
            f"{', '.join([DEMO_MODEL, *BUILTIN_MODELS])})",
        )
    default_name = builtin or (model_path.stem if model_path else model if repository else "model")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise check.fail("name", f"must be a model name, got {shown(name)}")

    check_variant_count(check, data)
    given = data.get("repeats")
    repeats_given = None if given is None else check.integer(given, "repeats", 1, MAX_REPEATS)
    variants, origins = _variants(check, data, start)
    traces = _traces(check, data.get("loads", {}), base_dir)
    loads = parse_loads(check, data.get("loads", {}), traces)
    check_load_limits(check, loads)
    for load in loads:
        for variant, origin in zip(variants, origins, strict=True):
            if load.batch_size > variant.max_batch_size:
                raise check.fail(
                    "loads.batch_size",
                    f"client batch size {load.batch_size} exceeds max_batch_size "
                    f"{variant.max_batch_size} of {origin} ({variant.name})",
                )
    measurement = _measurement(check, data.get("measurement", {}))
    recommend = check.mapping(data.get("recommend", {}), "recommend", RECOMMEND_KEYS)
    experiment = ExperimentPlan(
        model_name=name,
        variants=with_engine_controls(tuple(variants), measurement.engine),
        loads=tuple(loads),
        repeats=engine_repeats(measurement.engine, repeats_given),
        measurement=measurement,
    )
    try:
        experiment.validate(model_batches=True)
    except (PlanError, ConfigError) as exc:
        raise PlanError(f"{source}: {exc}") from None
    return SweepPlan(
        source=source,
        model=model,
        model_path=model_path,
        experiment=experiment,
        **{
            key: check.number(recommend[key], f"recommend.{key}")
            for key in RECOMMEND_KEYS
            if recommend.get(key) is not None
        },
        repeats_given=repeats_given,
        repository=repository,
        step=step,
        traces=tuple(traces),
    )


def _traces(check: PlanChecker, loads: Any, base_dir: Path) -> list[Trace]:
    """The traces ``loads.trace`` names (a file or a list; relative to the plan), read."""
    if not isinstance(loads, dict) or "trace" not in loads:
        return []
    files = check.items(loads["trace"], "loads.trace")
    for i, f in enumerate(files):
        if not isinstance(f, str) or not f:
            raise check.fail(f"loads.trace[{i}]", f"must be a CSV file's path, got {shown(f)}")
    try:
        return distinct_traces([read_trace(base_dir / f) for f in files])
    except PlanError as exc:
        raise check.fail("loads.trace", str(exc)) from None


def load_plan(path: Path) -> SweepPlan:
    """Read and validate a YAML plan file."""
    source = str(path)
    try:
        text = read_capped(path, MAX_PLAN_BYTES).decode("utf-8")
    except FileRefused as exc:
        raise PlanError(f"{source}: {exc} (a plan is a YAML file)") from None
    except UnicodeDecodeError:
        raise PlanError(f"{source}: is not UTF-8 text; write the plan as YAML") from None
    except OSError as exc:
        raise PlanError(f"{source}: cannot read the plan: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise PlanError(f"{source}: not valid YAML{where}: {problem}") from None
    except (ValueError, RecursionError) as exc:  # an int of over 4,300 digits; deep nesting
        what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:120]
        raise PlanError(f"{source}: not a plan tritonlab reads: {what}") from None
    return parse_plan(data, source, path.resolve().parent)


def demo_plan_path() -> Path:
    """The default sweep plan for the demo model, shipped with the package."""
    return Path(str(resources.files("tritonlab.experiments") / "plans" / DEMO_PLAN_NAME))


def load_demo_plan() -> SweepPlan:
    """The shipped demo sweep plan (``experiments/plans/demo_sweep.yaml``), parsed."""
    return replace(load_plan(demo_plan_path()), source=DEMO_PLAN_NAME)
