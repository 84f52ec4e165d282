"""Where this machine's tritonserver and perf_analyzer are, for the project's scripts.

The generated ``scripts/start_server.sh`` and ``scripts/run_perf.sh`` hold no path of the
machine that wrote them: at run time they ask the installed tritonlab::

    python3 -m tritonlab.locate server --shell   # or: tritonlab locate server --shell
    python3 -m tritonlab.locate perf --shell

and ``eval`` the shell-quoted assignments printed: ``TRITONSERVER``, ``BACKEND_DIR``,
``CACHE_DIR`` (server; the bundled server is prepared in the cache first if needed) or
``PERF_ANALYZER`` (perf), ``TRITONLAB_CACHE`` and ``TRITONLAB_BIN`` (the ``bin`` folder of the
Python environment tritonlab runs in), and ``export`` lines for the environment the binary needs
(its libraries on ``LD_LIBRARY_PATH``; for the server that environment's ``bin`` first on
``PATH``, where the Python backend stub finds onnxruntime), exactly as tritonlab itself starts it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from tritonlab.errors import TritonlabError
from tritonlab.paths import CACHE_VAR, cache_root, variable_values


def shell_lines(
    variables: Mapping[str, str],
    environment: Mapping[str, str],
    current: Mapping[str, str] | None = None,
) -> str:
    """Assignments for ``eval``: the variables, then the environment's changes as exports."""
    base = os.environ if current is None else current
    lines = [f"{k}={shlex.quote(v)}" for k, v in variables.items()]
    lines += [
        f"export {k}={shlex.quote(v)}"
        for k, v in environment.items()
        if base.get(k) != v and k.isidentifier()
    ]
    lines += [f"unset {k}" for k in base if k not in environment and k.isidentifier()]
    return "\n".join(lines) + "\n"


def describe(variables: Mapping[str, str]) -> str:
    """Readable lines, with the values of the variables that portable paths use."""
    return "".join(f"{k}: {v or '(none)'}\n" for k, v in {**variables, **variable_values()}.items())


def locate(
    what: str,
    shell: bool = False,
    server_bin: Path | None = None,
    backend_dir: Path | None = None,
    perf_analyzer: Path | None = None,
) -> str:
    """The text ``tritonlab locate`` prints: the variables of the server (or perf_analyzer)
    tritonlab would start here, and its process environment; raises TritonlabError when a
    binary is unusable."""
    if what == "server":
        from tritonlab.server.locate import external_server, prepare_bundled_server

        server = (
            external_server(server_bin, backend_dir) if server_bin else prepare_bundled_server()
        )
        variables = {
            "TRITONSERVER": str(server.binary),
            "BACKEND_DIR": str(server.backend_dir),
            "CACHE_DIR": str(server.cache_dir) if server.cache_dir else "",
        }
        env = server.environment()
    elif what == "perf":
        from tritonlab.perf.locate import locate_perf_analyzer

        perf = locate_perf_analyzer(perf_analyzer)
        variables, env = {"PERF_ANALYZER": str(perf.binary)}, perf.environment()
    else:
        raise TritonlabError(f"locate what? 'server' or 'perf', not {what!r}")
    variables |= {CACHE_VAR: str(cache_root()), "TRITONLAB_BIN": str(Path(sys.executable).parent)}
    return shell_lines(variables, env) if shell else describe(variables)


def main(argv: list[str] | None = None) -> int:
    """``python3 -m tritonlab.locate``: print where tritonserver or perf_analyzer is; returns the
    exit status."""
    parser = argparse.ArgumentParser(
        prog="python3 -m tritonlab.locate",
        description="Print where tritonserver / perf_analyzer are on this machine.",
    )
    parser.add_argument("what", choices=("server", "perf"))
    parser.add_argument("--shell", action="store_true", help="shell assignments for eval")
    parser.add_argument("--server-bin", type=Path, help="an external tritonserver")
    parser.add_argument("--backend-dir", type=Path, help="backend folder for --server-bin")
    parser.add_argument("--perf-analyzer", type=Path, help="an explicit perf_analyzer")
    args = parser.parse_args(argv)
    try:
        text = locate(args.what, args.shell, args.server_bin, args.backend_dir, args.perf_analyzer)
    except TritonlabError as exc:
        print(f"tritonlab locate: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
