"""onnxruntime sessions tritonlab opens in its own process, quiet on the terminal.

onnxruntime logs through its own C++ logger straight to the process's stderr (a coloured line
for a node that fails, warnings for unused initializers), ahead of and apart from tritonlab's
one-line message. The sessions opened here log nothing below FATAL: what onnxruntime had to say
about a failure is in the exception it raises, which tritonlab's message and the run's log
carry (``shape_probe`` states every size it tried and what failed). The served backends log
to the server's log file, not to the terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# onnxruntime's severities: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal.
QUIET_SEVERITY = 4


def quiet_options(options: Any = None) -> Any:
    """``options`` (a new ``SessionOptions`` when None) with the session's log kept quiet."""
    import onnxruntime as ort

    options = options if options is not None else ort.SessionOptions()
    options.log_severity_level = QUIET_SEVERITY
    return options


def cpu_session(model: Path | str | bytes, options: Any = None) -> Any:
    """An onnxruntime CPU session of ``model`` (a path or the model's bytes), quiet."""
    import onnxruntime as ort

    source = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(source, quiet_options(options), providers=["CPUExecutionProvider"])
