"""Faults during a run: a server that dies, a perf_analyzer that hangs. Restart, retry, record.

A tritonserver that dies mid-cell (killed, out of memory, a backend crash) is restarted on the
same ports, the configuration is loaded again and the interrupted cell measured again. A cell
that fails ``ATTEMPTS_PER_CELL`` times is given up on: recorded as failed, with the server log's
last lines, and the run goes on with the next cell. At most ``MAX_RESTARTS`` restarts per run;
past that the run stops with a one-line error (finished cells are kept, a re-run resumes).

Every fault is written to ``results/faults.json`` at once and listed in the manifest
(``faults``), and the experiment log's "Faults and recoveries" section shows them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tritonlab.errors import PerfAnalyzerError, ServerError

# FaultRecord lives beside the manifest, which holds the faults too.
from tritonlab.experiments.manifest import FaultRecord, utc_now
from tritonlab.result_files import read_result, write_result
from tritonlab.run_layout import RunLayout
from tritonlab.server.endpoint import ServerEndpoint
from tritonlab.server.process import TritonServer, relevant_log_lines

MAX_RESTARTS = 3
ATTEMPTS_PER_CELL = 2
# Seconds a failed call waits for the server's exit to show: a SIGKILLed server refuses
# connections a moment before the kernel reports it gone (seen on a loaded CI runner).
EXIT_GRACE_S = 3.0
HUNG_MARKER = "ran past"  # perf_analyzer's deadline message (perf/runner.py)
# What perf_analyzer relays from Triton's Python backend when a model's stub process died.
STUB_DIED_MARKER = "is not healthy"


def stub_died(exc: BaseException) -> bool:
    """True when ``exc`` says a backend stub died (``Stub process 'M_0_0' is not healthy``):
    Triton 2.51 never finishes unloading its model, so the reload does not wait for it."""
    return isinstance(exc, PerfAnalyzerError) and STUB_DIED_MARKER in str(exc)


def load_faults(run_dir: Path) -> list[FaultRecord]:
    """The faults recorded in ``results/faults.json`` of ``run_dir`` ([] when none;
    ``ResultFileError`` for a corrupt file or one from a newer tritonlab)."""
    return [FaultRecord.from_dict(f) for f in read_result(RunLayout(run_dir).faults, [])]


class Recovery:
    """Decides, per failed attempt, whether to restart and retry, give up on the cell, or stop."""

    def __init__(
        self,
        server: ServerEndpoint,
        run_dir: Path,
        ready_timeout_s: float,
        on_fault: Callable[[list[FaultRecord]], None] | None = None,
        max_restarts: int = MAX_RESTARTS,
    ) -> None:
        self.server = server
        self.run_dir = run_dir
        self.ready_timeout_s = ready_timeout_s
        self.on_fault = on_fault
        self.max_restarts = max_restarts
        self.restarts = 0
        self.faults = load_faults(run_dir)
        self.failed_cells: list[str] = []
        self._log_mark = 0

    def mark(self) -> None:
        """An attempt starts here: a fault recorded next quotes only the server log's lines
        written since (not an earlier cell's, nor a resumed run's, nor its start-up's)."""
        self._log_mark = self.server.log_size()

    def server_died(self, grace_s: float = 0.0) -> bool:
        """True when the local server this run started has exited, or does within ``grace_s``
        (never for a remote one)."""
        return isinstance(self.server, TritonServer) and self.server.exited_within(grace_s)

    def recoverable(self, exc: BaseException, last_attempt: bool = False) -> bool:
        """Worth another attempt (or, on the last, worth recording and going on)?

        A dead server we started: restart it. A perf_analyzer that hung: retry. Any other
        perf_analyzer failure (a backend stub that died, a model that went unavailable) is
        retried once after the configuration is loaded again; failing again while the server
        lives, it is taken as systematic (a wrong input, say) and stops the run.
        """
        if not isinstance(exc, (ServerError, PerfAnalyzerError)):
            return False
        if self.server_died(EXIT_GRACE_S):  # a failed call may be the first sign of a death
            return True
        if isinstance(exc, PerfAnalyzerError):
            return HUNG_MARKER in str(exc) or not last_attempt
        return False

    def handle(self, cell: str, exc: BaseException, last_attempt: bool) -> bool:
        """Record the fault and bring the server back (True when it was restarted); raise when
        restarts are used up."""
        died = self.server_died()
        lines = tuple(relevant_log_lines(self.server.log_text(self._log_mark), limit=5))
        action = (
            "gave up: cell stored as failed"
            if last_attempt
            else ("restarted the server, re-measuring" if died else "retrying")
        )
        what = " ".join(str(exc).split())[:300]
        self.faults.append(FaultRecord(cell, what, action, lines, utc_now()))
        if last_attempt:
            self.failed_cells.append(cell)
        write_result(RunLayout(self.run_dir).faults, [f.to_dict() for f in self.faults])
        if self.on_fault is not None:
            self.on_fault(self.faults)
        if died and isinstance(self.server, TritonServer):  # server_died: only ours dies
            if self.restarts >= self.max_restarts:
                raise ServerError(
                    f"tritonserver died {self.restarts + 1} times in this run (last in {cell}); "
                    "stopped; finished cells are kept, see results/faults.json; run the same "
                    "command to resume"
                ) from exc
            self.restarts += 1
            self.server.restart(self.ready_timeout_s)
        self.mark()  # the next failure (a reload's, say) quotes its own lines
        return died
