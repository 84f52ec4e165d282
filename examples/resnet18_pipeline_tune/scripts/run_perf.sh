#!/usr/bin/env bash
# The fixed perf_analyzer baseline used in docs/experiment_log.md.
# Usage: bash scripts/run_perf.sh [MODEL] (default: the baseline); the server from
# scripts/start_server.sh must be running. Raw output goes to benchmarks/manual/.
set -euo pipefail
cd "$(dirname "$0")/.."
DEFAULT_MODEL=pipeline
MODEL="${1:-$DEFAULT_MODEL}"
GRPC_URL="${GRPC_URL:-127.0.0.1:${GRPC_PORT:-8001}}"
HTTP_URL="${HTTP_URL:-127.0.0.1:${HTTP_PORT:-8000}}"
# tritonlab, installed in the Python environment the script runs in, says where the
# binaries are on this machine (see `python3 -m tritonlab.locate --help`).
PYTHON="${TRITONLAB_PYTHON:-python3}"
if command -v "$PYTHON" >/dev/null 2>&1 && "$PYTHON" -c "import tritonlab" >/dev/null 2>&1; then
  LOCATE=("$PYTHON" -m tritonlab.locate)
elif command -v tritonlab >/dev/null 2>&1; then
  LOCATE=(tritonlab locate)
else
  echo "run_perf.sh: tritonlab not found: activate the Python environment where tritonlab is installed (or set TRITONLAB_PYTHON)" >&2
  exit 1
fi
LOCATED="$("${LOCATE[@]}" perf --shell)"
eval "$LOCATED"
mkdir -p benchmarks/manual
"$PERF_ANALYZER" -m "$MODEL" -u "$GRPC_URL" \
  -i grpc -b 1 --measurement-mode time_windows -s 25 --max-trials 8 --verbose-csv --measurement-interval 2000 --concurrency-range 8 --input-data inputs/perf_data.json \
  -f "benchmarks/manual/$MODEL.csv" | tee "benchmarks/manual/$MODEL.txt"
