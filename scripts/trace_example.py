"""The replayed-traffic example (issue 24): the pick at a fixed concurrency against the pick
under a bursty trace, both re-measured side by side under both loads, and why they differ.

``python scripts/trace_example.py --out examples/simple_mlp_trace`` (``make trace-example``)
runs, with the tritonlab of this environment:

1. ``tritonlab trace generate``: a bursty trace (``bursts.csv``);
2. ``tritonlab tune simple_mlp`` at a fixed concurrency ramp (goal throughput, p99 budget):
   ``tune_concurrency/``;
3. ``tritonlab tune simple_mlp --load-trace bursts.csv`` (the same budget): ``tune_trace/``;
4. ``tritonlab sweep compare_plan.yaml``: the two picks (the first as the baseline, the second
   as one combined change) at the first pick's concurrency and under the trace, interleaved:
   ``compare/``;

then writes ``SUMMARY.md`` from the stored results only (``--render`` rewrites it; a unit test
checks the committed one is what the stored results render to). Re-running resumes each step.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

TRACE = ["--kind", "bursts", "--rate", "3000", "--low-rate", "300", "--on-s", "0.5"]
TRACE += ["--off-s", "1.5", "--duration-s", "2", "--seed", "1"]
BUDGET = ["--p99-budget-ms", "20", "--keep-protocol", "--time-budget", "300"]
COMPARE_REPEATS = 8


def _tritonlab(*args: str) -> None:
    command = [str(Path(sys.executable).parent / "tritonlab"), *args]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL)


def _pick(tune_dir: Path) -> dict[str, Any]:
    data = json.loads((tune_dir / "results" / "tune.json").read_text())
    if data.get("pick") is None:
        raise SystemExit(f"{tune_dir}: the tune has no pick; see its docs/experiment_log.md")
    return dict(data["pick"])


def _knobs(pick: dict[str, Any]) -> dict[str, Any]:
    """A tune pick's configuration as the plan file's knobs."""
    k = pick["configuration"]
    knobs = {
        "instance_count": k["instances"],
        "dynamic_batching": k["batching"],
        "max_batch_size": k["max_batch"],
    }
    if k.get("threads"):
        knobs["intra_op_thread_count"] = k["threads"]
    return knobs


def compare_plan(out: Path) -> dict[str, Any]:
    """The sweep that measures both picks under both loads (the first pick is the baseline)."""
    fixed, traced = _pick(out / "tune_concurrency"), _pick(out / "tune_trace")
    plan: dict[str, Any] = {
        "model": "simple_mlp",
        "baseline": _knobs(fixed),
        "loads": {"concurrency": [fixed["concurrency"]], "trace": ["bursts.csv"]},
        "repeats": COMPARE_REPEATS,
        "measurement": {"engine": "classic", "measurement_interval_ms": 2000},
    }
    if _knobs(traced) != _knobs(fixed):
        changes = {k: v for k, v in _knobs(traced).items() if _knobs(fixed).get(k) != v}
        plan["combined"] = [
            {
                "name": "trace_pick",
                "description": f"the pick under the trace: {traced['description']}",
                "changes": changes,
            }
        ]
    return plan


def run(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    trace = out / "bursts.csv"
    if not trace.exists():
        _tritonlab("trace", "generate", *TRACE, "--out", str(trace))
    _tritonlab("tune", "simple_mlp", "--out", str(out / "tune_concurrency"), *BUDGET)
    _tritonlab(
        "tune", "simple_mlp", "--out", str(out / "tune_trace"), "--load-trace", str(trace), *BUDGET
    )
    plan = out / "compare_plan.yaml"
    header = "# Written by scripts/trace_example.py from the two tunes' picks.\n"
    plan.write_text(header + yaml.safe_dump(compare_plan(out), sort_keys=False))
    _tritonlab("sweep", str(plan), "--out", str(out / "compare"))


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value / 1000:,.2f} ms" if unit == "ms" else f"{value:,.0f} {unit}"


def _why(rows: list[Any], label: str) -> str:
    """What the server's figures say about the two rows' difference at one load: the change
    in queue and in compute time per request, and which is the larger (computed, not assumed)."""
    if len(rows) < 2:
        return ""
    a, b = rows[0], rows[1]
    qa, qb, ca, cb = a.queue_us.median, b.queue_us.median, a.compute_us.median, b.compute_us.median
    if None in (qa, qb, ca, cb):
        return f"Under {label}: the server's queue or compute figures are missing."
    where = "waiting in the queue" if abs(qb - qa) > abs(cb - ca) else "computing"
    return (
        f"Under {label}, from the first row to the second, the server's queue time per request "
        f"went from {qa:,.0f} to {qb:,.0f} µs and its compute time from {ca:,.0f} to "
        f"{cb:,.0f} µs (mean batch {a.mean_batch.median or 0:.1f} -> "
        f"{b.mean_batch.median or 0:.1f}): the larger change is in {where}."
    )


def render(out: Path) -> str:
    """SUMMARY.md from the stored results (no measurement)."""
    from tritonlab.analysis.aggregate import compare_figure, summarise
    from tritonlab.experiments.manifest import Manifest
    from tritonlab.experiments.store import load_cells, load_manifest

    fixed, traced = _pick(out / "tune_concurrency"), _pick(out / "tune_trace")
    compare = out / "compare"
    manifest = Manifest.from_dict(load_manifest(compare))
    trace = next(ld.trace for ld in manifest.plan.loads if ld.trace is not None)
    assert trace is not None
    summaries = summarise(load_cells(compare), manifest.variant_order)
    lines = [
        "# A fixed-concurrency pick against the pick under a bursty trace",
        "",
        "Written by `scripts/trace_example.py` from the stored results below (`make "
        "trace-example` measures them again; `--render` rewrites this page from them).",
        "",
        f"- **The trace** (`bursts.csv`, `tritonlab trace generate {' '.join(TRACE)}`): "
        f"{trace.words()}.",
        f"- **Tuned at a fixed concurrency** ([`tune_concurrency/`](tune_concurrency/docs/"
        f"experiment_log.md), goal throughput, p99 budget): {fixed['description']} at "
        f"concurrency {fixed['concurrency']}, "
        f"{_figure(fixed['throughput_infer_per_s']['median'], 'infer/s')}, p99 "
        f"{_figure(fixed['latency_p99_us']['median'], 'ms')} (medians of {fixed['repeats']}).",
        f"- **Tuned under the trace** ([`tune_trace/`](tune_trace/docs/experiment_log.md), the "
        f"lowest p99 among configurations that carry it, same budget): {traced['description']}, "
        f"{_figure(traced['throughput_infer_per_s']['median'], 'infer/s')}, p99 "
        f"{_figure(traced['latency_p99_us']['median'], 'ms')} (medians of {traced['repeats']}).",
        "",
        "Both picks measured again side by side, interleaved, under both loads "
        f"([`compare/`](compare/docs/experiment_log.md), {COMPARE_REPEATS} repeats each, classic "
        "engine): medians over the repeats; queue and compute per request in the server "
        "(Triton's statistics); the verdict of the second row against the first.",
        "",
    ]
    loads = list(dict.fromkeys(s.load_key for s in summaries))
    for key in loads:
        rows = [s for s in summaries if s.load_key == key]
        label = (
            "the trace"
            if any(ld.trace and ld.key == key for ld in manifest.plan.loads)
            else (f"concurrency {rows[0].settings.concurrency}")
        )
        lines += [
            f"### Under {label} (`{key}`)",
            "",
            "| configuration | infer/s | p99 | queue µs/request | compute µs/request | mean "
            "batch | verdict against the first |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for s in rows:
            verdict = ""
            if s is not rows[0]:
                thr = compare_figure("throughput", "throughput", rows[0], s)
                p99 = compare_figure("p99", "latency_p99", rows[0], s)
                verdict = f"throughput {thr.phrase()}; p99 {p99.phrase()}"
            lines.append(
                f"| {s.variant.description} | {_figure(s.throughput.median, '')} | "
                f"{_figure(s.latency_p99.median, 'ms')} | {_figure(s.queue_us.median, '')} | "
                f"{_figure(s.compute_us.median, '')} | {s.mean_batch.median or 0:.1f} | "
                f"{verdict or 'reference'} |"
            )
        lines += ["", _why(rows, label), ""]
    if len({s.variant.name for s in summaries}) == 1:
        lines.append("Both tunes picked the same configuration: nothing to tell apart.")
    lines += [
        "",
        "A fixed concurrency never has more requests in flight than the concurrency, so no "
        "burst can queue more than that; a replayed trace sends on its own schedule whatever "
        "the server does, so a burst queues as long as the server is slower than it. The "
        "per-configuration explanations (background, action, result, why) are in the compare "
        "run's [experiment log](compare/docs/experiment_log.md); whether perf_analyzer kept to "
        'the trace in every cell is its "Replayed traces" section.',
        "",
    ]
    return "\n".join(line.rstrip() for line in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--render", action="store_true", help="only rewrite SUMMARY.md")
    args = parser.parse_args()
    if not args.render:
        run(args.out)
    (args.out / "SUMMARY.md").write_text(render(args.out))
    print(f"wrote {args.out / 'SUMMARY.md'}")


if __name__ == "__main__":
    main()
