#!/usr/bin/env bash
# Create a separate virtualenv with Triton Model Analyzer 1.44.0 (the release that matches
# tritonserver / perf_analyzer 2.51.0, i.e. the 24.10 containers).
# It is never a tritonlab dependency: it lives in its own environment.
#
# Usage: benchmarks/vs_model_analyzer/setup_ma.sh [VENV_DIR]   (default: <repo>/.venv-ma)
# Idempotent: does nothing when the venv already has triton-model-analyzer==1.44.0.
set -euo pipefail

MA_VERSION="1.44.0"
# Pin the client library to the same 2.51.0 release as the server and perf_analyzer (left alone,
# pip picks the newest tritonclient, which also drags in the empty `perf-analyzer` placeholder
# and numpy 2); tritonclient 2.51 needs numpy<2.
PINS=("triton-model-analyzer==$MA_VERSION" "tritonclient[all]==2.51.0" "numpy<2")
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VENV="${1:-$REPO/.venv-ma}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

installed_version() {
    "$VENV/bin/python" - <<'PY' 2>/dev/null || true
from importlib.metadata import version
print(version("triton-model-analyzer") + " tritonclient " + version("tritonclient"))
PY
}

if [ -x "$VENV/bin/model-analyzer" ] && [ "$(installed_version)" = "$MA_VERSION tritonclient 2.51.0" ]; then
    echo "triton-model-analyzer $MA_VERSION already installed in $VENV"
    exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "creating $VENV with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install "${PINS[@]}"
"$VENV/bin/model-analyzer" --help >/dev/null
echo "installed triton-model-analyzer $(installed_version) in $VENV"
