"""The load kinds: one entry per way a cell offers load, and everything that differs by kind.

A load point (``plan.LoadPoint``) is closed-loop concurrency, an open-loop rate with Poisson or
evenly spaced arrivals, a share of each configuration's measured peak, or a replayed trace. Each
kind says here which fields it reads, the letter of its load key (``c8``, ``r200``, ``k200``,
``p70``, ``tbursts``), its words, what makes it invalid, whether its rate comes from the peak,
and the ``loads:`` key of a plan file that asks for it. The next kind is one entry in
``LOAD_KINDS`` (and its test): keys, labels, checks, plan files and perf_analyzer's arguments
follow from it (``docs/sweeps.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tritonlab.perf.settings import ARRIVALS, Distribution
from tritonlab.perf.trace import TraceStats


class Load(Protocol):
    """What a kind reads of a load point (``plan.LoadPoint`` has it)."""

    @property
    def concurrency(self) -> int | None: ...
    @property
    def request_rate_per_s(self) -> float | None: ...
    @property
    def peak_fraction(self) -> float | None: ...
    @property
    def trace(self) -> TraceStats | None: ...
    @property
    def request_distribution(self) -> Distribution: ...


@dataclass(frozen=True)
class LoadKind:
    """Closed-loop concurrency: ``concurrency`` requests always in flight (``c8``)."""

    name: str = "concurrency"
    letter: str = "c"
    open_loop: bool = False
    # The rate is a share of the configuration's closed-loop peak, filled in when it is known.
    from_peak: bool = False

    def matches(self, load: Load) -> bool:
        """Whether ``load`` is of this kind (the kinds are tried in ``LOAD_KINDS``' order)."""
        return True

    def level(self, load: Load) -> str:
        """The load key's part after the letter."""
        return str(load.concurrency)

    def words(self, load: Load) -> str:
        """The load in words."""
        return f"concurrency {load.concurrency}"

    def problem(self, load: Load) -> str | None:
        """Why perf_analyzer could not run ``load``, or None."""
        if load.concurrency is None or load.concurrency < 1:
            return f"concurrency must be >= 1, got {load.concurrency}"
        return None


@dataclass(frozen=True)
class RateKind(LoadKind):
    """An open-loop rate with arrivals of one ``distribution`` (perf_analyzer's
    ``--request-distribution``): ``r200`` is 200 req/s Poisson."""

    name: str = "rate"
    letter: str = "r"
    open_loop: bool = True
    distribution: Distribution = "poisson"
    # A plan file's ``loads.<plan_key>``: a list of rates (req/s) at the reference protocol and
    # client batch size (None: asked for some other way), each at most ``max_level``.
    plan_key: str | None = None
    max_level: float = 1_000_000

    def matches(self, load: Load) -> bool:
        return (
            load.request_rate_per_s is not None
            and load.peak_fraction is None
            and load.request_distribution == self.distribution
        )

    def level(self, load: Load) -> str:
        return f"{load.request_rate_per_s:g}"

    def words(self, load: Load) -> str:
        return f"{load.request_rate_per_s:g} req/s {ARRIVALS[self.distribution].word}"

    def problem(self, load: Load) -> str | None:
        rate = load.request_rate_per_s
        if rate is not None and rate <= 0:
            return f"request rate must be > 0, got {rate}"
        return None

    def fields(self, level: float) -> dict[str, Any]:
        """A plan file's rate as the load point's fields."""
        return {
            "concurrency": None,
            "request_rate_per_s": float(level),
            "request_distribution": self.distribution,
        }


@dataclass(frozen=True)
class PeakKind(RateKind):
    """Poisson arrivals at a share of each configuration's own closed-loop peak (``p70``), so
    the configurations line up at the same relative load; the runner fills in the rate."""

    name: str = "peak"
    letter: str = "p"
    from_peak: bool = True

    def matches(self, load: Load) -> bool:
        return load.peak_fraction is not None

    def level(self, load: Load) -> str:
        return f"{100 * (load.peak_fraction or 0):g}"

    def words(self, load: Load) -> str:
        rate = load.request_rate_per_s
        of_peak = f"{100 * (load.peak_fraction or 0):g}% of peak"
        return f"{of_peak}{'' if rate is None else f' = {rate:g} req/s'}, Poisson"

    def problem(self, load: Load) -> str | None:
        fraction = load.peak_fraction
        if fraction is not None and not 0 < fraction <= 2:
            return f"peak fraction must be in (0, 2], got {fraction}"
        return super().problem(load)


@dataclass(frozen=True)
class TraceKind(LoadKind):
    """Replayed traffic (``perf/trace.py``): perf_analyzer keeps the gaps of the trace's
    interval file, copied into the run folder, looping over it (``tbursts``)."""

    name: str = "trace"
    letter: str = "t"
    open_loop: bool = True

    def matches(self, load: Load) -> bool:
        return load.trace is not None

    def level(self, load: Load) -> str:
        return load.trace.name if load.trace else ""

    def words(self, load: Load) -> str:
        t = load.trace
        assert t is not None
        return (
            f"trace {t.name} (mean {t.mean_rate_per_s:,.1f} req/s, "
            f"inter-arrival CV {t.interarrival_cv:.2f})"
        )

    def problem(self, load: Load) -> str | None:
        if load.request_rate_per_s is not None or load.peak_fraction is not None:
            return "a trace load has no request rate or peak fraction of its own"
        return None


# Tried in this order: the first kind whose ``matches`` holds is the load's.
LOAD_KINDS: tuple[LoadKind, ...] = (
    TraceKind(),
    PeakKind(),
    RateKind(plan_key="request_rate"),
    RateKind(name="constant", letter="k", distribution="constant", plan_key="constant_rate"),
    LoadKind(),
)
# The kinds a plan file asks for by a ``loads:`` key of their own.
PLAN_KINDS = tuple(k for k in LOAD_KINDS if isinstance(k, RateKind) and k.plan_key is not None)
PLAN_KEYS = tuple(str(k.plan_key) for k in PLAN_KINDS)


def kind_of(load: Load) -> LoadKind:
    """The kind of ``load``."""
    return next(k for k in LOAD_KINDS if k.matches(load))
