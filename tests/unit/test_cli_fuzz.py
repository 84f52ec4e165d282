"""A fuzzed command line (issue 20, 8): Hypothesis over option values and paths of ``run``,
``sweep``, ``tune``, ``deploy`` and ``report``, where validation must stop each invocation
before any server starts.

Every invocation must end with exit 0, 1 or 2 and no Python exception (no traceback), within a
few seconds (no hang), and leave a decoy folder beside the run folders exactly as it was (its
files hashed before and after). The model is never a valid ONNX file and the run folders hold
no tritonlab run, so a passing invocation would be a bug of its own: the test says which.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tritonlab.cli import app

runner = CliRunner()
BUILTINS = {"demo", "simple_mlp", "resnet18_cnn", "bert_encoder", "tiny_cnn"}
SECONDS_PER_CALL = 10.0

# Text a user (or a hostile file name) might type: quotes, $(), newlines, .., NUL-free.
WORDS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
    max_size=24,
)
PATHS = st.one_of(
    st.sampled_from(
        [
            ".",
            "..",
            "out",
            "decoy",
            "decoy/..",
            "../decoy",
            "nothing.onnx",
            "garbage.onnx",
            "plan.yaml",
            "$(touch PWNED)",
            "a b/c",
            "/dev/null",
            "model.onnx\n",
        ]
    ),
    # never a built-in model or the demo plan: those would pass validation and start a server
    WORDS.filter(lambda w: w.strip() != "" and w.strip() not in BUILTINS),
)
NUMBERS = st.one_of(
    st.integers(-5, 10**6).map(str), st.sampled_from(["nan", "inf", "-0", "1e9", "", "x"])
)


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("fuzz")
    decoy = work / "decoy"
    (decoy / "docs").mkdir(parents=True)
    (decoy / "docs" / "notes.md").write_text("keep me\n")
    (decoy / "models").mkdir()
    (decoy / "models" / "m.txt").write_text("mine\n")
    (work / "garbage.onnx").write_bytes(b"\x08\x07not an onnx model")
    (work / "plan.yaml").write_text("model: nothing.onnx\nloads: {concurrency: [1, 2]}\n")
    return work


def _commands() -> st.SearchStrategy[list[str]]:
    out = st.tuples(st.just("--out"), PATHS)
    fresh = st.sampled_from([[], ["--fresh"]])
    run = st.builds(
        lambda model, o, f, extra: ["run", model, *o, *f, *extra],
        PATHS,
        out,
        fresh,
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "--repeats",
                        "--concurrency",
                        "--window-ms",
                        "--stability",
                        "--shape",
                        "--configs",
                        "--protocol",
                        "--engine",
                        "--name",
                        "--max-batch-size",
                    ]
                ),
                st.one_of(NUMBERS, WORDS),
            ).map(list),
            max_size=3,
        ).map(lambda pairs: [x for p in pairs for x in p]),
    )
    tune = st.builds(
        lambda model, o, f, extra: ["tune", model, *o, *f, *extra],
        PATHS,
        out,
        fresh,
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "--goal",
                        "--p99-budget-ms",
                        "--target-load",
                        "--engine",
                        "--max-race-rounds",
                        "--protocol",
                        "--name",
                    ]
                ),
                st.one_of(NUMBERS, WORDS),
            ).map(list),
            max_size=3,
        ).map(lambda pairs: [x for p in pairs for x in p]),
    )
    sweep = st.builds(
        lambda plan, o, f, extra: ["sweep", plan, *o, *f, *extra],
        PATHS,
        out,
        fresh,
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "--engine",
                        "--max-repeats",
                        "--time-budget-s",
                        "--latency-budget-us",
                        "--remeasure",
                    ]
                ),
                st.one_of(NUMBERS, WORDS),
            ).map(list),
            max_size=2,
        ).map(lambda pairs: [x for p in pairs for x in p]),
    )
    deploy = st.builds(
        lambda folder, o, extra: ["deploy", folder, *o, *extra],
        PATHS,
        out,
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "--to",
                        "--pick",
                        "--image",
                        "--image-digest",
                        "--repository",
                        "--min-replicas",
                        "--namespace",
                    ]
                ),
                st.one_of(NUMBERS, WORDS),
            ).map(list),
            max_size=3,
        ).map(lambda pairs: [x for p in pairs for x in p]),
    )
    report = st.builds(lambda folder: ["report", folder], PATHS)
    return st.one_of(run, tune, sweep, deploy, report)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(args=_commands())
def test_no_fuzzed_command_line_crashes_hangs_or_touches_the_decoy(
    workdir: Path, args: list[str]
) -> None:
    before = _digest(workdir / "decoy")
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        started = time.monotonic()
        result = runner.invoke(app, args)
        took = time.monotonic() - started
    finally:
        os.chdir(cwd)
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args,
        repr(result.exception),
    )
    assert "Traceback" not in result.output, (args, result.output)
    assert result.exit_code != 0 or args[0] in ("report",), (args, "passed validation")
    assert took < SECONDS_PER_CALL, (args, took)
    assert _digest(workdir / "decoy") == before, args
    assert not list(workdir.rglob("PWNED")), args
