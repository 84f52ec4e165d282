"""perf/: command line from PerfSettings, CSV and console parsing, PerfRun round trips."""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path

import pytest

from tritonlab.perf.records import (
    UNSTABLE_MARKER,
    PerfMeasurement,
    WindowTrial,
    measurement_from_trials,
    parse_perf_csv,
    parse_trials,
    parse_warnings,
)
from tritonlab.perf.runner import PerfRun
from tritonlab.perf.settings import PerfSettings


def _value_after(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, f"{flag} appears {args.count(flag)} times in {args}"
    return args[args.index(flag) + 1]


def test_to_args_concurrency_grpc() -> None:
    settings = PerfSettings(model_name="m", url="127.0.0.1:8001", concurrency=8)
    args = settings.to_args("/tmp/out.csv")
    assert _value_after(args, "-m") == "m"
    assert _value_after(args, "-u") == "127.0.0.1:8001"
    assert _value_after(args, "-i") == "grpc"
    assert _value_after(args, "-b") == "1"
    assert _value_after(args, "--concurrency-range") == "8"
    assert _value_after(args, "--measurement-mode") == "time_windows"
    assert _value_after(args, "--measurement-interval") == "2000"
    assert _value_after(args, "-s") == "25"
    assert _value_after(args, "--max-trials") == "8"
    assert _value_after(args, "-f") == "/tmp/out.csv"
    assert "--verbose-csv" in args
    assert "-v" in args
    assert "--request-rate-range" not in args
    assert "--shape" not in args
    assert "--async" not in args
    assert "--measurement-request-count" not in args


def test_to_args_request_rate_poisson_http() -> None:
    settings = PerfSettings(
        model_name="m",
        url="127.0.0.1:8000",
        protocol="http",
        batch_size=4,
        concurrency=None,
        request_rate_per_s=250.5,
        stability_percentage=12.5,
        async_mode=True,
    )
    args = settings.to_args("x.csv")
    assert _value_after(args, "-i") == "http"
    assert _value_after(args, "-b") == "4"
    assert _value_after(args, "--request-rate-range") == "250.5"
    assert _value_after(args, "--request-distribution") == "poisson"
    assert _value_after(args, "-s") == "12.5"
    assert "--concurrency-range" not in args
    assert "--async" in args
    assert settings.load_label() == "request rate 250.5/s (Poisson)"


def test_to_args_count_windows() -> None:
    settings = PerfSettings(
        model_name="m", url="u", measurement_mode="count_windows", measurement_request_count=77
    )
    args = settings.to_args("x.csv")
    assert _value_after(args, "--measurement-mode") == "count_windows"
    assert _value_after(args, "--measurement-request-count") == "77"
    assert "--measurement-interval" not in args


def test_to_args_shapes_sorted_by_name() -> None:
    settings = PerfSettings(
        model_name="m", url="u", input_shapes={"tokens": (16,), "image": (3, 224, 224)}
    )
    args = settings.to_args("x.csv")
    shapes = [args[i + 1] for i, a in enumerate(args) if a == "--shape"]
    assert shapes == ["image:3,224,224", "tokens:16"]


def test_to_args_rejects_unknown_protocol() -> None:
    with pytest.raises(ValueError, match="protocol"):
        PerfSettings(model_name="m", url="u", protocol="ftp").to_args("x.csv")


def test_with_longer_window_doubles_windows() -> None:
    settings = PerfSettings(model_name="m", url="u", measurement_interval_ms=1500)
    longer = settings.with_longer_window()
    assert longer.measurement_interval_ms == 3000
    assert longer.measurement_request_count == 100
    assert longer.model_name == "m"
    assert settings.load_label() == "concurrency 8"


def test_perf_settings_round_trip() -> None:
    settings = PerfSettings(
        model_name="m",
        url="u",
        protocol="http",
        concurrency=None,
        request_rate_per_s=100.0,
        input_shapes={"x": (3, 4)},
    )
    data = settings.to_dict()
    assert data["input_shapes"] == {"x": [3, 4]}
    assert PerfSettings.from_dict(data) == settings


def _read_fixture_row(path: Path) -> dict[str, str]:
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize("name", ["baseline_c8.csv", "batch0_c8.csv"])
def test_parse_perf_csv_fixture(perf_fixtures_dir: Path, name: str) -> None:
    path = perf_fixtures_dir / name
    raw = _read_fixture_row(path)
    (m,) = parse_perf_csv(path.read_text())
    assert m.concurrency == int(raw["Concurrency"])
    assert isinstance(m.concurrency, int)
    assert m.request_rate_per_s is None
    assert m.throughput_infer_per_s == float(raw["Inferences/Second"])
    assert m.latency_avg_us == float(raw["Avg latency"])
    assert m.latency_p50_us == float(raw["p50 latency"])
    assert m.latency_p95_us == float(raw["p95 latency"])
    assert m.latency_p99_us == float(raw["p99 latency"])
    assert m.server_queue_us == float(raw["Server Queue"])
    assert m.server_compute_infer_us == float(raw["Server Compute Infer"])
    assert m.network_server_send_recv_us == float(raw["Network+Server Send/Recv"])


def test_parse_perf_csv_baseline_literal_values(perf_fixtures_dir: Path) -> None:
    # The numbers perf_analyzer printed in baseline_c8.console.txt for the same run.
    (m,) = parse_perf_csv((perf_fixtures_dir / "baseline_c8.csv").read_text())
    assert m.throughput_infer_per_s == pytest.approx(2222.11)
    assert m.latency_avg_us == 3588
    assert m.latency_p99_us == 7365
    assert m.server_queue_us == 2694
    assert m.client_send_us == 4
    assert m.client_recv_us == 1


SYNTHETIC_CSV = """\
Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,\
Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,\
p90 latency,p95 latency,p99 latency,Avg latency,request/response,response wait
16,4000.5,5,600,3000,20,300,100,1,3900,4500,5000,6000,4000,5,3900
4,1500.25,4,400,500,18,250,90,1,2500,3000,3200,3500,2600,5,2500
8,2500,4,500,1500,19,260,95,1,3000,3500,3800,4200,3200,5,3100
1,,4,500,1500,19,260,95,1,3000,3500,3800,4200,3200,5,3100
"""


def test_parse_perf_csv_sorts_rows_and_skips_incomplete() -> None:
    rows = parse_perf_csv(SYNTHETIC_CSV)
    # The concurrency-1 row has no throughput and is skipped.
    assert [m.concurrency for m in rows] == [4, 8, 16]
    assert [m.throughput_infer_per_s for m in rows] == [1500.25, 2500.0, 4000.5]
    assert [m.latency_avg_us for m in rows] == [2600.0, 3200.0, 4000.0]
    assert rows[2].server_queue_us == 3000.0


def test_parse_perf_csv_request_rate() -> None:
    text = (
        "Request Rate,Inferences/Second,p99 latency,Avg latency\n"
        "200,199.5,9000,4000\n"
        "100,99.9,8000,3500\n"
    )
    rows = parse_perf_csv(text)
    assert [m.request_rate_per_s for m in rows] == [100.0, 200.0]
    assert all(m.concurrency is None for m in rows)
    assert rows[0].latency_p99_us == 8000.0
    assert rows[0].server_queue_us is None


def test_parse_perf_csv_empty() -> None:
    assert parse_perf_csv("") == []


def test_parse_trials_stable_console(perf_fixtures_dir: Path) -> None:
    trials = parse_trials((perf_fixtures_dir / "baseline_c8.console.txt").read_text())
    assert trials == [
        WindowTrial(1, 2166.48, 3681.0),
        WindowTrial(2, 2178.17, 3657.0),
        WindowTrial(3, 2322.45, 3434.0),
    ]


# perf_analyzer 2.51's -v output for a cell that never stabilised (lines end with a space).
UNSTABLE_CONSOLE = "\n".join(
    [
        "*** Measurement Settings ***",
        "  Batch size: 1",
        "  Service Kind: TRITON",
        '  Using "time_windows" mode for stabilization',
        "  Stabilizing using average latency and throughput",
        "  Measurement window: 2000 msec",
        "  Using synchronous calls for inference",
        "",
        "Request concurrency: 4",
        "  Pass [1] throughput: 999.00 infer/sec. Avg latency: 4000 usec (std 100 usec). ",
        "Request concurrency: 8",
        "  Pass [1] throughput: 1112.73 infer/sec. Avg latency: 7168 usec (std 1604 usec). ",
        "  Pass [2] throughput: 1501.20 infer/sec. Avg latency: 5320 usec (std 1280 usec). ",
        "  Pass [3] throughput: 980.55 infer/sec. Avg latency: 8150 usec (std 2050 usec). ",
        "  Pass [4] throughput: 1250.00 infer/sec. Avg latency: 6390 usec (std 1500 usec). ",
        "  Pass [5] throughput: 1410.10 infer/sec. Avg latency: 5660 usec (std 1390 usec). ",
        " Failed to obtain stable measurement within 10 measurement windows for concurrency 8. "
        "Please try to increase the --measurement-interval.",
        "",
    ]
)


def test_parse_trials_unstable_console_keeps_last_level() -> None:
    assert UNSTABLE_MARKER in UNSTABLE_CONSOLE
    trials = parse_trials(UNSTABLE_CONSOLE)
    assert [t.index for t in trials] == [1, 2, 3, 4, 5]
    assert trials[0] == WindowTrial(1, 1112.73, 7168.0)
    assert trials[-1] == WindowTrial(5, 1410.10, 5660.0)


def test_parse_trials_nothing() -> None:
    assert parse_trials("error: failed to connect\n") == []


def test_measurement_from_trials_averages_last_three() -> None:
    trials = parse_trials(UNSTABLE_CONSOLE)
    m = measurement_from_trials(trials, concurrency=8, request_rate_per_s=None)
    assert m is not None
    assert m.concurrency == 8
    assert m.throughput_infer_per_s == pytest.approx(statistics.fmean([980.55, 1250.00, 1410.10]))
    assert m.latency_avg_us == pytest.approx((8150 + 6390 + 5660) / 3)
    assert m.latency_p99_us is None
    assert m.server_queue_us is None


def test_measurement_from_trials_fewer_than_three_and_none() -> None:
    m = measurement_from_trials([WindowTrial(1, 100.0, 10.0)], None, 50.0)
    assert m is not None
    assert m.throughput_infer_per_s == 100.0
    assert m.request_rate_per_s == 50.0
    assert measurement_from_trials([], 8, None) is None


def test_perf_measurement_from_dict_ignores_unknown_keys() -> None:
    m = PerfMeasurement(8, None, 1000.0, 8000.0, latency_p99_us=9000.0)
    data = m.to_dict() | {"something_new": 1}
    assert PerfMeasurement.from_dict(data) == m


def test_perf_run_round_trip() -> None:
    settings = PerfSettings(model_name="m", url="u", input_shapes={"x": (2,)})
    run = PerfRun(
        settings=settings,
        command=["perf_analyzer", *settings.to_args("c.csv")],
        measurement=PerfMeasurement(8, None, 1000.0, 8000.0, latency_p95_us=9000.0),
        stable=True,
        trial_count=3,
        attempts=1,
        wall_s=7.5,
        perf_analyzer_cpu_s=1.25,
        console_files=["a.attempt1.txt"],
        csv_file="a.csv",
    )
    assert PerfRun.from_dict(run.to_dict()) == run
    unstable = PerfRun(settings, ["pa"], None, False, 0, 2, 1.0, 0.5)
    back = PerfRun.from_dict(unstable.to_dict())
    assert back == unstable
    assert back.measurement is None
    assert back.csv_file is None


def test_parse_warnings_from_an_overloaded_open_loop_run() -> None:
    console = (
        "Request Rate: 1603 inference requests per seconds\n"
        "  Pass [1] throughput: 1561.81 infer/sec. Avg latency: 4629 usec (std 5408 usec). \n"
        "Warning: Request latency is not stabilizing. Please try lowering the request rate.\n"
        "  Client: \n"
        "    [WARNING] Perf Analyzer was not able to keep up with the desired request rate. "
        "7.92% of the requests were delayed. \n"
        "Warning: Request latency is not stabilizing. Please try lowering the request rate.\n"
    )
    assert parse_warnings(console) == [
        "Request latency is not stabilizing. Please try lowering the request rate.",
        "Perf Analyzer was not able to keep up with the desired request rate. "
        "7.92% of the requests were delayed.",
    ]
    assert parse_warnings("  Pass [1] throughput: 1 infer/sec. Avg latency: 2 usec\n") == []
