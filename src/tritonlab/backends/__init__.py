"""Python-based Triton backends shipped with tritonlab (copied into the server's backend folder)."""

from pathlib import Path

BACKENDS_DIR = Path(__file__).parent
