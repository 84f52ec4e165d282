"""Where ``TRITONLAB_API_KEY`` may go (issue 32): into no child's environment, never to a Ray
node (pickled with the server options), never into a repr."""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tritonlab.errors import ConfigError
from tritonlab.server.launch import ServerOptions

KEY = "never-leaves-0xC0FFEE"


def test_child_environment_has_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from tritonlab.procenv import child_environment

    monkeypatch.setenv("TRITONLAB_API_KEY", KEY)
    env = child_environment()
    assert "TRITONLAB_API_KEY" not in env and env["PATH"]
    assert child_environment({"TRITONLAB_API_KEY": KEY, "A": "1"}) == {"A": "1"}


def test_the_processes_tritonlab_starts_get_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``env=`` tritonlab passes (perf_analyzer, nvidia-smi, git) lacks the key."""
    from tritonlab.experiments import manifest
    from tritonlab.perf.locate import locate_perf_analyzer
    from tritonlab.server import gpu

    monkeypatch.setenv("TRITONLAB_API_KEY", KEY)
    seen: list[dict[str, str] | None] = []
    real_run = subprocess.run

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("env"))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    gpu.gpu_names()
    manifest._tool_commit()
    locate_perf_analyzer.cache_clear()
    try:
        locate_perf_analyzer()
    except Exception:  # no perf_analyzer here: its probe still ran, or nothing did
        pass
    finally:
        locate_perf_analyzer.cache_clear()
    assert len(seen) >= 2
    assert all(env is not None and "TRITONLAB_API_KEY" not in env for env in seen)


def test_server_options_do_not_show_the_key() -> None:
    assert KEY not in repr(ServerOptions(api_key=KEY))


class _Stop(Exception):
    pass


class _FakeRay:
    """Just enough of Ray for ``open_ray_session`` to reach the nodes' ``prepare``."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def remote(self, cls: Any) -> Any:
        ray = self

        class Method:
            def __init__(self, name: str) -> None:
                self.name = name

            def remote(self, *args: Any) -> Any:
                ray.sent.append(pickle.dumps(args))  # what Ray would pickle to the node
                return self.name

        class Actor:
            describe, prepare, close = Method("describe"), Method("prepare"), Method("close")

        return SimpleNamespace(options=lambda **_: SimpleNamespace(remote=lambda: Actor()))

    def get(self, refs: list[str]) -> list[Any]:
        if "prepare" in refs:
            raise _Stop
        return [{} for _ in refs]

    def kill(self, actor: Any, no_restart: bool = True) -> None:
        pass


def _request(tmp_path: Path, options: ServerOptions) -> Any:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"onnx")
    return SimpleNamespace(
        options=options,
        info=SimpleNamespace(path=model),
        plan=None,
        inputs=None,
        fingerprint="f",
        perf_install=SimpleNamespace(version="2.51.0"),
    )


def test_the_key_is_never_sent_to_a_ray_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tritonlab.distributed import ray_session

    fake = _FakeRay()
    monkeypatch.setattr(ray_session, "connect", lambda address: fake)
    monkeypatch.setattr(
        ray_session, "measuring_nodes", lambda ray, address: [{"NodeID": "ab" * 28}]
    )
    monkeypatch.setattr(ray_session, "check_nodes", lambda driver, facts: None)
    monkeypatch.setattr(ray_session.NodeFacts, "reported", staticmethod(lambda r, n: r))
    monkeypatch.setattr(ray_session.NodeFacts, "current", staticmethod(lambda *a: None))
    with (
        pytest.raises(_Stop),
        ray_session.open_ray_session("auto", _request(tmp_path, ServerOptions(api_key=KEY))),
    ):
        pass
    assert fake.sent, "prepare was reached"
    assert not any(KEY.encode() in sent for sent in fake.sent)


def test_ray_with_an_exposed_host_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tritonlab.distributed import ray_session

    monkeypatch.setattr(ray_session, "connect", lambda address: _FakeRay())
    monkeypatch.setattr(ray_session, "measuring_nodes", lambda ray, address: [])
    options = ServerOptions(host="0.0.0.0", api_key=KEY)
    with (
        pytest.raises(ConfigError, match="--host"),
        ray_session.open_ray_session("auto", _request(tmp_path, options)),
    ):
        pass
