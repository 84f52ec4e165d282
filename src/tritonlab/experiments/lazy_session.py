"""A local measuring session that starts only when a cell is left to measure.

Re-running a finished run (to rebuild its reports, or after a resume that measured everything)
used to start the server, load every configuration, check the answers again, warm the block
engine up and stop the server: about 25 s on 2 cores for nothing measured, and a manifest,
an answer check and an engine record rewritten although no figure changed. ``LazySession``
holds off all of it until the first round with a cell in it, the serving-path probes with a
cell missing, or an adaptive round; a run that needs none of them keeps its records as they
are, and only the manifest's run-level entries (``sweep``, ``adaptive``) are brought up to date.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tritonlab.client.infer import InferCheck
from tritonlab.experiments.engine import MeasuringSession
from tritonlab.experiments.opening import SessionRequest
from tritonlab.experiments.serving_path import probes_pending
from tritonlab.experiments.session import CellSession, Round
from tritonlab.experiments.store import load_manifest, save_manifest
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.result_files import load_records
from tritonlab.run_layout import RunLayout


@dataclass
class _NothingRecovered:
    """The faults side of a session that never started: none met, none given up on."""

    failed_cells: list[str] = field(default_factory=list)


def can_wait(request: SessionRequest) -> bool:
    """Whether the run folder holds what a session that never starts leaves in place: the
    manifest and the answer check of an earlier start (a first run starts at once)."""
    layout = RunLayout(request.run_dir)
    return layout.manifest.exists() and layout.infer_check.exists()


class LazySession:
    """``MeasuringSession``'s calls, the session opened and its engine started (``on_open``)
    on the first one with something to measure; until then, what a session that measured
    nothing says."""

    def __init__(
        self,
        request: SessionRequest,
        opener: Callable[[], contextlib.AbstractContextManager[CellSession]],
        on_open: Callable[[CellSession], MeasuringSession],
        stack: contextlib.ExitStack,
    ) -> None:
        self._request = request
        self._opener, self._on_open, self._stack = opener, on_open, stack
        self._session: MeasuringSession | None = None
        self._recovered = _NothingRecovered()
        self._checks: list[InferCheck] | None = None

    def start(self) -> MeasuringSession:
        """The engine, its session opened now if it was not."""
        if self._session is None:
            self._session = self._on_open(self._stack.enter_context(self._opener()))
        return self._session

    # -- what a session that has not started says ------------------------------------------

    @property
    def measured(self) -> list[str]:
        return self._session.measured if self._session is not None else []

    @property
    def checks(self) -> list[InferCheck]:
        """This start's answer checks, or the stored ones of the start that made them."""
        if self._session is not None:
            return self._session.checks
        if self._checks is None:
            self._checks = load_records(RunLayout(self._request.run_dir).infer_check, InferCheck)
        return self._checks

    @property
    def cell_seconds(self) -> list[float]:
        return list(getattr(self._session, "cell_seconds", []))

    @property
    def recovery(self) -> _NothingRecovered:
        return self._session.recovery if self._session is not None else self._recovered  # type: ignore[return-value]

    def over_budget(self) -> bool:
        if self._session is not None:
            return self._session.over_budget()
        deadline = self._request.deadline
        return deadline is not None and time.monotonic() > deadline

    # -- the calls that measure ------------------------------------------------------------

    def measure_rounds(self, rounds: Sequence[Round], ids: list[str], note: str = "") -> bool:
        if not any(cells for round_ in rounds for _model, cells in round_):
            return True
        return self.start().measure_rounds(rounds, ids, note)

    def measure_serving_path(self, info: OnnxModelInfo) -> None:
        request = self._request
        if self._session is None and not probes_pending(request.run_dir, request.plan, info):
            return
        self.start().measure_serving_path(info)

    def profile_operators(self) -> None:
        if self._session is not None:  # a local session profiles after its server stopped
            self._session.profile_operators()

    def close_unopened(self) -> None:
        """Where no session started: the manifest's run-level entries as this run gives them
        (``RunEntries.apply``), the rest kept."""
        if self._session is not None:
            return
        run_dir = self._request.run_dir
        stored = load_manifest(run_dir)
        updated = self._request.entries.apply(stored)
        if updated != stored:
            save_manifest(run_dir, updated)
