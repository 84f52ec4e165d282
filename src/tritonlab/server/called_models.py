"""The models a pipeline calls, over one measured window: each one's statistics and its share of
their summed server time, and the one that binds (the largest share).

An ensemble's steps and a BLS model's callees keep Triton statistics of their own. The measured
model's own figures include the time it waits for them, so the shares are taken over the called
models alone: a step's server time is its requests times its server time per request (queue,
compute and Triton's overhead).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tritonlab.server.stats import ServerStatsDelta, StatsSnapshot, stats_delta


def _server_us(delta: ServerStatsDelta) -> float:
    return max(0, delta.request_count) * delta.request_us_per_request


@dataclass(frozen=True)
class CalledModelStats:
    """One called model over the window: its names, statistics and share of the called time."""

    name: str
    served_name: str
    delta: ServerStatsDelta
    server_time_share: float  # 0..1 of the summed server time of every called model

    @property
    def server_us(self) -> float:
        """Server time over the window, µs: requests x server time per request."""
        return _server_us(self.delta)


@dataclass(frozen=True)
class CalledWindow:
    """Every called model's statistics over one window, in call order."""

    models: tuple[CalledModelStats, ...]

    @property
    def consistent(self) -> bool:
        """Whether every counter moved forward (a service behind a load balancer may answer two
        statistics calls from different replicas, and then the differences mean nothing)."""
        return all(
            min(m.delta.request_count, m.delta.inference_count, m.delta.execution_count) >= 0
            for m in self.models
        )

    @property
    def binding(self) -> CalledModelStats | None:
        """The called model with the largest share of server time (None: none, or inconsistent)."""
        if not self.consistent or not any(m.server_us > 0 for m in self.models):
            return None
        return max(self.models, key=lambda m: m.server_time_share)


def server_time_shares(deltas: Mapping[str, ServerStatsDelta]) -> dict[str, float]:
    """Each called model's share (0..1) of the summed server time of all of them over one
    window (every share 0.0 where none was seen): the one definition of a step's share."""
    times = {name: _server_us(delta) for name, delta in deltas.items()}
    total = sum(times.values())
    return {name: time / total if total > 0 else 0.0 for name, time in times.items()}


def called_window(
    called: Sequence[tuple[str, str]],
    before: Mapping[str, StatsSnapshot],
    after: Mapping[str, StatsSnapshot],
) -> CalledWindow:
    """The window of the ``called`` (name, served name) models, from snapshots by served name."""
    deltas = {name: stats_delta(before[served], after[served]) for name, served in called}
    shares = server_time_shares(deltas)
    return CalledWindow(
        tuple(CalledModelStats(name, served, deltas[name], shares[name]) for name, served in called)
    )
