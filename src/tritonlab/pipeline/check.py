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

from dataclasses import dataclass, replace
from pathlib import Path

from tritonlab import gateway
from tritonlab.decisions.check import (
    BASELINE_SIDE,
    CANDIDATE_SIDE,
    CheckReport,
    compare_live,
    variant_changes,
)
from tritonlab.decisions.gate import Thresholds, precision_targets
from tritonlab.errors import ConfigError
from tritonlab.experiments.adaptive_run import AdaptiveRepeats
from tritonlab.experiments.blocks import ENGINE_BLOCKS
from tritonlab.experiments.opening import check_resume, plan_fingerprint
from tritonlab.experiments.plan import ExperimentPlan, install_traces
from tritonlab.experiments.repository_plan import repository_baseline
from tritonlab.experiments.run_folder import (
    claim,
    discard_results,
    is_run_folder,
    open_run_folder,
    require_run_folder,
)
from tritonlab.experiments.runner import run_experiment
from tritonlab.experiments.session import ProgressCallback
from tritonlab.experiments.store import load_manifest, read_cell
from tritonlab.models.inputs import derive_inputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.paths import portable_path
from tritonlab.perf.trace import read_trace
from tritonlab.pipeline.project import load_model_info
from tritonlab.report.check_outputs import markdown
from tritonlab.repository.config import CONFIG_FILE, MODEL_FILENAME
from tritonlab.repository.layout import MODEL_VERSION, add_model, place_model_file
from tritonlab.repository.user_repo import read_repository_model
from tritonlab.repository.variants import MODEL_NAME_RE
from tritonlab.result_files import write_result
from tritonlab.run_layout import RunLayout
from tritonlab.server.launch import ServerOptions
from tritonlab.stats.comparability import input_signature


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
    """The name the baseline run served ``config`` under (from its cells: it becomes a path,
    so it must be one plain model name)."""
    names = [v.name for v in plan.variants]
    if config not in names:
        raise ConfigError(
            f"--config {config!r}: the baseline run has no such configuration; it has "
            + ", ".join(names)
        )
    # one cell of it is enough (a cell file is ``<variant>__<load>__r<n>.json``)
    for path in sorted(RunLayout(baseline_run).cells.glob(f"{config}__*.json"))[:1]:
        name = read_cell(path).perf.settings.model_name
        if not MODEL_NAME_RE.fullmatch(name):
            raise ConfigError(
                f"{baseline_run}: configuration {config!r} was served as {name!r}, not a "
                "model name; is this a tritonlab run folder?"
            )
        return name
    raise ConfigError(f"{baseline_run}: configuration {config!r} has no measured cell")


def _single(info: OnnxModelInfo, what: str) -> OnnxModelInfo:
    if len(info.origin.needed) > 1:
        raise ConfigError(
            f"{what} is a pipeline ({info.origin.kind}): a live check serves one model per "
            "side; measure both pipelines with `tritonlab run` and compare the two run folders"
        )
    return info


def _candidate_repository(root: Path, new_onnx: Path, models: Path, name: str) -> Path:
    """``root/<name>/``: the baseline's config (of ``models/<name>/``) with the new ONNX file
    (linked or copied); returns ``root``, a repository to read the new side from."""
    folder = root / name
    gateway.remove_tree(folder)  # ours: rewritten from its sources on every run
    gateway.copy_in(models / name / CONFIG_FILE, folder / CONFIG_FILE)
    place_model_file(new_onnx, folder / MODEL_VERSION / MODEL_FILENAME)
    return root


def _inputs_differ(a: OnnxModelInfo, b: OnnxModelInfo) -> list[str]:
    ta, tb = input_signature(a.inputs), input_signature(b.inputs)
    if ta != tb:
        return [f"model inputs: {ta} (baseline) vs {tb} (new)"]
    if a.batched != b.batched:
        return [f"batch axis: {a.batched} (baseline) vs {b.batched} (new)"]
    return []


