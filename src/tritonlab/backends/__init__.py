"""Python-based Triton backends shipped with tritonlab (copied into the server's backend folder)."""

from pathlib import Path

BACKENDS_DIR = Path(__file__).parent


def backend_source(name: str) -> Path:
    """The folder holding ``model.py`` for the Python-based backend ``name``."""
    return BACKENDS_DIR / name
