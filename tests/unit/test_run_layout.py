"""One run-folder layout (issue 21, 3): every path is the layout's, and nothing else joins one."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import pytest

from tritonlab import run_layout
from tritonlab.run_layout import (
    CELLS_DIR,
    RUN_FILES,
    RUN_OUTPUTS,
    RUN_SUBFOLDERS,
    SERVING_PATH_DIR,
    RunLayout,
    cell_id,
)

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "tritonlab"
EXAMPLE = ROOT / "examples" / "simple_mlp"

# Names a run folder holds: a join ``x / "<name>"`` outside run_layout.py builds a run-folder
# path by hand.
RUN_NAMES = {
    "results",
    "cells",
    "serving_path",
    "models",
    "benchmarks",
    "plots",
    "docs",
    "pick",
    "server",
    "inputs",
    "scripts",
    "client",
    "report.html",
    "README.md",
    "manifest.json",
    "infer_check.json",
    "tritonserver.log",
}
# Joins with such a name that are not of a run folder, and why they stay.
ALLOWED = {
    # The symlink tritonserver is given in a private temporary folder when the repository's
    # path has characters its Python backend cannot start a stub from; not a run folder.
    ("server/process.py", "models"),
    # ``tritonlab deploy --out``: the Kubernetes manifests' folder, not a run folder.
    ("deploy/kubernetes.py", "README.md"),
}


def _layout_paths(layout: RunLayout) -> dict[str, Path]:
    """Every path the layout names: its fixed paths and its methods called with a sample."""
    samples = {
        "cell": ("baseline__grpc_b1_c8__r1",),
        "cell_folder": (SERVING_PATH_DIR,),
        "model_dir": ("simple_mlp__baseline",),
        "benchmark_dir": ("baseline",),
        "perf_data": (128,),
        "trace_csv": ("bursts",),
        "trace_intervals": ("bursts",),
        "plot": ("roofline",),
        "pick_config": ("simple_mlp",),
        "exported_model": ("simple_mlp",),
    }
    paths: dict[str, Path] = {}
    for name, member in inspect.getmembers(RunLayout):
        if name.startswith("_") or name in ("root", "relative"):
            continue
        if inspect.isfunction(member):
            paths[name] = getattr(layout, name)(*samples[name])
        else:
            paths[name] = getattr(layout, name)
    return paths


def test_every_path_of_the_layout_lies_under_its_root(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "run")
    paths = _layout_paths(layout)
    assert len(paths) > 30
    for name, path in paths.items():
        assert path.is_relative_to(layout.root) and path != layout.root, name
        assert layout.relative(path) == path.relative_to(layout.root).as_posix()


def test_the_layout_names_what_an_example_run_folder_holds() -> None:
    layout = RunLayout(EXAMPLE)
    for path in (
        layout.manifest,
        layout.infer_check,
        layout.operators,
        layout.summary,
        layout.cost_model,
        layout.adaptive,
        layout.server_log,
        layout.experiment_log,
        layout.html_report,
        layout.readme,
        layout.run_perf_script,
        layout.export_model_script,
        layout.infer_client,
        layout.plot("throughput_vs_p99"),
    ):
        assert path.is_file(), path
    for folder in (layout.cells, layout.serving_path_cells, layout.models, layout.benchmarks):
        assert folder.is_dir(), folder
    assert layout.relative(layout.cell("x", SERVING_PATH_DIR)) == "results/serving_path/x.json"
    assert layout.relative(layout.perf_data()) == "inputs/perf_data.json"
    assert layout.relative(layout.perf_data(64)) == "inputs/perf_data_s64.json"
    assert layout.relative(layout.pick_config("m")) == "pick/m/config.pbtxt"
    assert layout.relative(layout.trace_intervals("b")) == "traces/b.intervals.txt"


@pytest.mark.parametrize("folder", [CELLS_DIR, SERVING_PATH_DIR])
def test_cell_id_is_the_stem_of_every_stored_cell_file(folder: str) -> None:
    files = sorted(RunLayout(EXAMPLE).cell_folder(folder).glob("*.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text())
        built = cell_id(data["variant"]["name"], data["load_key"], data["repeat"])
        assert built == path.stem == data["cell_id"]
        assert RunLayout(EXAMPLE).cell(built, folder) == path


def test_the_outputs_fresh_sets_aside_are_every_folder_and_file_a_run_writes() -> None:
    assert RUN_OUTPUTS == RUN_SUBFOLDERS + RUN_FILES
    assert len(set(RUN_OUTPUTS)) == len(RUN_OUTPUTS)
    layout = RunLayout(Path("run"))
    tops = {layout.relative(p).split("/")[0] for p in _layout_paths(layout).values()}
    # everything the layout places in a run folder except the kept model, marker and trash
    assert tops - set(RUN_OUTPUTS) == {"simple_mlp.onnx", ".tritonlab", ".trash"}
    assert set(RUN_OUTPUTS) <= tops


def _joins_with_run_names(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        right = node.right
        if isinstance(right, ast.Constant) and right.value in RUN_NAMES:
            found.append((node.lineno, right.value))
    return found


def test_no_module_but_run_layout_joins_a_run_folder_path_by_hand() -> None:
    hand_built, allowed_seen = [], set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        # run_layout.py is the layout; the template is a standalone script tritonlab writes
        if rel == "run_layout.py" or rel.startswith("report/templates/"):
            continue
        for line, name in _joins_with_run_names(path):
            if (rel, name) in ALLOWED:
                allowed_seen.add((rel, name))
            else:
                hand_built.append(f"{rel}:{line}: / {name!r}")
    assert not hand_built, "ask run_layout.RunLayout instead:\n" + "\n".join(hand_built)
    assert allowed_seen == ALLOWED  # no stale exception


def test_the_scan_sees_a_hand_built_join(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('from pathlib import Path\np = Path("x") / "results" / "manifest.json"\n')
    assert {name for _, name in _joins_with_run_names(sample)} == {"results", "manifest.json"}


def test_every_public_name_of_run_layout_has_a_docstring() -> None:
    assert run_layout.__doc__
    public = [(n, m) for n, m in inspect.getmembers(RunLayout) if not n.startswith("_")]
    assert len(public) > 40  # methods, properties and the fixed paths
    for name, member in public:
        assert inspect.getdoc(member), name
    assert inspect.getdoc(cell_id)