def _check_plan(
    check: LiveCheck, plan: ExperimentPlan, served: str, old: OnnxModelInfo, new: OnnxModelInfo
) -> tuple[ExperimentPlan, str]:
    """The check's plan (the baseline's configuration twice, its loads and settings) and the
    new side's model sha256."""
    old_sha, new_sha = old.origin.sha256(), new.origin.sha256()
    old_variant, new_variant = (
        replace(repository_baseline(info), name=side, description=text)
        for info, side, text in (
            (old, BASELINE_SIDE, f"baseline run's {check.config} (model {old_sha[:12]})"),
            (new, CANDIDATE_SIDE, f"new model (model {new_sha[:12]})"),
        )
    )
    loads = tuple(ld for ld in plan.loads if not ld.kind.from_peak)
    changed = variant_changes(old_variant, new_variant)
    notes: tuple[str, ...] = (
        f"The baseline is {portable_path(check.baseline_run, check.out_dir)}'s configuration "
        f"{check.config!r}, served as its models/{served}/ holds it (model files sha256 "
        f"{old_sha[:12]}); the new side's model files have sha256 {new_sha[:12]}; its "
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
    if measurement.engine != ENGINE_BLOCKS:
        notes += (
            "Each round measures the two sides in turn, the order reversed every other round "
            "(new, baseline; baseline, new; ...), so neither side always goes first.",
        )
    check_plan = ExperimentPlan(
        model_name=plan.model_name,
        variants=(old_variant, new_variant),
        loads=loads,
        repeats=check.repeats or plan.repeats,
        measurement=measurement,
        notes=notes,
    )
    return check_plan, new_sha


def run_live_check(
    check: LiveCheck,
    thresholds: Thresholds,
    options: ServerOptions,
    new_onnx: Path | None = None,
    new_repository: tuple[Path, str] | None = None,
    progress: ProgressCallback | None = None,
) -> CheckReport:
    """Measure the new model (``new_onnx``, or ``new_repository``'s (root, model)) against the
    baseline run's model, interleaved, and put the figures through the gate. Everything is
    checked before anything is written: the paths, the new model, the inputs, and that
    ``--out`` holds no other run (its plan fingerprint); first of all, that ``--against`` is
    a finished tritonlab run folder (``require_run_folder``: one line if not)."""
    require_run_folder(check.baseline_run)
    open_run_folder(  # the check writes its folder; the inputs are only read
        check.out_dir,
        {
            "--against": check.baseline_run,
            "the new model": new_onnx,
            "--repository": new_repository[0] if new_repository else None,
        },
    )
    base = load_manifest(check.baseline_run)
    plan = base.plan
    served = _served_name(check.baseline_run, check.config, plan)
    base_layout, layout = RunLayout(check.baseline_run), RunLayout(check.out_dir)
    old_info = _single(
        read_repository_model(base_layout.models, served), f"{check.baseline_run}'s model"
    )
    traces = [read_trace(base_layout.trace_csv(ld.trace.name)) for ld in plan.loads if ld.trace]
    with gateway.temporary_folder("tritonlab-check-") as scratch:
        if new_onnx is not None:
            if not new_onnx.is_file():
                raise ConfigError(f"{new_onnx}: not a file; pass the new model's ONNX file")
            new_label = str(new_onnx)
            if differ := _inputs_differ(old_info, load_model_info(new_onnx)):  # the graph's own
                return CheckReport(
                    "live", str(check.baseline_run), new_label, thresholds, [], differ
                )
            root = _candidate_repository(Path(scratch.root), new_onnx, base_layout.models, served)
            new_info = read_repository_model(root, served)
        elif new_repository is not None:
            root, name = new_repository
            new_info, new_label = read_repository_model(root, name), f"{root}/{name}"
        else:
            raise ConfigError("give the new model: an ONNX file, or --repository DIR --model NAME")
        new_info = _single(new_info, new_label)
        if differ := _inputs_differ(old_info, new_info):
            return CheckReport("live", str(check.baseline_run), new_label, thresholds, [], differ)
        check_plan, new_sha = _check_plan(check, plan, served, old_info, new_info)
        inputs = base.inputs or derive_inputs(new_info)
        if not check.fresh:  # another run's folder is refused before anything is written
            check_resume(check.out_dir, plan_fingerprint(check_plan, new_sha, inputs))
    if check.fresh:
        discard_results(check.out_dir)
    gateway.mkdir(check.out_dir)
    claim(check.out_dir)
    if not is_run_folder(check.out_dir):
        raise ConfigError(
            f"--out {check.out_dir} holds files tritonlab did not make; give the check its own "
            "folder"
        )
    if new_onnx is not None:
        root = _candidate_repository(layout.candidate, new_onnx, base_layout.models, served)
        new_info = _single(read_repository_model(root, served), new_label)
    install_traces(check.out_dir, traces)
    old_variant, new_variant = check_plan.variants
    built = [
        add_model(layout.models, new_info, plan.model_name, new_variant),
        add_model(layout.models, old_info, plan.model_name, old_variant),
    ]

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
        alternate=True,
    )
    report = compare_live(check.out_dir, check.baseline_run, new_label, thresholds, check.config)
    write_result(layout.check, report.to_dict())
    gateway.write_text(layout.check_markdown, markdown(report))
    return report
