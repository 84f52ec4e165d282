"""Exposure: loopback by default; beyond it, Triton's restricted APIs with the user's key.

Also: paths with spaces and quotes go through every generated script and the run untouched,
since no user string is passed through a shell.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from integration_support import FAST_RUN_FLAGS, cli_env, kill_tree, tritonlab_command
from tritonclient.utils import InferenceServerException

from tritonlab.server.endpoint import RESTRICTED_HEADER

pytestmark = pytest.mark.integration
READY_RE = re.compile(r"Triton ready: HTTP (\S+),")
KEY = "s3cret-key"


def _serve(model: Path, cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
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
            ],
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    return proc, out


@pytest.mark.timeout(180)
def test_exposed_serve_needs_a_key_and_restricts_model_control(
    demo_onnx: Path, tmp_path: Path
) -> None:
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
        url = READY_RE.search(text).group(1)  # type: ignore[union-attr]
        assert f"need the header '{RESTRICTED_HEADER}" in text
        assert KEY not in text, "the key is never printed"
        client = httpclient.InferenceServerClient(url)
        assert client.is_server_ready()  # health stays open
        assert client.get_model_metadata("simple_mlp")["name"] == "simple_mlp"
        with pytest.raises(InferenceServerException):
            client.get_inference_statistics("simple_mlp")
        with pytest.raises(InferenceServerException):
            client.unload_model("simple_mlp")
        stats = client.get_inference_statistics("simple_mlp", headers={RESTRICTED_HEADER: KEY})
        assert stats["model_stats"]
        assert client.is_model_ready("simple_mlp"), "the refused unload did nothing"
        client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                kill_tree(proc)


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
