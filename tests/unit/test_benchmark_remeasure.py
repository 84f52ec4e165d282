"""The pure helpers the Model Analyzer benchmarks share (benchmarks/vs_model_analyzer/
remeasure.py) and the pipeline benchmark's own (pipeline_compare.py): no server, no measuring."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tritonlab.repository.config import read_config

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "vs_model_analyzer"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


remeasure = _load("remeasure")
pipeline_compare = _load("pipeline_compare")


def test_each_pick_is_measured_at_its_own_load_and_the_common_one() -> None:
    loads = remeasure.loads_per_pick([("ma", 32), ("tune", 8), ("x", 4)], 8)
    assert loads == {"ma": [8, 32], "tune": [8], "x": [4, 8]}


def test_median_range_text() -> None:
    assert remeasure.median_range_text([3000.0, 1000.0, 2000.0]) == "2,000 (1,000–3,000)"
    assert remeasure.median_range_text([1500.0, 2500.0], 1000, 2) == "2.00 (1.50–2.50)"
    assert remeasure.median_range_text([]) == "n/a"


def _model(root: Path, name: str, text: str) -> None:
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.py").write_text("# step\n")
    (root / name / "config.pbtxt").write_text(f'name: "{name}"\n{text}')


def test_copy_prefixed_renames_the_models_and_the_ensemble_steps(tmp_path: Path) -> None:
    source = tmp_path / "repo"
    _model(source, "pre", 'backend: "python"\nmax_batch_size: 4\n')
    _model(source, "post", 'backend: "python"\nmax_batch_size: 4\n')
    _model(
        source,
        "pipe",
        'platform: "ensemble"\nmax_batch_size: 4\nensemble_scheduling {\n'
        '  step { model_name: "pre" model_version: -1 }\n'
        '  step { model_name: "post" model_version: -1 }\n}\n',
    )
    target = tmp_path / "models"
    served = remeasure.copy_prefixed(source, ("pre", "post", "pipe"), target, "ma")
    assert served == {"pre": "ma_pre", "post": "ma_post", "pipe": "ma_pipe"}
    ensemble = read_config(target / "ma_pipe" / "config.pbtxt")
    assert ensemble.name == "ma_pipe"
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == ["ma_pre", "ma_post"]
    assert read_config(target / "ma_pre" / "config.pbtxt").name == "ma_pre"
    assert (target / "ma_post" / "1" / "model.py").read_text() == "# step\n"
    assert read_config(source / "pipe" / "config.pbtxt").name == "pipe"  # the source untouched


def test_first_error_line_finds_what_went_wrong() -> None:
    typer_error = (
        "Usage: tritonlab tune [OPTIONS] {model}\n"
        "Try 'tritonlab tune --help' for help.\n"
        "╭─ Error ─────────────────╮\n"
        "│ No such option: --repository │\n"
        "╰─────────────────────────╯\n"
    )
    assert pipeline_compare.first_error_line(typer_error) == "No such option: --repository"
    assert (
        pipeline_compare.first_error_line("loading\nError: model 'x' failed to load\nbye\n")
        == "Error: model 'x' failed to load"
    )
    assert pipeline_compare.first_error_line("one\ntwo\n\n") == "two"
    assert pipeline_compare.first_error_line("") == "(no output)"


def test_portable_replaces_machine_folders_longest_first() -> None:
    data = {"a": ["/h/me/repo/runs/x", 3], "b": "/h/me/other", "c": None}
    replaced = pipeline_compare.portable(data, {"/h/me/repo/": "", "/h/me": "$HOME"})
    assert replaced == {"a": ["runs/x", 3], "b": "$HOME/other", "c": None}
