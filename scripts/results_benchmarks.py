"""The benchmarks' blocks of docs/results.md: each benchmark's figures by its own renderer,
from its stored JSON (``scripts/results_pages.py`` puts them after the examples)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from tritonlab.stats.robust import HALF_WIDTH_MEANING

ROOT = Path(__file__).resolve().parent.parent
BENCH_RESULTS = ROOT / "benchmarks" / "results"
Loader = Callable[[Path, str], ModuleType]


def _from_docs(block: str) -> str:
    """A block written for the repository's root, with its links made relative to docs/."""
    return block.replace("](benchmarks/", "](../benchmarks/")


def benchmark_blocks(load: Loader) -> list[str]:
    """The benchmarks' generated figures (their own renderers, from their stored JSON)."""
    resolution = load(ROOT / "benchmarks" / "resolution.py", "resolution")
    compare = load(ROOT / "benchmarks" / "vs_model_analyzer" / "compare.py", "compare")
    res = json.loads((BENCH_RESULTS / "resolution.json").read_text())
    ma = json.loads((BENCH_RESULTS / "vs_model_analyzer.json").read_text())
    return [
        "## Resolution: the block engine against the classic engine",
        "",
        "`make resolution-bench` runs the demo three times with each engine, alternating which "
        "goes first, each from an empty folder, and reads every verdict from the stored results "
        "([`benchmarks/results/resolution.md`](../benchmarks/results/resolution.md)). "
        "Half-width: h of the 95% log-ratio interval, stated as exp(h) - 1.",
        "",
        _from_docs(resolution.readme_block(res)),
        "",
        "## tune against Triton Model Analyzer",
        "",
        "`make ma-bench` runs Model Analyzer 1.44.0 (brute and quick) and `tritonlab tune` on the "
        "demo MLP one after the other, then re-measures every pick with the block engine in "
        "shuffled rounds ([`benchmarks/results/vs_model_analyzer.md`]"
        "(../benchmarks/results/vs_model_analyzer.md)).",
        "",
        _from_docs(compare.readme_block(ma)),
        "",
        "## The pipeline: tune against Model Analyzer's ensemble search",
        "",
        "`make ma-pipeline-bench` runs Model Analyzer 1.44.0's quick search on the built-in "
        "pipeline's ensemble and `tritonlab tune --repository` on the same repository, then "
        "re-measures both picks in shuffled rounds: "
        "[`benchmarks/results/pipeline_vs_model_analyzer.md`]"
        "(../benchmarks/results/pipeline_vs_model_analyzer.md).",
        "",
        *calibration_block(load),
        *demo_precision_block(load),
        "## Other benchmarks",
        "",
        "- Identical configurations told apart: [`benchmarks/results/aa_floor.md`]"
        "(../benchmarks/results/aa_floor.md) (`make aa-bench`; runs from before the CPU split "
        "and the process term, as the page says).",
        "- The onnxruntime adapter's cost per execution: [`benchmarks/results/"
        "adapter_overhead.md`](../benchmarks/results/adapter_overhead.md) (`make adapter-bench`).",
        *(
            [
                "- Where the noise comes from (two configurations loaded against all of them, "
                "cells back to back against shuffled blocks, the CPUs shared against split "
                "between the server and perf_analyzer): [`benchmarks/results/noise_sources.md`]"
                "(../benchmarks/results/noise_sources.md) (`make noise-bench`)."
            ]
            if (BENCH_RESULTS / "noise_sources.json").exists()
            else []
        ),
        "",
    ]


def demo_precision_block(load: Loader) -> list[str]:
    """Fresh demos against issue 34's precision target (its own table, from its stored JSON)."""
    path = BENCH_RESULTS / "demo_precision.json"
    if not path.exists():
        return []
    bench = load(ROOT / "benchmarks" / "demo_precision.py", "demo_precision")
    report = json.loads(path.read_text())
    return [
        "## Fresh demos against the precision target",
        "",
        f"`make demo-precision-bench` runs `tritonlab demo` from an empty folder, quiet, with "
        f"half a core of other work, and with the server and perf_analyzer sharing the CPUs, "
        f"the conditions interleaved; the target: the headline throughput verdicts' median "
        f"half-width at most {bench.TARGET_MEDIAN_PCT:g}% (widest {bench.TARGET_WIDEST_PCT:g}%) "
        f"within {bench.TARGET_MEASURING_S:g} s of measuring ({HALF_WIDTH_MEANING}). "
        f"Measured {report['date_utc']} UTC "
        f"on {report['machine']} ({report['cores']} cores), commit {report['commit']}; every "
        "run, with why a run missed and whether it trusted its verdicts: "
        "[`benchmarks/results/demo_precision.md`](../benchmarks/results/demo_precision.md).",
        "",
        *bench.summary_table(report),
        "",
    ]


def calibration_block(load: Loader) -> list[str]:
    """The calibration benchmark's error rates (its own renderer, from its stored JSON)."""
    path = BENCH_RESULTS / "calibration.json"
    if not path.exists():
        return []
    calibration = load(ROOT / "benchmarks" / "calibration_page.py", "calibration_page")
    return [
        "## Measured error rates",
        "",
        "`make calibration-bench` plants effects of known size among the demo's co-loaded "
        "configurations and counts how often each reading of the same cells is wrong, then "
        "runs the live gate on A/A and planted checks ([`benchmarks/results/calibration.md`]"
        "(../benchmarks/results/calibration.md); the method: [measuring.md]"
        "(measuring.md#measured-error-rates)).",
        "",
        _from_docs(calibration.readme_block(json.loads(path.read_text()))),
        "",
    ]
