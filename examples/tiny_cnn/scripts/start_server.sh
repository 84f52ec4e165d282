#!/usr/bin/env bash
# Start Triton on this project's model repository (every variant loaded), bound to
# 127.0.0.1. Ready when `curl -sf localhost:$HTTP_PORT/v2/health/ready` succeeds.
# Stop with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
HTTP_PORT="${HTTP_PORT:-8000}" GRPC_PORT="${GRPC_PORT:-8001}" METRICS_PORT="${METRICS_PORT:-8002}"
TRITONSERVER=/root/.cache/tritonlab/tritonserver-2.51.0-py3.11-0ebba0eded3e/bin/tritonserver
[ -x "$TRITONSERVER" ] || /work/main/.venv/bin/python3 -c "from tritonlab.server.locate import prepare_bundled_server; prepare_bundled_server()"
export LD_LIBRARY_PATH=/work/main/.venv/lib/python3.11/site-packages/nvidia_pytriton.libs"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH=/work/main/.venv/bin:"$PATH"
exec "$TRITONSERVER" \
  --model-repository="$PWD/models" \
  --backend-directory=/root/.cache/tritonlab/tritonserver-2.51.0-py3.11-0ebba0eded3e/backends \
  --cache-directory=/root/.cache/tritonlab/tritonserver-2.51.0-py3.11-0ebba0eded3e/caches \
  --http-address=127.0.0.1 --http-port="$HTTP_PORT" \
  --grpc-address=127.0.0.1 --grpc-port="$GRPC_PORT" \
  --metrics-address=127.0.0.1 --metrics-port="$METRICS_PORT"
