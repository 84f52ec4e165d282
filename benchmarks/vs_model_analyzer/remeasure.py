"""Re-measuring the tools' picks by one tool: what ``compare.py`` (the demo MLP) and
``pipeline_compare.py`` (the built-in pipeline) share.

Every pick is served by one tritonserver (each under its own name) and measured by tritonlab's
block engine: every pick loaded at once and warmed up, then ``rounds`` rounds, each measuring
every pick once at the concurrency its tool chose and once at a common concurrency, in a
shuffled order per round (perf_analyzer cells, the interference monitor on;
``tritonlab.experiments.blocks``). A pick is a ``RepositoryModel`` already written into the
folder ``fresh_run_dir(run_dir)`` returns: a variant of one ONNX model (``add_model``), or a
whole repository's model and the models it calls, copied in under a prefix
(``copy_prefixed``).

The pure helpers (``loads_per_pick``, ``median_range_text``, ``copy_prefixed``) are unit-tested
in ``tests/unit/test_benchmark_remeasure.py``.
"""

from __future__ import annotations

import shutil
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

BENCHMARKS = Path(__file__).resolve().parent.parent
REPO = BENCHMARKS.parent
sys.path.insert(0, str(REPO / "src"))  # tritonlab from this checkout, imported where used
sys.path.insert(0, str(BENCHMARKS))

from bench_common import fresh_folder  # noqa: E402

if TYPE_CHECKING:
    from tritonlab.models.inputs import ModelInputs
    from tritonlab.models.inspect import OnnxModelInfo
    from tritonlab.repository.layout import RepositoryModel

MARKER = ".made-by-remeasure"


@dataclass(frozen=True)
class PickToMeasure:
    """One tool's pick as served for re-measuring: its model in the run's repository, the
    protocol and the concurrency its tool chose."""

    name: str
    model: RepositoryModel
    protocol: str
    concurrency: int


@dataclass(frozen=True)
class RemeasuredRow:
    """One pick at one load over the rounds (every figure per round, in round order), with the
    protocol it was measured over (its tool's: two rows at one concurrency may differ in it)."""

    pick: str
    concurrency: int
    own_load: bool
    throughput_infer_per_s: tuple[float, ...]
    p99_us: tuple[float, ...]
    protocol: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "pick": self.pick,
            "protocol": self.protocol,
            "concurrency": self.concurrency,
            "own_load": self.own_load,
            "rounds": len(self.throughput_infer_per_s),
            "throughput_infer_per_s": list(self.throughput_infer_per_s),
            "p99_us": list(self.p99_us),
        }


def fresh_run_dir(run_dir: Path) -> Path:
    """An empty re-measuring folder (only one this module made is ever removed); the folder
    the picks' models go into."""
    from tritonlab import gateway
    from tritonlab.run_layout import RunLayout

    fresh_folder(run_dir, MARKER, "benchmarks/vs_model_analyzer/remeasure.py")
    gateway.open_root(run_dir)  # tritonlab writes only inside a folder opened for it
    models = RunLayout(run_dir).models
    models.mkdir(parents=True, exist_ok=True)
    return models


def loads_per_pick(picks: Sequence[tuple[str, int]], common: int) -> dict[str, list[int]]:
    """Each pick's concurrencies: the one its tool chose and the common one, ascending."""
    return {name: sorted({own, common}) for name, own in picks}


def median_range_text(values: Sequence[float], scale: float = 1.0, digits: int = 0) -> str:
    """``median (min–max)`` of ``values / scale``; ``n/a`` when there are none."""
    if not values:
        return "n/a"
    med = statistics.median(values) / scale
    lo, hi = min(values) / scale, max(values) / scale
    return f"{med:,.{digits}f} ({lo:,.{digits}f}–{hi:,.{digits}f})"


