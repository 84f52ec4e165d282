"""``tritonlab check``, live: a new model measured now against the baseline run's model,
re-measured in the same run, interleaved.

Why not against the stored figures: a baseline measured on another day carries that day's
machine (other tenants, clocks, thermal state); on a shared machine that drift is often larger
than the regression a gate looks for, and no interval computed from one day can contain it.
Measuring both in one run, round by round, puts the drift into both sides of every pair, where
the paired verdict cancels it.

What is served: the baseline run's configuration (``--config``, default ``baseline``) exactly
as its ``models/`` folder holds it, twice: once with the baseline's model file, once with the
new one (an ONNX file, placed in ``candidate/`` with that same config), or, with
``--repository DIR --model NAME``, the new side is the user's own config and files. The loads
and perf_analyzer settings are the baseline plan's. One model per side (an ensemble or a BLS
model is compared as two stored runs instead).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from tritonlab.analysis.check import (
    BASELINE_SIDE,
    CANDIDATE_SIDE,
    CheckReport,
    compare_live,
)
from tritonlab.analysis.gate import Thresholds, precision_targets
from tritonlab.errors import ConfigError
from tritonlab.experiments.adaptive_run import AdaptiveRepeats
from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.opening import model_sha256
from tritonlab.experiments.plan import ExperimentPlan
from tritonlab.experiments.run_folder import claim, discard_results, is_run_folder
from tritonlab.experiments.runner import run_experiment
from tritonlab.experiments.session import ProgressCallback
from tritonlab.experiments.store import load_cells, load_manifest, write_result
from tritonlab.models.inputs import derive_inputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.paths import portable_path
from tritonlab.pipeline.project import load_model_info
from tritonlab.report.check_outputs import markdown
from tritonlab.repository.config import MODEL_FILENAME
from tritonlab.repository.layout import MODEL_VERSION, add_model
from tritonlab.repository.user_repo import baseline_variant, read_repository_model, read_user_model
from tritonlab.run_layout import RunLayout
from tritonlab.server.launch import ServerOptions


@dataclass(frozen=True)
class LiveCheck:
    """Where the baseline is, where the check's run goes, and how long it may measure."""

    baseline_run: Path
    out_dir: Path
    config: str = "baseline"  # the baseline run's configuration both sides are served with
    repeats: int | None = None  # planned rounds (default: the baseline plan's)
    max_repeats: int = 8  # rounds at most, while an interval is wider than half its threshold
    budget_s: float | None = None  # seconds the extra rounds may take
    fresh: bool = False
    window_ms: int | None = None  # perf_analyzer's window (default: the baseline plan's)


def _served_name(baseline_run: Path, config: str, plan: ExperimentPlan) -> str:
    """The name the baseline run served ``config`` under (from its cells)."""
    names = [v.name for v in plan.variants]
    if config not in names:
        raise ConfigError(
            f"--config {config!r}: the baseline run has no such configuration; it has "
            + ", ".join(names)
        )
    for cell in load_cells(baseline_run):
        if cell.variant.name == config:
            return cell.perf.settings.model_name
    raise ConfigError(f"{baseline_run}: configuration {config!r} has no measured cell")


def _single(info: OnnxModelInfo, what: str) -> OnnxModelInfo:
    assert info.source is not None
    if len(info.source.needed) > 1:
        raise ConfigError(
            f"{what} is a pipeline ({info.source.kind}): a live check serves one model per "
            "side; measure both pipelines with `tritonlab run` and compare the two run folders"
        )
    return info


def _candidate_repository(layout: RunLayout, new_onnx: Path, config_file: Path, name: str) -> Path:
    """``candidate/<name>/``: the baseline's config with the new ONNX file (linked or copied)."""
    folder = layout.candidate / name
    if folder.exists():
        if not is_run_folder(layout.root):
            raise ConfigError(
                f"{layout.root} holds a candidate/ folder tritonlab did not make; pass another "
                "--out"
            )
        shutil.rmtree(folder)  # ours: rewritten from its sources on every run
    (folder / MODEL_VERSION).mkdir(parents=True)
    shutil.copyfile(config_file, folder / "config.pbtxt")
    target = folder / MODEL_VERSION / MODEL_FILENAME
    try:
        target.hardlink_to(new_onnx)
    except OSError:
        shutil.copyfile(new_onnx, target)
    return layout.candidate


def _inputs_differ(a: OnnxModelInfo, b: OnnxModelInfo) -> list[str]:
    ta = [(t.name, t.triton_dtype, tuple(t.dims)) for t in a.inputs]
    tb = [(t.name, t.triton_dtype, tuple(t.dims)) for t in b.inputs]
    if ta != tb:
        return [f"model inputs: {ta} (baseline) vs {tb} (new)"]
    if a.batched != b.batched:
        return [f"batch axis: {a.batched} (baseline) vs {b.batched} (new)"]
    return []


