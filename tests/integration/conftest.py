"""Fixtures for the integration tier: the real bundled tritonserver and the real perf_analyzer.

Nothing here is mocked. The demo ONNX model is exported once per session, the bundled server is
laid out once per session, and every test that needs a server starts its own on free loopback
ports. When a test fails, the log of every server it started is printed, so the failure report
shows what Triton said.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from integration_support import BASELINE, BATCHING, DemoRepository, StartServer

from tritonlab.models.demo import DEMO_MODEL_NAME, export_simple_mlp
from tritonlab.models.inspect import OnnxModelInfo, inspect_onnx
from tritonlab.perf.locate import PerfAnalyzerInstall, locate_perf_analyzer
from tritonlab.repository.layout import build_repository
from tritonlab.server.locate import ServerInstall, prepare_bundled_server
from tritonlab.server.process import TritonServer

# Runs made in this process (the library tests) record their in-process ceilings over 1 s, like
# the CLI runs (integration_support.cli_env): behaviour tests need them recorded, not precise.
os.environ.setdefault("TRITONLAB_CEILING_WINDOW_S", "1")

LOG_TAIL_CHARS = 6000


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item (``rep_setup``, ``rep_call``) for the fixtures."""
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep


def _failed(request: pytest.FixtureRequest) -> bool:
    return any(
        getattr(getattr(request.node, f"rep_{when}", None), "failed", False)
        for when in ("setup", "call")
    )


@pytest.fixture(scope="session")
def demo_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo MLP, exported once per session (the export checks it against PyTorch)."""
    path = tmp_path_factory.mktemp("demo_model") / f"{DEMO_MODEL_NAME}.onnx"
    export_simple_mlp(path)
    return path


@pytest.fixture(scope="session")
def demo_info(demo_onnx: Path) -> OnnxModelInfo:
    return inspect_onnx(demo_onnx)


@pytest.fixture(scope="session")
def server_install() -> ServerInstall:
    """The bundled tritonserver laid out with the stub and tritonlab's backends."""
    return prepare_bundled_server()


@pytest.fixture(scope="session")
def perf_install() -> PerfAnalyzerInstall:
    return locate_perf_analyzer()


@pytest.fixture(scope="session")
def demo_repository(
    tmp_path_factory: pytest.TempPathFactory, demo_info: OnnxModelInfo
) -> DemoRepository:
    path = tmp_path_factory.mktemp("demo_repo") / "models"
    baseline, batching = build_repository(path, demo_info, DEMO_MODEL_NAME, [BASELINE, BATCHING])
    return DemoRepository(path, baseline, batching)


@pytest.fixture
def start_server(
    request: pytest.FixtureRequest, server_install: ServerInstall, tmp_path: Path
) -> Iterator[StartServer]:
    """Start real servers on free loopback ports; always stop them; print logs on failure.

    Call as ``start_server(repository, explicit_model_control=False, ready_timeout_s=120.0)``.
    """
    started: list[TritonServer] = []

    def start(
        repository: Path, explicit_model_control: bool = False, ready_timeout_s: float = 120.0
    ) -> TritonServer:
        server = TritonServer(
            server_install,
            repository,
            tmp_path / f"tritonserver{len(started) + 1}.log",
            explicit_model_control=explicit_model_control,
        )
        started.append(server)
        return server.start(ready_timeout_s)

    yield start

    failed = _failed(request)
    for server in started:
        server.stop()
        if failed:
            print(
                f"\n----- {server.log_path} (last {LOG_TAIL_CHARS} characters) -----\n"
                + server.log_text()[-LOG_TAIL_CHARS:]
            )


@pytest.fixture
def demo_server(start_server: StartServer, demo_repository: DemoRepository) -> TritonServer:
    """A server with the demo baseline and its batching variant loaded."""
    return start_server(demo_repository.path)


@pytest.fixture
def logs_on_failure(request: pytest.FixtureRequest) -> Iterator[list[Path]]:
    """Append log files (e.g. a run folder's server log) to print them if the test fails."""
    paths: list[Path] = []
    yield paths
    if _failed(request):
        for path in paths:
            if path.exists():
                text = path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
                print(f"\n----- {path} (last {LOG_TAIL_CHARS} characters) -----\n{text}")
