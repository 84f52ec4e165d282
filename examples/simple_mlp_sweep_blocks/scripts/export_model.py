#!/usr/bin/env python3
"""Re-export the built-in model NAME (PyTorch, fixed seed) into this folder."""
import shutil
from pathlib import Path

from tritonlab.models.zoo import export_builtin

NAME = 'simple_mlp'
here = Path(__file__).resolve().parent.parent
check = export_builtin(NAME, here / (NAME + '.onnx'))
print(f'exported {check.onnx_path}; max abs diff vs PyTorch {check.max_abs_diff:.3g}')
for folder in sorted((here / 'models').glob(NAME + '*')):
    if '__serving_path_' not in folder.name:  # probes serve the null model
        (folder / '1').mkdir(parents=True, exist_ok=True)
        shutil.copyfile(check.onnx_path, folder / '1' / 'model.onnx')
        print(f'copied to {folder.name}/1/model.onnx')