def copy_prefixed(source: Path, models: Sequence[str], target: Path, prefix: str) -> dict[str, str]:
    """Copy ``models`` of the repository at ``source`` into ``target`` as ``<prefix>_<name>``,
    so several versions of one pipeline share a server: each ``config.pbtxt`` renamed, an
    ensemble's steps pointed at the renamed copies. Returns {name: served name}."""
    from tritonlab.repository.config import config_to_text, read_config

    served = {name: f"{prefix}_{name}" for name in models}
    for name in models:
        folder = target / served[name]
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(source / name, folder)
        config = read_config(folder / "config.pbtxt")
        config.name = served[name]
        for step in config.ensemble_scheduling.step:
            step.model_name = served.get(step.model_name, step.model_name)
        (folder / "config.pbtxt").write_text(config_to_text(config))
    return served


def remeasure(
    run_dir: Path,
    info: OnnxModelInfo,
    inputs: ModelInputs,
    model_name: str,
    picks: Sequence[PickToMeasure],
    common_concurrency: int,
    rounds: int,
    log: Callable[[str], None] = print,
) -> list[RemeasuredRow]:
    """Every pick at its own load and at ``common_concurrency``, ``rounds`` interleaved
    rounds, on one server started on the run's repository (``fresh_run_dir``); the first
    pick's answers are checked before anything is measured. The cells stay in ``run_dir``."""
    from tritonlab.experiments.block_engine import BlockEngine
    from tritonlab.experiments.blocks import ENGINE_BLOCKS, decide_coload, run_seed
    from tritonlab.experiments.manifest import available_cores
    from tritonlab.experiments.opening import SessionRequest, open_session, plan_fingerprint
    from tritonlab.experiments.plan import ExperimentPlan, LoadPoint, MeasurementSettings
    from tritonlab.experiments.session import Progress
    from tritonlab.experiments.store import cell_path, read_cell
    from tritonlab.perf.locate import locate_perf_analyzer
    from tritonlab.run_layout import cell_id
    from tritonlab.server.launch import ServerOptions

    models = [p.model for p in picks]
    loads = loads_per_pick([(p.name, p.concurrency) for p in picks], common_concurrency)
    every_load = sorted(
        {LoadPoint(p.protocol, 1, c) for p in picks for c in loads[p.name]},
        key=lambda ld: ld.key,
    )
    plan = ExperimentPlan(
        model_name,
        tuple(m.variant for m in models),
        (LoadPoint(),),
        rounds,
        MeasurementSettings(engine=ENGINE_BLOCKS),
    )
    fingerprint = plan_fingerprint(plan, info.origin.sha256(), inputs)
    total = rounds * sum(len(v) for v in loads.values())
    request = SessionRequest(
        ServerOptions(), run_dir, info, inputs, plan, fingerprint, locate_perf_analyzer(),
        progress=Progress(total=total),
    )  # fmt: skip
    coload = decide_coload(models, info.file_size_bytes)
    with open_session(request, models[0], models, keep_loaded=coload.co_loaded) as session:
        engine = BlockEngine.start(
            session, models, every_load, coload, run_seed(fingerprint), available_cores()
        )
        for repeat in range(rounds):
            log(f"round {repeat + 1} of {rounds}")
            round_ = [
                (p.model, [(LoadPoint(p.protocol, 1, c), repeat) for c in loads[p.name]])
                for p in picks
            ]
            engine.measure_rounds([round_], [])
    rows = []
    for pick in picks:
        for c in loads[pick.name]:
            key = LoadPoint(pick.protocol, 1, c).key
            paths = [
                cell_path(run_dir, cell_id(pick.model.variant.name, key, repeat + 1))
                for repeat in range(rounds)
            ]
            cells = [read_cell(path) for path in paths if path.exists()]
            measured = [x.perf.measurement for x in cells if x.perf.measurement]
            rows.append(
                RemeasuredRow(
                    pick.name,
                    c,
                    c == pick.concurrency,
                    tuple(m.throughput_infer_per_s for m in measured),
                    tuple(m.latency_p99_us for m in measured),
                    protocol=pick.protocol,
                )
            )
    return rows
