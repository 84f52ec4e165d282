#!/usr/bin/env python3
"""Rebuild models/ from tiny_cnn.onnx: read its graph, write every variant.

Usage: python scripts/export_model.py [ONNX] (default: tiny_cnn.onnx in the project).
"""
import sys
from pathlib import Path

from tritonlab.models.inspect import inspect_onnx
from tritonlab.repository.layout import build_repository
from tritonlab.repository.variants import seed_comparison_variants

here = Path(__file__).resolve().parent.parent
onnx = Path(sys.argv[1]) if len(sys.argv) > 1 else here / 'tiny_cnn.onnx'
if not onnx.is_file():
    sys.exit(f'{onnx} not found: pass the ONNX file, python scripts/export_model.py PATH')
info = inspect_onnx(onnx)
for m in build_repository(here / 'models', info, 'tiny_cnn', seed_comparison_variants()):
    print('wrote', m.config_path)