def run_live_check(
    check: LiveCheck,
    thresholds: Thresholds,
    options: ServerOptions,
    new_onnx: Path | None = None,
    new_repository: tuple[Path, str] | None = None,
    progress: ProgressCallback | None = None,
) -> CheckReport:
    """Measure the new model (``new_onnx``, or ``new_repository``'s (root, model)) against the
    baseline run's model, interleaved, and put the figures through the gate."""
    base = Manifest.from_dict(load_manifest(check.baseline_run))
    plan = base.plan
    served = _served_name(check.baseline_run, check.config, plan)
    models_dir = RunLayout(check.baseline_run).models
    old_info = _single(read_repository_model(models_dir, served), f"{check.baseline_run}'s model")
    layout = RunLayout(check.out_dir)
    new_label = str(new_onnx) if new_onnx is not None else ""
    if new_onnx is not None:  # checked before anything is written
        if not new_onnx.is_file():
            raise ConfigError(f"{new_onnx}: not a file; pass the new model's ONNX file")
        differ = _inputs_differ(old_info, load_model_info(new_onnx))  # the graph's own inputs
        if differ:
            return CheckReport("live", str(check.baseline_run), new_label, thresholds, [], differ)
    elif new_repository is not None:
        root, name = new_repository
        new_info, new_label = read_repository_model(root, name), f"{root}/{name}"
    else:
        raise ConfigError("give the new model: an ONNX file, or --repository DIR --model NAME")
    if check.fresh:
        discard_results(check.out_dir)
    check.out_dir.mkdir(parents=True, exist_ok=True)
    claim(check.out_dir)
    if new_onnx is not None:
        root = _candidate_repository(layout, new_onnx, models_dir / served / "config.pbtxt", served)
        new_info = read_repository_model(root, served)
    new_info = _single(new_info, new_label)
    differ = _inputs_differ(old_info, new_info)
    if differ:
        return CheckReport("live", str(check.baseline_run), new_label, thresholds, [], differ)
    assert old_info.source is not None and new_info.source is not None
    old_sha, new_sha = model_sha256(old_info), model_sha256(new_info)
    old_config = read_user_model(old_info.source.root, old_info.source.model).config
    new_config = read_user_model(new_info.source.root, new_info.source.model).config
    old_variant = replace(
        baseline_variant(old_config, old_info.source.tuned_backend),
        name=BASELINE_SIDE,
        description=f"baseline run's {check.config} (model {old_sha[:12]})",
    )
    new_variant = replace(
        baseline_variant(new_config, new_info.source.tuned_backend),
        name=CANDIDATE_SIDE,
        description=f"new model (model {new_sha[:12]})",
    )
    loads = tuple(ld for ld in plan.loads if ld.peak_fraction is None)
    changed = [
        f"{k} {v} -> {new_variant.to_dict().get(k)}"
        for k, v in old_variant.to_dict().items()
        if k not in ("name", "description") and v != new_variant.to_dict().get(k)
    ]
    notes: tuple[str, ...] = (
        f"The baseline is {portable_path(check.baseline_run, check.out_dir)}'s configuration "
        f"{check.config!r}, served as its models/{served}/ holds it (model files sha256 "
        f"{old_sha[:12]}); the new side is {new_label} (sha256 {new_sha[:12]}); its "
        f"configuration differs in: {', '.join(changed) or 'nothing tritonlab varies'}.",
    )
    measurement = plan.measurement
    if check.window_ms is not None and check.window_ms != measurement.measurement_interval_ms:
        notes += (
            f"Both sides were measured with {check.window_ms} ms windows (the baseline run "
            f"used {measurement.measurement_interval_ms} ms); the loads are the baseline's.",
        )
        measurement = replace(measurement, measurement_interval_ms=check.window_ms)
    if len(loads) < len(plan.loads):
        notes += ("Loads at a fraction of the peak were left out (their rate is per model).",)
    check_plan = ExperimentPlan(
        model_name=plan.model_name,
        variants=(old_variant, new_variant),
        loads=loads,
        repeats=check.repeats or plan.repeats,
        measurement=measurement,
        notes=notes,
    )
    repo = layout.models
    built = [
        add_model(repo, new_info, plan.model_name, new_variant),
        add_model(repo, old_info, plan.model_name, old_variant),
    ]
    inputs = base.inputs or derive_inputs(new_info)

    def undecided() -> tuple[list[tuple[str, str]], list[str]]:
        wide = precision_targets(
            compare_live(
                check.out_dir, check.baseline_run, new_label, thresholds, check.config
            ).results
        )
        keys = sorted({r.load_key for r in wide})
        targets = [(side, k) for k in keys for side in (BASELINE_SIDE, CANDIDATE_SIDE)]
        reasons = [
            f"{r.name}: {r.verdict.phrase()}, wider than ±{abs(r.threshold_pct) / 2:g}%"
            for r in wide
        ]
        return targets, reasons

    adaptive = None
    if check.max_repeats > check_plan.repeats:
        adaptive = AdaptiveRepeats(check.max_repeats, undecided, check.budget_s, precision=True)
    run_experiment(
        check_plan,
        new_info,
        check.out_dir,
        options,
        progress=progress,
        adaptive=adaptive,
        inputs=inputs,
        models=built,
        probes=False,
    )
    report = compare_live(check.out_dir, check.baseline_run, new_label, thresholds, check.config)
    write_result(layout.check, report.to_dict())
    layout.check_markdown.parent.mkdir(parents=True, exist_ok=True)
    layout.check_markdown.write_text(markdown(report), encoding="utf-8")
    return report
