#!/usr/bin/env python3
"""Rebuild models/ from the Triton repository: the model as its own config.pbtxt
serves it (the repository is only read).

Usage: python scripts/export_model.py [REPOSITORY] (default: ROOT).
"""
import sys
from pathlib import Path

from tritonlab.experiments.repository_plan import repository_baseline
from tritonlab.repository.layout import add_model
from tritonlab.repository.user_repo import read_repository_model

ROOT = 'examples/resnet18_pipeline_repo'
MODEL = 'pipeline_bls'
STEP = None
here = Path(__file__).resolve().parent.parent
root = Path(sys.argv[1]) if len(sys.argv) > 1 else here / ROOT
info = read_repository_model(root, MODEL, STEP)
model = add_model(here / 'models', info, 'pipeline_bls', repository_baseline(info))
print('wrote', model.config_path)
