"""Portable paths in stored results and reports, the runtime lookup, and the project scripts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tritonlab import locate
from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.store import load_cells, load_manifest
from tritonlab.paths import (
    cache_root,
    expand_path,
    portable_command,
    portable_file,
    portable_path,
    portable_text,
    recorded_run_dir,
    shell_join,
)
from tritonlab.perf.locate import PerfAnalyzerInstall
from tritonlab.perf.settings import PerfSettings
from tritonlab.report.build import build_report
from tritonlab.report.project import export_script_user, run_perf_script, start_server_script
from tritonlab.report.run_data import portable_records
from tritonlab.server.locate import ServerInstall, default_cache_root


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fake machine: home, tritonlab cache and virtualenv under tmp_path."""
    home, cache, venv = tmp_path / "home", tmp_path / "cache", tmp_path / "home" / "venv"
    for folder in (home, cache, venv):
        folder.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TRITONLAB_CACHE", str(cache))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    return {"home": home, "cache": cache, "venv": venv, "run": home / "work" / "run"}


def test_cache_root_honours_tritonlab_cache(
    machine: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cache_root() == machine["cache"] == default_cache_root()
    monkeypatch.delenv("TRITONLAB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(machine["home"] / "xdg"))
    assert default_cache_root() == machine["home"] / "xdg" / "tritonlab"


def test_portable_path_names_each_root_longest_first(machine: dict[str, Path]) -> None:
    run, cache, venv = machine["run"], machine["cache"], machine["venv"]
    assert portable_path(run / "models" / "m", run) == "models/m"
    assert portable_path(run, run) == "."
    assert portable_path(cache / "ts" / "bin" / "tritonserver", run) == (
        "$TRITONLAB_CACHE/ts/bin/tritonserver"
    )
    assert portable_path(venv / "bin" / "perf_analyzer") == "$VIRTUAL_ENV/bin/perf_analyzer"
    # The run folder and the venv lie inside the home: the longest root wins.
    assert portable_path(machine["home"] / "x.onnx", run) == "$HOME/x.onnx"
    assert portable_path("/opt/tritonserver/bin/tritonserver", run) == (
        "/opt/tritonserver/bin/tritonserver"
    )
    # A sibling folder whose name starts like the run folder's is not inside it.
    assert portable_path(str(run) + "_rerun/models", run).startswith("$HOME/work/run_rerun")


def test_relative_paths_are_rewritten_only_inside_the_run_folder(machine: dict[str, Path]) -> None:
    run = machine["run"]
    cwd = run.parent
    assert portable_path("run/benchmarks/a.csv", run, cwd=cwd) == "benchmarks/a.csv"
    assert portable_path("other/a.csv", run, cwd=cwd) == "other/a.csv"
    assert portable_path("run/benchmarks/a.csv", run) == "run/benchmarks/a.csv"  # no cwd


def test_portable_command_keeps_every_argument_and_rewrites_paths(
    machine: dict[str, Path],
) -> None:
    run, cache, venv = machine["run"], machine["cache"], machine["venv"]
    command = [
        str(venv / "bin" / "perf_analyzer"),
        "-m",
        "run",  # a model named like the run folder stays a model name
        "-u",
        "127.0.0.1:8001",
        "-f",
        "run/benchmarks/baseline/grpc_b1_c8__r1.csv",
        f"--model-repository={run / 'models'}",
        f"--cache-directory={cache / 'ts' / 'caches'}",
        "--url=http://example.org/a",
    ]
    assert portable_command(command, run, cwd=run.parent) == [
        "$VIRTUAL_ENV/bin/perf_analyzer",
        "-m",
        "run",
        "-u",
        "127.0.0.1:8001",
        "-f",
        "benchmarks/baseline/grpc_b1_c8__r1.csv",
        "--model-repository=models",
        "--cache-directory=$TRITONLAB_CACHE/ts/caches",
        "--url=http://example.org/a",
    ]


def test_expand_path_inverts_portable_path(machine: dict[str, Path]) -> None:
    run, cache, venv = machine["run"], machine["cache"], machine["venv"]
    for path in (run / "models", cache / "ts" / "bin" / "tritonserver", venv / "bin" / "x"):
        assert expand_path(portable_path(path, run), run) == str(path)


def test_shell_join_leaves_the_variables_to_the_shell(machine: dict[str, Path]) -> None:
    command = [
        "$TRITONLAB_CACHE/ts/bin/tritonserver",
        "--cache-directory=$TRITONLAB_CACHE/ts/caches",
        "a b",
        "$(touch nope)",
    ]
    line = shell_join(command)
    env = dict(os.environ, TRITONLAB_CACHE="/c d")
    out = subprocess.run(
        ["bash", "-c", f"printf '%s\\n' {line}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=machine["home"],
    ).stdout
    assert out.splitlines() == [
        "/c d/ts/bin/tritonserver",
        "--cache-directory=/c d/ts/caches",
        "a b",
        "$(touch nope)",
    ]
    assert not (machine["home"] / "nope").exists()


def test_portable_text_and_file_rewrite_a_server_log(machine: dict[str, Path]) -> None:
    run, cache = machine["run"], machine["cache"]
    run.mkdir(parents=True)
    log = run / "tritonserver.log"
    log.write_text(
        f"| model_repository_path[0] | {run}/models |\n"
        f"E failed to load {cache}/ts/backends/onnxruntime/model.py\n"
        f"run folder {run}, sibling {run}_rerun/x\n"
    )
    portable_file(log, run)
    assert log.read_text() == (
        "| model_repository_path[0] | models |\n"
        "E failed to load $TRITONLAB_CACHE/ts/backends/onnxruntime/model.py\n"
        "run folder ., sibling $HOME/work/run_rerun/x\n"
    )
    assert portable_text("nothing here") == "nothing here"


def test_recorded_run_dir_reads_the_servers_repository() -> None:
    assert recorded_run_dir(["ts", "--model-repository=/tmp/demo1/models"]) == Path("/tmp/demo1")
    assert recorded_run_dir(["ts", "--model-repository=models"]) is None
    assert recorded_run_dir(None) is None


OLD_RUN_DIR = "/tmp/demo1"  # where the fake old machine measured the seed run


def _old_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine that stored absolute paths (cache in /root, venv in /work/main)."""
    monkeypatch.setenv("TRITONLAB_CACHE", "/root/.cache/tritonlab")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setattr(sys, "prefix", "/work/main/.venv")
    monkeypatch.setattr(sys, "base_prefix", "/usr")


def _absolute_arg(arg: str) -> str:
    """``arg`` as tritonlab stored it before paths were portable (on ``_old_machine``)."""
    flag, sep, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
    if "/" in value or flag == "--model-repository":
        value = expand_path(value, OLD_RUN_DIR)
    return flag + sep + value


def _rewrite_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _old_run(seed_run_dir: Path, folder: Path) -> Path:
    """A copy of the seed run stored the old way: absolute paths of ``_old_machine``.

    The committed fixtures hold portable paths only (no machine's paths are committed), so the
    old form is rebuilt here from them to keep reading such runs tested.
    """
    shutil.copytree(seed_run_dir, folder)
    results = folder / "results"

    def manifest(data: dict[str, Any]) -> None:
        data["server"]["command"] = [_absolute_arg(a) for a in data["server"]["command"]]
        data["perf_analyzer"]["binary"] = _absolute_arg(data["perf_analyzer"]["binary"])

    def cell(data: dict[str, Any]) -> None:
        data["perf"]["command"] = [_absolute_arg(a) for a in data["perf"]["command"]]

    _rewrite_json(results / "manifest.json", manifest)
    for path in (results / "cells").glob("*.json"):
        _rewrite_json(path, cell)
    text = (results / "manifest.json").read_text()
    assert f"--model-repository={OLD_RUN_DIR}/models" in text and "/root/.cache/" in text
    assert "/work/main/.venv/bin/perf_analyzer" in text
    return folder


def test_old_runs_are_shown_portably(
    seed_run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _old_machine(monkeypatch)
    run = _old_run(seed_run_dir, tmp_path / "seed")
    stored = Manifest.from_dict(load_manifest(run))
    assert "/tmp/demo1/benchmarks/" in json.dumps([c.perf.command for c in load_cells(run)])
    manifest, cells = portable_records(run, stored, load_cells(run))
    text = json.dumps([manifest.to_dict(), [c.perf.command for c in cells]])
    assert "/root/" not in text and "/work/" not in text and "/tmp/demo1" not in text
    assert manifest.server.command and "--model-repository=models" in manifest.server.command
    assert manifest.perf_analyzer.binary == "$VIRTUAL_ENV/bin/perf_analyzer"
    assert cells[0].perf.command[0] == "$VIRTUAL_ENV/bin/perf_analyzer"
    assert "benchmarks/baseline/grpc_b1_c8__r1.csv" in {a for c in cells for a in c.perf.command}


def test_rebuilt_reports_hold_no_absolute_paths(
    seed_run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _old_machine(monkeypatch)
    run = _old_run(seed_run_dir, tmp_path / "seed")
    build_report(run)
    log = (run / "docs" / "experiment_log.md").read_text()
    page = (run / "report.html").read_text()
    for text in (log, page):
        assert "/root/" not in text and "/work/" not in text and str(tmp_path) not in text
        assert "/tmp/demo1" not in text and "$TRITONLAB_CACHE" in text
    reproduce = log[log.index("## Reproduce") :]
    assert '- Server command: `"$TRITONLAB_CACHE"/' in reproduce
    assert "--model-repository=models" in reproduce


# --- the runtime lookup (python3 -m tritonlab.locate) -------------------------------------


def test_shell_lines_eval_to_the_values(tmp_path: Path) -> None:
    odd = "/a b/it's $(here)"
    text = locate.shell_lines(
        {"TRITONSERVER": odd, "CACHE_DIR": ""},
        {"PATH": f"{odd}:/usr/bin:/bin", "KEEP": "1"},
        current={"PATH": "/usr/bin:/bin", "KEEP": "1", "PYTHONHOME": "/x"},
    )
    assert "export KEEP" not in text and "unset PYTHONHOME" in text
    out = subprocess.run(
        [
            "bash",
            "-c",
            'eval "$1"; printf "%s|%s|%s\\n" "$TRITONSERVER" "$CACHE_DIR" "$PATH"',
            "_",
            text,
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert out == f"{odd}||{odd}:/usr/bin:/bin\n"


def test_locate_reports_an_unusable_binary_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert locate.main(["perf", "--perf-analyzer", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tritonlab locate: ") and err.count("\n") == 1


# --- the generated scripts -----------------------------------------------------------------

FAKE_PYTHON = """#!/usr/bin/env bash
# A stand-in for the python3 that has tritonlab: answers the import check and the lookup.
if [ "$1" = "-c" ]; then exit 0; fi
shift 2  # -m tritonlab.locate
case "$1" in
  server) printf '%s\\n' "TRITONSERVER='$FAKE/bin dir/tritonserver'" \\
      "BACKEND_DIR='$FAKE/back ends'" "CACHE_DIR='${FAKE_CACHE_DIR-}'" \\
      "export PATH='$FAKE/venv bin':\\"\\$PATH\\"" ;;
  perf) printf '%s\\n' "PERF_ANALYZER='$FAKE/bin dir/perf_analyzer'" ;;
esac
"""

FAKE_BINARY = """#!/usr/bin/env bash
printf '%s\\n' "$(basename "$0") $PWD" "$@" "PATH=${PATH%%:*}"
"""


def _install(tmp_path: Path) -> Path:
    fake = tmp_path / "fake machine"
    (fake / "bin dir").mkdir(parents=True)
    (fake / "python3").write_text(FAKE_PYTHON)
    for name in ("tritonserver", "perf_analyzer"):
        (fake / "bin dir" / name).write_text(FAKE_BINARY)
    for path in [fake / "python3", *(fake / "bin dir").iterdir()]:
        path.chmod(0o755)
    return fake


def _project(tmp_path: Path, server: ServerInstall) -> Path:
    project = tmp_path / "copied project"
    (project / "scripts").mkdir(parents=True)
    settings = PerfSettings(
        model_name="mlp", url="URL", protocol="grpc", batch_size=1, concurrency=4
    )
    perf = PerfAnalyzerInstall(Path("/producer/venv/bin/perf_analyzer"), (Path("/p/l"),), "2.51")
    (project / "scripts" / "start_server.sh").write_text(start_server_script(server))
    (project / "scripts" / "run_perf.sh").write_text(run_perf_script(perf, settings))
    return project


BUNDLED = ServerInstall(
    binary=Path("/producer/cache/ts/bin/tritonserver"),
    backend_dir=Path("/producer/cache/ts/backends"),
    cache_dir=Path("/producer/cache/ts/caches"),
    library_path=(Path("/producer/venv/lib/libs"),),
    bundled=True,
)


def _run(
    script: Path, fake: Path | None, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HTTP_PORT": "18000", "GRPC_PORT": "18001"}
    if fake is not None:
        base |= {"TRITONLAB_PYTHON": str(fake / "python3"), "FAKE": str(fake)}
    return subprocess.run(
        ["bash", str(script), *args],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_scripts_hold_no_path_of_the_producing_machine(tmp_path: Path) -> None:
    project = _project(tmp_path, BUNDLED)
    for script in ("start_server.sh", "run_perf.sh"):
        text = (project / "scripts" / script).read_text()
        assert "/producer" not in text, script
        assert subprocess.run(["bash", "-n", str(project / "scripts" / script)]).returncode == 0


def test_scripts_find_the_binaries_at_run_time(tmp_path: Path) -> None:
    fake = _install(tmp_path)
    project = _project(tmp_path, BUNDLED)
    started = _run(project / "scripts" / "start_server.sh", fake, FAKE_CACHE_DIR="/c dir")
    assert started.returncode == 0, started.stderr
    assert started.stdout.splitlines() == [
        f"tritonserver {project}",
        f"--model-repository={project}/models",
        f"--backend-directory={fake}/back ends",
        "--cache-directory=/c dir",
        "--http-address=127.0.0.1",
        "--http-port=18000",
        "--grpc-address=127.0.0.1",
        "--grpc-port=18001",
        "--metrics-address=127.0.0.1",
        "--metrics-port=8002",
        f"PATH={fake}/venv bin",  # the environment's bin first, for the backend stub
    ]
    no_cache = _run(project / "scripts" / "start_server.sh", fake)
    assert not any(a.startswith("--cache-directory") for a in no_cache.stdout.splitlines())

    perf = _run(project / "scripts" / "run_perf.sh", fake, "mlp__batch_0ms_x1")
    assert perf.returncode == 0, perf.stderr
    lines = perf.stdout.splitlines()
    assert lines[:5] == [
        f"perf_analyzer {project}",
        "-m",
        "mlp__batch_0ms_x1",
        "-u",
        "127.0.0.1:18001",
    ]
    assert lines[-3:-1] == ["-f", "benchmarks/manual/mlp__batch_0ms_x1.csv"]
    assert (project / "benchmarks" / "manual" / "mlp__batch_0ms_x1.txt").exists()


def test_scripts_say_how_to_find_tritonlab(tmp_path: Path) -> None:
    project = _project(tmp_path, BUNDLED)
    for script in ("start_server.sh", "run_perf.sh"):
        result = _run(project / "scripts" / script, None, TRITONLAB_PYTHON=str(tmp_path / "no"))
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1
        assert "activate the Python environment where tritonlab is installed" in result.stderr


def test_external_server_is_written_as_given_and_runs_without_tritonlab(tmp_path: Path) -> None:
    fake = _install(tmp_path)
    server = ServerInstall(
        binary=fake / "bin dir" / "tritonserver",
        backend_dir=Path("/opt/tritonserver/backends"),
        cache_dir=None,
        library_path=(),
        bundled=False,
    )
    project = _project(tmp_path, server)
    result = _run(project / "scripts" / "start_server.sh", None, TRITONLAB_PYTHON="/nope")
    assert result.returncode == 0, result.stderr
    assert "--backend-directory=/opt/tritonserver/backends" in result.stdout.splitlines()


def test_export_script_reads_the_onnx_file_from_the_project(tmp_path: Path) -> None:
    run = tmp_path / "run"
    inside = export_script_user(run / "onnx" / "m.onnx", "m", run)
    assert "SOURCE = 'onnx/m.onnx'" in inside and str(tmp_path) not in inside
    outside = export_script_user(tmp_path / "elsewhere" / "m.onnx", "m", run)
    assert "SOURCE = 'm.onnx'" in outside and str(tmp_path) not in outside
