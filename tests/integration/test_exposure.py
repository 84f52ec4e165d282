"""Exposure: loopback by default; beyond it, tritonlab's authenticating proxy with the user's key.

Also: paths with spaces and quotes go through every generated script and the run untouched,
since no user string is passed through a shell.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from integration_support import FAST_RUN_FLAGS, cli_env, kill_tree, tritonlab_command
from tritonclient.utils import InferenceServerException

from tritonlab.server.endpoint import RESTRICTED_HEADER

pytestmark = pytest.mark.integration
READY_RE = re.compile(r"Triton ready: HTTP (\S+),")
GRPC_RE = re.compile(r"gRPC (\S+), metrics")
KEY = "s3cret-key"


def _serve(
    model: Path, cwd: Path, env: dict[str, str], *more: str
) -> tuple[subprocess.Popen[str], Path]:
    out = cwd / "serve.stdout"
    with open(out, "w") as stdout:
        proc = subprocess.Popen(
            [
                *tritonlab_command(),
                "serve",
                str(model),
                "--host",
                "0.0.0.0",
                "--http-port",
                "0",
                "--grpc-port",
                "0",
                "--metrics-port",
                "0",
                *more,
            ],
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    return proc, out


@pytest.mark.timeout(240)
def test_exposed_serve_needs_the_key_for_everything_but_health_on_both_protocols(
    demo_onnx: Path, tmp_path: Path
) -> None:
    """Issue 20, 3: the key is on no command line; a missing or wrong key is refused for
    inference, metadata, statistics and model control, over HTTP and gRPC."""
    env = cli_env()
    env.pop("TRITONLAB_API_KEY", None)
    refused = subprocess.run(
        [*tritonlab_command(), "serve", str(demo_onnx), "--host", "0.0.0.0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "TRITONLAB_API_KEY" in refused.stderr

    proc, out = _serve(demo_onnx, tmp_path, env | {"TRITONLAB_API_KEY": KEY})
    try:
        deadline = time.monotonic() + 120
        while not READY_RE.search(out.read_text()):
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        text = out.read_text()
        match = GRPC_RE.search(text)
        assert match, text
        http_url, grpc_url = READY_RE.search(text).group(1), match.group(1)  # type: ignore[union-attr]
        assert f"needs the header (gRPC: metadata) '{RESTRICTED_HEADER}" in text
        assert KEY not in text, "the key is never printed"
        # on no process's command line (tritonserver's included), nor in the server log
        for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
            assert KEY not in " ".join(p.cmdline()), p.name()
        assert not any(KEY in f.read_text(errors="replace") for f in tmp_path.rglob("*.log"))
        assert http_url.startswith("0.0.0.0:")
        http_url = http_url.replace("0.0.0.0", "127.0.0.1")
        grpc_url = grpc_url.replace("0.0.0.0", "127.0.0.1")
        _check_http(http_url)
        _check_grpc(grpc_url)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                kill_tree(proc)


def _check_http(url: str) -> None:
    client = httpclient.InferenceServerClient(url)
    assert client.is_server_ready() and client.is_server_live()  # health stays open
    inputs = [httpclient.InferInput("input", [1, 256], "FP32")]
    inputs[0].set_data_from_numpy(np.zeros((1, 256), dtype=np.float32))
    for headers in (None, {RESTRICTED_HEADER: "wrong"}):
        for call in (
            lambda h=headers: client.get_model_metadata("simple_mlp", headers=h),
            lambda h=headers: client.get_model_config("simple_mlp", headers=h),
            lambda h=headers: client.infer("simple_mlp", inputs, headers=h),
            lambda h=headers: client.get_inference_statistics("simple_mlp", headers=h),
            lambda h=headers: client.unload_model("simple_mlp", headers=h),
        ):
            with pytest.raises(InferenceServerException):
                call()
    good = {RESTRICTED_HEADER: KEY}
    assert client.get_model_metadata("simple_mlp", headers=good)["name"] == "simple_mlp"
    answer = client.infer("simple_mlp", inputs, headers=good)
    assert answer.as_numpy("output").shape == (1, 10)
    assert client.is_model_ready("simple_mlp", headers=good), "the refused unload did nothing"
    client.close()


def _check_grpc(url: str) -> None:
    client = grpcclient.InferenceServerClient(url)
    assert client.is_server_ready() and client.is_server_live()  # health stays open
    inputs = [grpcclient.InferInput("input", [1, 256], "FP32")]
    inputs[0].set_data_from_numpy(np.zeros((1, 256), dtype=np.float32))
    for headers in (None, {RESTRICTED_HEADER: "wrong"}):
        with pytest.raises(InferenceServerException, match=r"UNAUTHENTICATED|needs the metadata"):
            client.get_model_metadata("simple_mlp", headers=headers)
        with pytest.raises(InferenceServerException):
            client.infer("simple_mlp", inputs, headers=headers)
        with pytest.raises(InferenceServerException):
            client.unload_model("simple_mlp", headers=headers)
    good = {RESTRICTED_HEADER: KEY}
    assert client.get_model_metadata("simple_mlp", headers=good).name == "simple_mlp"
    answer = client.infer("simple_mlp", inputs, headers=good)
    assert answer.as_numpy("output").shape == (1, 10)
    client.close()


@contextlib.contextmanager
def _served(model: Path, cwd: Path, *more: str) -> Iterator[tuple[int, str, str]]:
    """``serve --host 0.0.0.0`` with the key; yields (its pid, HTTP URL, gRPC URL) once ready,
    and always stops it."""
    proc, out = _serve(model, cwd, cli_env() | {"TRITONLAB_API_KEY": KEY}, *more)
    try:
        deadline = time.monotonic() + 120
        while not READY_RE.search(out.read_text()):
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        text = out.read_text()
        http_url = READY_RE.search(text).group(1)  # type: ignore[union-attr]
        grpc_url = GRPC_RE.search(text).group(1)  # type: ignore[union-attr]
        yield (
            proc.pid,
            http_url.replace("0.0.0.0", "127.0.0.1"),
            grpc_url.replace("0.0.0.0", "127.0.0.1"),
        )
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                kill_tree(proc)


def _raw_http(url: str, raw: bytes) -> bytes:
    host, _, port = url.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw)
        data = b""
        while b"\r\n\r\n" not in data or not data.endswith(b"}"):
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
    return data


@pytest.mark.timeout(300)
def test_exposed_serve_refuses_admin_endpoints_with_a_valid_key_unless_opened(
    demo_onnx: Path, tmp_path: Path
) -> None:
    """Issue 32: model control, shared memory, trace and logging are 403 (gRPC:
    PERMISSION_DENIED) for a key holder too, until ``--open-admin-api``; a chunked request is
    re-framed before it reaches tritonserver, a ``Content-Length: -1`` refused."""
    good = {RESTRICTED_HEADER: KEY}
    with _served(demo_onnx, tmp_path) as (_, http_url, grpc_url):
        client = httpclient.InferenceServerClient(http_url)
        for call in (
            lambda: client.get_model_repository_index(headers=good),
            lambda: client.unload_model("simple_mlp", headers=good),
            lambda: client.get_system_shared_memory_status(headers=good),
            lambda: client.get_trace_settings(headers=good),
            lambda: client.get_trace_settings("simple_mlp", headers=good),
            lambda: client.get_log_settings(headers=good),
        ):
            with pytest.raises(InferenceServerException, match="open-admin-api"):
                call()
        assert client.is_model_ready("simple_mlp", headers=good), "the refused unload did nothing"
        client.close()
        grpc_client = grpcclient.InferenceServerClient(grpc_url)
        for grpc_call in (
            lambda: grpc_client.get_model_repository_index(headers=good),
            lambda: grpc_client.unload_model("simple_mlp", headers=good),
            lambda: grpc_client.get_system_shared_memory_status(headers=good),
            lambda: grpc_client.get_log_settings(headers=good),
        ):
            with pytest.raises(InferenceServerException, match=r"PERMISSION_DENIED|open-admin"):
                grpc_call()
        assert grpc_client.is_model_ready("simple_mlp", headers=good)
        grpc_client.close()
        body = json.dumps(
            {
                "inputs": [
                    {"name": "input", "shape": [1, 256], "datatype": "FP32", "data": [0.0] * 256}
                ]
            }
        ).encode()
        head = (
            f"POST /v2/models/simple_mlp/infer HTTP/1.1\r\nHost: x\r\n{RESTRICTED_HEADER}: "
            f"{KEY}\r\nContent-Type: application/json\r\n"
        ).encode()
        half = len(body) // 2
        chunked = b"".join(
            f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (body[:half], body[half:])
        )
        answer = _raw_http(
            http_url, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\n\r\n"
        )
        assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
        assert b'"name":"output"' in answer
        refused = _raw_http(http_url, head + b"Content-Length: -1\r\n\r\n" + body)
        assert refused.startswith(b"HTTP/1.1 400"), refused[:300]
    with _served(demo_onnx, tmp_path, "--open-admin-api") as (_, http_url, grpc_url):
        client = httpclient.InferenceServerClient(http_url)
        index = client.get_model_repository_index(headers=good)
        assert [m["name"] for m in index] == ["simple_mlp"]
        with pytest.raises(InferenceServerException):
            client.get_model_repository_index()
        client.close()
        grpc_client = grpcclient.InferenceServerClient(grpc_url)
        assert grpc_client.get_log_settings(headers=good, as_json=True)
        grpc_client.close()


@pytest.mark.timeout(240)
def test_no_child_of_an_exposed_serve_holds_the_key(demo_onnx: Path, tmp_path: Path) -> None:
    """Issue 32: neither tritonserver nor a Python backend stub (which runs the model's own
    model.py) has the key in its environment or on its command line."""
    with _served(demo_onnx, tmp_path) as (pid, http_url, _):
        client = httpclient.InferenceServerClient(http_url)
        inputs = [httpclient.InferInput("input", [1, 256], "FP32")]
        inputs[0].set_data_from_numpy(np.zeros((1, 256), dtype=np.float32))
        client.infer("simple_mlp", inputs, headers={RESTRICTED_HEADER: KEY})
        client.close()
        children = psutil.Process(pid).children(recursive=True)
        names = [" ".join(c.cmdline()) for c in children]
        assert any("tritonserver" in n for n in names), names
        assert any("triton_python_backend_stub" in n for n in names), names
        for child in children:
            environ = Path(f"/proc/{child.pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{child.pid}/cmdline").read_bytes()
            assert KEY.encode() not in environ, child.name()
            assert b"TRITONLAB_API_KEY=" not in environ, child.name()
            assert KEY.encode() not in cmdline, child.name()


@pytest.mark.timeout(300)
def test_paths_with_spaces_and_quotes(demo_onnx: Path, tmp_path: Path) -> None:
    odd = tmp_path / 'it\'s a "dir" with $HOME'
    odd.mkdir()
    model = odd / "my model.onnx"
    model.write_bytes(demo_onnx.read_bytes())
    out_dir = odd / "out dir"
    result = subprocess.run(
        [
            *tritonlab_command(),
            "run",
            str(model),
            "--out",
            str(out_dir),
            "--name",
            "mlp",
            "--configs",
            "seed",
            *FAST_RUN_FLAGS,
        ],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=260,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for script in ("scripts/start_server.sh", "scripts/run_perf.sh"):
        check = subprocess.run(["bash", "-n", str(out_dir / script)], capture_output=True)
        assert check.returncode == 0, check.stderr
    export = subprocess.run(
        [
            "python3",
            "-c",
            "import ast,sys; ast.parse(open(sys.argv[1]).read())",
            str(out_dir / "scripts" / "export_model.py"),
        ],
        capture_output=True,
        text=True,
    )
    assert export.returncode == 0, export.stderr
    manifest = json.loads((out_dir / "results" / "manifest.json").read_text())
    assert manifest["model"]["onnx_file"] == "my model.onnx"
    # Triton's Python backend cannot start stubs from such a folder; tritonlab served it
    # through a plain-named link, and every stored command names the real folder.
    assert manifest["server"]["command"][1] == "--model-repository=models"
