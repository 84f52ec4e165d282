"""The real perf_analyzer against the real server: a short run, and batching seen server-side."""

from __future__ import annotations

from pathlib import Path

import pytest
from integration_support import MAX_TRIALS, STABILITY_PCT, WINDOW_MS, DemoRepository

from tritonlab.perf.locate import PerfAnalyzerInstall
from tritonlab.perf.runner import PerfRun, run_perf
from tritonlab.perf.settings import PerfSettings
from tritonlab.repository.layout import RepositoryModel
from tritonlab.server.process import TritonServer
from tritonlab.server.stats import ServerStatsDelta, StatsSnapshot, stats_delta

pytestmark = pytest.mark.integration


def _settings(server: TritonServer, model_name: str, concurrency: int) -> PerfSettings:
    return PerfSettings(
        model_name=model_name,
        url=server.url("grpc"),
        protocol="grpc",
        batch_size=1,
        concurrency=concurrency,
        measurement_interval_ms=WINDOW_MS,
        stability_percentage=STABILITY_PCT,
        max_trials=MAX_TRIALS,
    )


def _measure(
    server: TritonServer,
    perf_install: PerfAnalyzerInstall,
    model: RepositoryModel,
    concurrency: int,
    out_dir: Path,
) -> tuple[PerfRun, ServerStatsDelta]:
    """One perf_analyzer cell, with the statistics-extension delta around it."""
    before = StatsSnapshot.from_triton(server.model_statistics(model.model_name))
    run = run_perf(
        perf_install,
        _settings(server, model.model_name, concurrency),
        out_dir,
        model.variant.name,
        retries=1,
        timeout_s=120,
    )
    after = StatsSnapshot.from_triton(server.model_statistics(model.model_name))
    return run, stats_delta(before, after)


@pytest.mark.timeout(150)
def test_short_perf_run_measures_positive_throughput(
    demo_server: TritonServer,
    demo_repository: DemoRepository,
    perf_install: PerfAnalyzerInstall,
    tmp_path: Path,
) -> None:
    model = demo_repository.baseline
    run, delta = _measure(demo_server, perf_install, model, 4, tmp_path)

    assert run.command[0] == str(perf_install.binary)
    assert "-m" in run.command
    assert run.command[run.command.index("-m") + 1] == model.model_name
    assert run.command[run.command.index("-u") + 1] == demo_server.grpc_url
    assert run.measurement is not None, f"no numbers; see {run.console_files}"
    assert run.measurement.throughput_infer_per_s > 0
    assert run.measurement.latency_avg_us > 0
    assert run.measurement.concurrency == 4
    assert run.trial_count >= 1
    assert 1 <= run.attempts <= 2
    assert run.console_files
    for name in run.console_files:
        console = (tmp_path / name).read_text()
        assert "Request concurrency: 4" in console
    if run.stable:
        assert run.csv_file is not None
        assert (tmp_path / run.csv_file).stat().st_size > 0
        assert run.measurement.latency_p99_us is not None
        assert run.measurement.latency_p99_us >= run.measurement.latency_p50_us  # type: ignore[operator]
    else:
        assert run.csv_file is None
    # The server really served this load, one request per inference at client batch 1.
    assert delta.request_count > 0
    assert delta.inference_count == delta.request_count
    assert delta.fail_count == 0


@pytest.mark.timeout(240)
def test_dynamic_batching_forms_batches_the_baseline_does_not(
    demo_server: TritonServer,
    demo_repository: DemoRepository,
    perf_install: PerfAnalyzerInstall,
    tmp_path: Path,
) -> None:
    batching_run, batching = _measure(
        demo_server, perf_install, demo_repository.batching, 8, tmp_path
    )
    assert batching_run.measurement is not None
    assert batching.execution_count > 0
    assert batching.mean_batch_size > 1.0, batching
    assert max(batching.batch_size_executions) > 1, batching.batch_size_executions
    # Batches are never larger than the requests in flight, nor than max_batch_size.
    assert max(batching.batch_size_executions) <= 8
    assert sum(size * n for size, n in batching.batch_size_executions.items()) == (
        batching.inference_count
    )
    assert batching.execution_count < batching.inference_count

    baseline_run, baseline = _measure(
        demo_server, perf_install, demo_repository.baseline, 8, tmp_path
    )
    assert baseline_run.measurement is not None
    assert baseline.execution_count > 0
    assert baseline.mean_batch_size == 1.0
    assert set(baseline.batch_size_executions) == {1}
    assert baseline.execution_count == baseline.inference_count
