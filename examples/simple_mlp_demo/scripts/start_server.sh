#!/usr/bin/env bash
# Start Triton on this project's model repository (every variant loaded), bound to
# 127.0.0.1. Ready when `curl -sf localhost:$HTTP_PORT/v2/health/ready` succeeds.
# Stop with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
HTTP_PORT="${HTTP_PORT:-8000}" GRPC_PORT="${GRPC_PORT:-8001}" METRICS_PORT="${METRICS_PORT:-8002}"
# tritonlab, installed in the Python environment the script runs in, says where the
# binaries are on this machine (see `python3 -m tritonlab.locate --help`).
PYTHON="${TRITONLAB_PYTHON:-python3}"
if command -v "$PYTHON" >/dev/null 2>&1 && "$PYTHON" -c "import tritonlab" >/dev/null 2>&1; then
  LOCATE=("$PYTHON" -m tritonlab.locate)
elif command -v tritonlab >/dev/null 2>&1; then
  LOCATE=(tritonlab locate)
else
  echo "start_server.sh: tritonlab not found: activate the Python environment where tritonlab is installed (or set TRITONLAB_PYTHON)" >&2
  exit 1
fi
LOCATED="$("${LOCATE[@]}" server --shell)"
eval "$LOCATED"
exec "$TRITONSERVER" \
  --model-repository="$PWD/models" \
  --backend-directory="$BACKEND_DIR" \
  ${CACHE_DIR:+"--cache-directory=$CACHE_DIR"} \
  --http-address=127.0.0.1 --http-port="$HTTP_PORT" \
  --grpc-address=127.0.0.1 --grpc-port="$GRPC_PORT" \
  --metrics-address=127.0.0.1 --metrics-port="$METRICS_PORT"
