#!/usr/bin/env bash
# Set up tritonlab on a fresh Debian/Ubuntu x86_64 machine: system library, virtualenv, packages.
# Idempotent: re-running only installs what is missing. Usage: bash scripts/setup.sh [VENV]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv}"
PYTHON="${PYTHON:-python3}"

need_apt=()
# perf_analyzer (from tritonclient 2.51.0) links against libb64.
ldconfig -p 2>/dev/null | grep -q 'libb64.so.0d' || need_apt+=(libb64-0d)
if [ "${TRITONLAB_HTML_TESTS:-0}" = 1 ] && ! command -v chromium >/dev/null; then
  need_apt+=(chromium)
fi
if [ "${TRITONLAB_TEST_TOOLS:-0}" = 1 ]; then
  # The scaling-out tests: nginx load-balances two servers; iproute2 makes network namespaces
  # (the two "hosts" of a local Ray cluster).
  command -v nginx >/dev/null || need_apt+=(nginx-light)
  command -v ip >/dev/null || need_apt+=(iproute2)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing ${need_apt[*]} with apt-get"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

stamp="$VENV/.tritonlab-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch==2.13.0 is only for exporting the demo model (a CPU build where one is on disk);
  # openvino is the second backend (the tests serve with it); triton runs the kernel tier;
  # ray spreads a sweep over a cluster (its tests start a two-node cluster on this machine).
  # pip compiles the installed files one by one (70 of the install's 155 s here); compileall
  # does it on every core (31 s). They must be compiled at install: where
  # PYTHONDONTWRITEBYTECODE is set (as on this machine), every process would compile what it
  # imports again (the test suite took 120 s longer).
  "$VENV/bin/python" -m pip install -q --no-compile -e '.[demo,dev,openvino,kernel,ray]'
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # a few packages ship files of another Python's syntax (pip skips them the same way)
  "$VENV/bin/python" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
  touch "$stamp"
fi
echo "setup: ready ($("$VENV/bin/python" --version), $VENV)"
