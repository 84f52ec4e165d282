"""Typed, user-facing errors.

Every error a user can cause or fix carries a one-line message that says what to change.
The CLI prints ``str(error)`` and exits non-zero; the traceback appears only with ``--debug``.
"""

from __future__ import annotations


class TritonlabError(Exception):
    """Base class: the message is shown to the user as a single line."""


class ModelError(TritonlabError):
    """The ONNX file is missing, unreadable, or uses something we cannot serve."""


class ConfigError(TritonlabError):
    """A model configuration Triton would reject; the message names the field to change."""


class ServerError(TritonlabError):
    """tritonserver could not be found, started, or made ready."""


class PortInUseError(ServerError):
    """A requested port is already taken by another process."""


class ClientError(TritonlabError):
    """An inference request failed or its result did not match the reference."""


class PerfAnalyzerError(TritonlabError):
    """perf_analyzer is missing, cannot start, or failed in a way we cannot recover."""


class PlanError(TritonlabError):
    """An experiment plan is invalid; the message names the offending key."""


class ResultFileError(TritonlabError):
    """A stored result file is truncated, corrupt or from a newer schema; the message names it."""
