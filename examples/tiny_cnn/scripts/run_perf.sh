#!/usr/bin/env bash
# The fixed perf_analyzer baseline used in docs/experiment_log.md.
# Usage: bash scripts/run_perf.sh [MODEL] (default: the baseline); the server from
# scripts/start_server.sh must be running. Raw output goes to benchmarks/manual/.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-tiny_cnn}"
GRPC_URL="${GRPC_URL:-127.0.0.1:${GRPC_PORT:-8001}}"
HTTP_URL="${HTTP_URL:-127.0.0.1:${HTTP_PORT:-8000}}"
mkdir -p benchmarks/manual
export LD_LIBRARY_PATH=/work/main/.venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
/work/main/.venv/bin/perf_analyzer -m "$MODEL" -u "$GRPC_URL" \
  -i grpc -b 1 --measurement-mode time_windows -s 25 --max-trials 8 --verbose-csv --measurement-interval 2000 --concurrency-range 8 \
  -f "benchmarks/manual/$MODEL.csv" | tee "benchmarks/manual/$MODEL.txt"
