#!/usr/bin/env bash
# The GPU checks in one go, for a host with an NVIDIA GPU (never run by CI): the OpenAI Triton
# kernel benchmark against cuBLAS, then the demo MLP served on KIND_GPU instances through the
# onnxruntime backend's CUDA execution provider. Results go to benchmarks/results/ and
# gpu-check-out/. Usage: bash scripts/gpu_check.sh [VENV]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
bash scripts/setup.sh "$VENV"
# the CUDA build of onnxruntime replaces the CPU one in this environment
"$VENV/bin/python" -m pip install -q onnxruntime-gpu
"$VENV/bin/python" -c "import onnxruntime as o; p=o.get_available_providers(); print(p); assert 'CUDAExecutionProvider' in p"
"$VENV/bin/python" benchmarks/triton_kernel_gpu.py --out benchmarks/results
"$VENV/bin/tritonlab" sweep examples/plans/gpu_check.yaml --out gpu-check-out
