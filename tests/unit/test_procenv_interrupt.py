"""A Ctrl-C that Python drops (raised where it cannot propagate) prints no traceback and is
raised again by the waiting loops; other dropped exceptions still print."""

from __future__ import annotations

import gc
import sys

import pytest

from tritonlab import procenv


class _RaisesOnDelete:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __del__(self) -> None:  # an exception here is "unraisable", like one in an at-fork hook
        raise self.exc


def _drop(exc: BaseException) -> None:
    _RaisesOnDelete(exc)
    gc.collect()


def test_a_dropped_interrupt_is_silent_and_raised_again(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "unraisablehook", procenv._quiet_dropped_interrupt)
    monkeypatch.setattr(procenv, "_INTERRUPTED", True)
    _drop(KeyboardInterrupt("signal 2"))
    assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(KeyboardInterrupt):
        procenv.raise_if_interrupted()


def test_other_dropped_exceptions_still_print(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "unraisablehook", procenv._quiet_dropped_interrupt)
    monkeypatch.setattr(procenv, "_INTERRUPTED", True)
    _drop(ValueError("a real fault"))
    assert "a real fault" in capsys.readouterr().err
    monkeypatch.setattr(procenv, "_INTERRUPTED", False)
    _drop(KeyboardInterrupt("not from our handler"))
    assert "not from our handler" in capsys.readouterr().err
    procenv.raise_if_interrupted()  # no interrupt arrived: nothing raised
