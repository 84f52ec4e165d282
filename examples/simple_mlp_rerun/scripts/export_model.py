#!/usr/bin/env python3
"""Re-export the demo model (PyTorch, fixed seed) to models/*/1/model.onnx."""
from pathlib import Path

from tritonlab.models.demo import export_simple_mlp

here = Path(__file__).resolve().parent.parent
check = export_simple_mlp(here / 'simple_mlp.onnx')
print(f'exported {check.onnx_path}; max abs diff vs PyTorch {check.max_abs_diff:.3g}')
print('rebuild the repository with: tritonlab run simple_mlp.onnx --out .')
