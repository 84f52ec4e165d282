"""PNG plots of a run, drawn from its stored results only: ``PLOTS`` lists them in page order
(those against the load in ``load_plots``, those of what happens inside the server in
``server_plots``). A plot whose dimension the run lacks (a seed run has no concurrency curve and
no HTTP against gRPC) is not drawn. The same results give the same bytes (``plot_support``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tritonlab import gateway
from tritonlab.report.load_plots import (
    plot_concurrency_curves,
    plot_http_vs_grpc,
    plot_p99_vs_queue_delay,
    plot_throughput_vs_p99,
)
from tritonlab.report.plot_support import PlotData
from tritonlab.report.server_plots import plot_batch_sizes, plot_latency_breakdown, plot_roofline
from tritonlab.run_layout import RunLayout

PLOTS: dict[str, Callable[[PlotData, Path], Path | None]] = {
    "throughput_vs_p99": plot_throughput_vs_p99,
    "concurrency_curves": plot_concurrency_curves,
    "latency_breakdown": plot_latency_breakdown,
    "p99_vs_queue_delay": plot_p99_vs_queue_delay,
    "http_vs_grpc": plot_http_vs_grpc,
    "batch_sizes": plot_batch_sizes,
    "roofline": plot_roofline,
}


def write_plots(run_dir: Path, data: PlotData) -> dict[str, Path]:
    """Write every plot that applies to ``run_dir/plots/<name>.png`` and remove stale ones;
    returns the written files by plot name, in the order of ``PLOTS``."""
    written: dict[str, Path] = {}
    for name, draw in PLOTS.items():
        path = RunLayout(run_dir).plot(name)
        result = draw(data, path)
        if result is None:
            gateway.remove(path)
        else:
            written[name] = result
    return written
