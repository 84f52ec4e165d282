#!/usr/bin/env python3
"""Rebuild models/ from tiny_cnn.onnx: read its graph, write every variant."""
from pathlib import Path

from tritonlab.models.inspect import inspect_onnx
from tritonlab.repository.layout import build_repository
from tritonlab.repository.variants import seed_comparison_variants

here = Path(__file__).resolve().parent.parent
info = inspect_onnx(Path('/tmp/tiny_cnn.onnx'))
for m in build_repository(here / 'models', info, 'tiny_cnn', seed_comparison_variants()):
    print('wrote', m.config_path)
