"""Generated scripts embed user-chosen names as literals, never as code (issue 20, 2).

Each hostile name (quotes, a triple quote, ``$()``, backticks, a newline, spaces, non-ASCII) is
written into the scripts a run folder holds; the Python scripts must parse with the name as one
string literal and run without executing anything of it, the shell script must read it back as
one word, and nothing may create the canary file the names try to create.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tritonlab.errors import ConfigError
from tritonlab.perf.locate import PerfAnalyzerInstall
from tritonlab.perf.settings import PerfSettings
from tritonlab.pipeline.project import check_model_name
from tritonlab.report.project import (
    client_script,
    export_script_demo,
    export_script_user,
    run_perf_script,
)

CANARY = "PWNED"
HOSTILE = [
    f'a"""\nimport pathlib; pathlib.Path("{CANARY}").touch()\n"""b',
    f"x'; open('{CANARY}', 'w'); '",
    f"$(touch {CANARY})",
    f"`touch {CANARY}`",
    "new\nline",
    "with space and ünïcødé",
    "back\\slash",
]


def _assigned(script: str, name: str) -> object:
    """The constant assigned to ``name`` at the top level of ``script`` (which must parse)."""
    tree = ast.parse(script)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} is not assigned")


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_export_script_holds_the_file_name_as_a_literal(tmp_path: Path, hostile: str) -> None:
    run = tmp_path / "run"
    (run / "scripts").mkdir(parents=True)
    script = export_script_user(run / f"{hostile}.onnx", "m", run)
    assert _assigned(script, "SOURCE") == f"{hostile}.onnx"
    path = run / "scripts" / "export_model.py"
    path.write_text(script)
    # the file is not there: the script must say so and exit, having run nothing of the name
    result = subprocess.run(
        [sys.executable, str(path)], cwd=run, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1 and "not found" in result.stderr, result.stderr
    assert not list(tmp_path.rglob(CANARY))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_demo_export_and_the_client_hold_names_as_literals(hostile: str) -> None:
    assert _assigned(export_script_demo(hostile), "NAME") == hostile
    assert _assigned(client_script(hostile), "DEFAULT_MODEL") == hostile


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_perf_script_reads_the_model_name_back_as_one_word(
    tmp_path: Path, hostile: str
) -> None:
    settings = PerfSettings(model_name=hostile, url="URL", protocol="grpc", concurrency=4)
    perf = PerfAnalyzerInstall(Path("/p/perf_analyzer"), (), "2.51")
    script = run_perf_script(perf, settings)
    start = script.index("\nDEFAULT_MODEL=") + 1
    line = script[start : script.index('\nMODEL="${1:-$DEFAULT_MODEL}"')]
    # the assignment, and the default as the script uses it, evaluated by bash itself
    probe = f'{line}\nset -- \nMODEL="${{1:-$DEFAULT_MODEL}}"\nprintf %s "$MODEL"\n'
    result = subprocess.run(
        ["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0 and result.stdout == hostile, result
    assert 'MODEL="${1:-$DEFAULT_MODEL}"' in script
    assert not list(tmp_path.rglob(CANARY))


def test_a_model_name_with_a_trailing_newline_is_refused() -> None:
    assert check_model_name("simple_mlp") == "simple_mlp"
    with pytest.raises(ConfigError):
        check_model_name("simple_mlp\n")
