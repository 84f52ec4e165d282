"""The measuring engines: what the runner measures through, and the classic engine.

``MeasuringSession`` is the one interface the runner, the adaptive rounds and the lazy start
measure through. A local run's is an engine wrapped around a ``CellSession`` (which knows no
engine: it loads, measures one cell as it is told, unloads): ``ClassicEngine`` loads each
configuration alone and measures its cells in a row; ``block_engine.BlockEngine`` keeps every
configuration loaded and measures shuffled blocks of short, monitored cells. A cluster's
session (``distributed.ray_session``) implements the same interface itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tritonlab.client.infer import InferCheck
from tritonlab.experiments.serving_path import measure_serving_path
from tritonlab.experiments.session import CellSession, Round
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.server.process import TritonServer


class Recovered(Protocol):
    """The faults side of a session, as the outcome reports it."""

    failed_cells: list[str]


class MeasuringSession(Protocol):
    """What ``run_experiment`` measures through: a local engine or a cluster's session."""

    @property
    def measured(self) -> list[str]:
        """The cells this session measured, in order."""

    @property
    def checks(self) -> list[InferCheck]:
        """The answer checks behind the run (the server's start's)."""

    @property
    def recovery(self) -> Recovered:
        """The faults met so far and the cells given up on."""

    def over_budget(self) -> bool:
        """True once the run's time budget (if any) has passed."""

    def measure_rounds(self, rounds: Sequence[Round], ids: list[str], note: str = "") -> bool:
        """Measure ``rounds`` and store each cell; False when the time budget ran out first."""

    def measure_serving_path(self, info: OnnxModelInfo) -> None:
        """Measure the null-model cells behind the cost model (where the session can; see each)."""

    def profile_operators(self) -> None:
        """Profile the model's operators where the session does it (a local run profiles later)."""


class ClassicEngine:
    """Each configuration loaded alone, its cells measured in a row with the plan's own
    settings, then unloaded; the block engine changes how a round and a cell are measured."""

    def __init__(self, session: CellSession) -> None:
        self.session = session

    @property
    def measured(self) -> list[str]:
        """The cells the session measured, in order."""
        return self.session.measured

    @property
    def checks(self) -> list[InferCheck]:
        """The answer checks of the session's start."""
        return self.session.checks

    @property
    def recovery(self) -> Recovered:
        """The session's faults and the cells given up on."""
        return self.session.recovery

    @property
    def cell_seconds(self) -> list[float]:
        """Wall seconds of every cell the session measured (the adaptive budget's estimate)."""
        return self.session.cell_seconds

    def over_budget(self) -> bool:
        """True once the run's time budget (if any) has passed."""
        return self.session.over_budget()

    def measure_rounds(self, rounds: Sequence[Round], ids: list[str], note: str = "") -> bool:
        """Measure ``rounds`` in order, each configuration's cells in one load; False when the
        time budget ran out first."""
        for round_ in rounds:
            for model, cells in round_:
                if not self.session.measure_model(model, cells, ids, note):
                    return False
        return True

    def measure_serving_path(self, info: OnnxModelInfo) -> None:
        """The null-model cells behind the cost model (only on a server this run started);
        after a restart meanwhile, what the session holds loaded is loaded again."""
        session = self.session
        if isinstance(session.server, TritonServer):
            restarts = session.recovery.restarts
            measure_serving_path(session, session.server, info)
            if session.recovery.restarts > restarts:
                session.reload_after_restart()  # the extra blocks that may follow need them

    def profile_operators(self) -> None:
        """Nothing here: a local run profiles after its server stopped (``run_project``)."""
