"""Synthetic traces, deterministic by seed: Poisson at a rate, on/off bursts, a diurnal ramp.

Each kind is a (possibly time-varying) Poisson process over one cycle of ``duration_s``, drawn
by thinning with numpy's seeded generator, so the same arguments and seed give the same file.
The file holds ``interval_us``: the first interval wraps from the last request of the cycle
back to the first, so the intervals sum to the duration exactly and perf_analyzer's looping
replay keeps the pattern's timing across cycles (``trace.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonlab import gateway
from tritonlab.errors import PlanError
from tritonlab.perf.trace import MAX_CYCLE_S, MAX_REQUESTS, Array

KINDS = ("poisson", "bursts", "diurnal")
SHAPES = ("sine", "ramp")


@dataclass(frozen=True)
class TraceSpec:
    """What to generate. ``rate_per_s``: Poisson's rate, the bursts' rate while on, the diurnal
    peak; ``low_rate_per_s``: the bursts' rate while off, the diurnal trough."""

    kind: str
    duration_s: float
    rate_per_s: float
    low_rate_per_s: float = 0.0
    on_s: float = 1.0
    off_s: float = 1.0
    shape: str = "sine"
    seed: int = 0

    def validate(self) -> None:
        """``PlanError`` naming the setting that cannot make a trace."""
        if self.kind not in KINDS:
            raise PlanError(f"--kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.shape not in SHAPES:
            raise PlanError(f"--shape must be one of {', '.join(SHAPES)}, got {self.shape!r}")
        if not 0 < self.duration_s <= MAX_CYCLE_S:
            raise PlanError(f"--duration-s must be in (0, {MAX_CYCLE_S:g}], got {self.duration_s}")
        if not 0 < self.rate_per_s < math.inf:
            raise PlanError(f"--rate must be > 0, got {self.rate_per_s}")
        if not 0 <= self.low_rate_per_s <= self.rate_per_s:
            raise PlanError(
                f"--low-rate must be between 0 and --rate ({self.rate_per_s:g}), "
                f"got {self.low_rate_per_s}"
            )
        if self.kind == "bursts" and not (self.on_s > 0 and self.off_s >= 0):
            raise PlanError(f"--on-s must be > 0 and --off-s >= 0, got {self.on_s}, {self.off_s}")
        if self.rate_per_s * self.duration_s > MAX_REQUESTS:
            raise PlanError(
                f"--rate x --duration-s is over {MAX_REQUESTS:,} requests; lower one of them"
            )

    def rate_at(self) -> Callable[[Array], Array]:
        """The request rate (req/s) at times ``t`` (s) within the cycle."""
        high, low, duration = self.rate_per_s, self.low_rate_per_s, self.duration_s
        if self.kind == "poisson":
            return lambda t: np.full_like(t, high)
        if self.kind == "bursts":
            period = self.on_s + self.off_s
            return lambda t: np.where(np.mod(t, period) < self.on_s, high, low)
        if self.shape == "sine":  # trough at both ends of the cycle, peak in its middle
            return lambda t: low + (high - low) * (1 - np.cos(2 * np.pi * t / duration)) / 2
        return lambda t: low + (high - low) * (1 - np.abs(2 * t / duration - 1))

    def words(self) -> str:
        """The spec in words, as ``trace generate`` prints it."""
        if self.kind == "poisson":
            what = f"Poisson at {self.rate_per_s:g} req/s"
        elif self.kind == "bursts":
            what = (
                f"bursts of {self.on_s:g} s at {self.rate_per_s:g} req/s, "
                f"{self.off_s:g} s at {self.low_rate_per_s:g} req/s between"
            )
        else:
            what = (
                f"diurnal {self.shape} from {self.low_rate_per_s:g} to {self.rate_per_s:g} req/s "
                "and back"
            )
        return f"{what}, {self.duration_s:g} s cycle, seed {self.seed}"


def generate(spec: TraceSpec) -> Array:
    """The spec's cycle of whole-µs intervals: the wrap from the last request back to the
    first, then the gaps between requests, summing to the duration exactly. The request times
    come from thinning a Poisson process at the top rate. ``PlanError`` for fewer than 2."""
    spec.validate()
    rng = np.random.default_rng(spec.seed)
    count = rng.poisson(spec.rate_per_s * spec.duration_s)
    times = np.sort(rng.uniform(0.0, spec.duration_s, size=count))
    times = times[rng.uniform(0.0, spec.rate_per_s, size=count) < spec.rate_at()(times)]
    if times.size < 2:
        raise PlanError(
            f"{spec.words()} drew {times.size} request(s); raise --rate or --duration-s"
        )
    stamps = np.round(times * 1e6).astype(np.int64)
    wrap = int(stamps[0]) + round(spec.duration_s * 1e6) - int(stamps[-1])
    return np.concatenate([[wrap], np.diff(stamps)]).astype(np.int64)


def write_trace_csv(intervals_us: Array, path: Path) -> Path:
    """Write the intervals as a trace CSV (column ``interval_us``) to ``path``, through the
    gateway of the folder it goes in (a new file, then a rename: never through a link)."""
    out_gate = gateway.open_root(path.parent)
    return out_gate.write_text(path, "interval_us\n" + "".join(f"{int(v)}\n" for v in intervals_us))
