"""Typed perf_analyzer settings and the exact command line they produce.

Every stored measurement carries these settings, so the input shape, protocol, batch size,
load, measurement window and stability threshold are always stated next to the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from tritonlab.records import Record, later

PROTOCOLS = ("grpc", "http")


@dataclass(frozen=True)
class Arrivals:
    """How an open-loop rate's requests are spaced (perf_analyzer's ``--request-distribution``):
    the word the reports use, and the squared coefficient of variation of the gaps between
    arrivals, which scales the queueing wait below capacity (Kingman: 1 for Poisson, 0 for
    evenly spaced requests); ``table_note``, what a table's rate cell adds (Poisson, the
    default, adds nothing)."""

    word: str
    interarrival_cv2: float
    table_note: str = ""


# perf_analyzer's --request-distribution values (a stored file with another is refused).
Distribution = Literal["poisson", "constant"]
ARRIVALS: dict[Distribution, Arrivals] = {
    "poisson": Arrivals("Poisson", 1.0),
    "constant": Arrivals("constant", 0.0, " constant"),
}


@dataclass(frozen=True)
class PerfSettings(Record):
    """What perf_analyzer is asked to do; ``to_args`` turns it into its command line."""

    model_name: str
    url: str
    protocol: str = "grpc"
    batch_size: int = 1
    concurrency: int | None = 8
    # Open-loop load instead of concurrency: requests per second, spaced as
    # ``request_distribution`` says (a key of ARRIVALS).
    request_rate_per_s: float | None = None
    measurement_mode: str = "time_windows"
    measurement_interval_ms: int = 2000
    measurement_request_count: int = 50
    stability_percentage: float = 25.0
    max_trials: int = 8
    # Input name -> full shape without the batch dim, needed for dims that are -1 in the config.
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    async_mode: bool = False
    # perf_analyzer's JSON --input-data file (values every input accepts), None: its random data.
    input_data: str | None = later()
    # Replayed traffic instead: perf_analyzer's --request-intervals file (µs, one per line).
    request_intervals: str | None = later()
    request_distribution: Distribution = later("poisson")
    # A model served by the sequence batcher: perf_analyzer sends sequences of exactly this many
    # requests (``--sequence-length``, no variation); each concurrent request stream is one
    # sequence at a time. None: not a sequence load (perf_analyzer's own default, 20 +/- 20%).
    requests_per_sequence: int | None = later()

    @property
    def arrivals(self) -> Arrivals:
        """How the open-loop rate's requests are spaced."""
        return ARRIVALS[self.request_distribution]

    @property
    def deadline_s(self) -> float:
        """How long one perf_analyzer attempt with these settings may run before it is taken
        as hung and killed: every window it may open, at twice the length (a retry's), twice
        over, plus 30 s (the window is the one it runs with: whole cycles under a trace)."""
        return 30.0 + 2 * self.max_trials * 2 * self.measurement_interval_ms / 1000

    def with_longer_window(self, factor: int = 2) -> PerfSettings:
        """These settings with the window and request count ``factor`` times longer."""
        return replace(
            self,
            measurement_interval_ms=self.measurement_interval_ms * factor,
            measurement_request_count=self.measurement_request_count * factor,
        )

    def load_label(self) -> str:
        """The load in words: ``concurrency N``, ``request rate R/s (Poisson)`` (or evenly
        spaced, ``constant``) or the replayed intervals."""
        if self.request_intervals is not None:
            return f"request intervals replayed from {self.request_intervals}"
        if self.request_rate_per_s is not None:
            return f"request rate {self.request_rate_per_s:g}/s ({self.arrivals.word})"
        return f"concurrency {self.concurrency}"

    def to_args(self, csv_path: str) -> list[str]:
        """perf_analyzer's arguments (without the binary), writing its CSV to ``csv_path``."""
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        args = ["-m", self.model_name, "-u", self.url, "-i", self.protocol]
        args += ["-b", str(self.batch_size), "--measurement-mode", self.measurement_mode]
        args += ["-s", f"{self.stability_percentage:g}", "--max-trials", str(self.max_trials)]
        args += ["-f", csv_path, "--verbose-csv", "-v"]
        if self.measurement_mode == "count_windows":
            args += ["--measurement-request-count", str(self.measurement_request_count)]
        else:
            args += ["--measurement-interval", str(self.measurement_interval_ms)]
        if self.request_intervals is not None:
            # perf_analyzer loops over the file; it takes no rate or concurrency range with it.
            args += ["--request-intervals", self.request_intervals]
        elif self.request_rate_per_s is not None:
            rate = f"{self.request_rate_per_s:g}"
            spacing = self.request_distribution
            args += ["--request-rate-range", rate, "--request-distribution", spacing]
        else:
            args += ["--concurrency-range", str(self.concurrency or 1)]
        if self.async_mode:
            args.append("--async")
        if self.input_data is not None:
            args += ["--input-data", self.input_data]
        if self.requests_per_sequence is not None:
            args += ["--sequence-length", str(self.requests_per_sequence)]
            args += ["--sequence-length-variation", "0"]
        for name, shape in sorted(self.input_shapes.items()):
            args += ["--shape", f"{name}:{','.join(str(d) for d in shape)}"]
        return args
