"""What produced a result: the model, tool, server and library versions, machine, OS, commit, date.

``Manifest`` is the typed face of ``results/manifest.json``: written once by the runner, read
by ``store.read_manifest`` (a damaged or newer file is one line naming it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tritonlab
from tritonlab.cpu_split import CpuSplit
from tritonlab.experiments.plan import ExperimentPlan
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import TensorSpec
from tritonlab.perf.machine import cpu_model
from tritonlab.procenv import child_environment
from tritonlab.records import Record, later
from tritonlab.server.gpu import gpu_names

_PACKAGES = (
    "tritonclient",
    "nvidia-pytriton",
    "onnxruntime",
    "openvino",
    "onnx",
    "numpy",
    "torch",
    "ray",
)


def utc_now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tool_commit() -> str | None:
    """The checkout's commit, "-dirty" when the package's own sources differ from it (a run
    that writes into a tracked folder, the committed examples, does not make it dirty)."""
    source = Path(tritonlab.__file__).resolve().parent

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        command = ["git", "-C", str(source), *args]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=5, env=child_environment()
        )

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = git("rev-parse", "--short=12", "HEAD")
        if out.returncode == 0:
            dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".").stdout.strip()
            return out.stdout.strip() + ("-dirty" if dirty else "")
    return None


def package_versions() -> dict[str, str]:
    """Installed version of each package the results depend on; missing packages are left out."""
    versions = {}
    for name in _PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), what the cost model counts."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


SCHEMA_VERSION = 2


@dataclass(frozen=True)
class ToolInfo(Record):
    """The tritonlab that measured: name, version and git commit (None outside a checkout)."""

    name: str = "tritonlab"
    version: str = ""
    commit: str | None = None

    @classmethod
    def current(cls) -> ToolInfo:
        """This tritonlab: its version and, from a git checkout, its commit."""
        return cls("tritonlab", tritonlab.__version__, _tool_commit())


@dataclass(frozen=True)
class MachineInfo(Record):
    """The machine measured on (a field a file lacks reads as unknown)."""

    cpu_model: str = "unknown CPU"
    cpu_count_logical: int | None = None
    cpu_affinity_count: int | None = None
    memory_gib: float | None = None
    gpus: tuple[str, ...] = ()
    os: str = ""
    python: str = ""

    @property
    def cores(self) -> int:
        """The cores this process may run on (at least 1)."""
        return int(self.cpu_affinity_count or self.cpu_count_logical or 1)

    @classmethod
    def current(cls) -> MachineInfo:
        """The machine this runs on."""
        return cls(
            cpu_model=cpu_model(),
            cpu_count_logical=os.cpu_count(),
            cpu_affinity_count=available_cores(),
            memory_gib=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            gpus=tuple(gpu_names()),
            os=platform.platform(),
            python=platform.python_version(),
        )


@dataclass(frozen=True)
class FaultRecord(Record):
    """One fault: which cell, what happened, the server log's lines, and what was done."""

    cell: str = ""
    what: str = ""
    action: str = ""  # "restarted, re-measuring" | "retrying" | "gave up: cell stored as failed"
    log_lines: tuple[str, ...] = ()
    utc: str = ""


@dataclass(frozen=True)
class NodeIdentity:
    """A cluster node as it describes itself (``distributed/nodes.NodeFacts`` builds on it)."""

    node_id: str
    address: str
    hostname: str
    machine: MachineInfo
    tritonlab_version: str
    packages: dict[str, str]
    perf_analyzer_version: str

    @property
    def label(self) -> str:
        """How logs and cells name the node: its address and the start of its Ray id."""
        return f"{self.address}/{self.node_id[:8]}"


@dataclass(frozen=True)
class NodeEntry(NodeIdentity, Record):
    """A cluster node as the manifest lists it (``distributed/nodes.NodeRecord`` writes it):
    its identity, its server, whether (and when) it was lost and what else it measured. The
    stored ``label`` is derived from the identity, so it is written, not read."""

    DERIVED = ("label",)

    server_version: str = ""
    lost_utc: str | None = later(group="lost")
    lost_why: str = later("", group="lost")
    serving_path: bool = later(False)  # it measured the serving-path probes
    profiled: bool = later(False)  # it took the operator profile and in-process timings


@dataclass(frozen=True)
class ModelRecord(Record):
    """The ONNX file that was served."""

    name: str
    onnx_file: str = ""
    sha256: str = ""
    size_bytes: int = 0
    opset: int | None = None
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    # A model of a user's repository (``RepositorySource.to_dict``): what it is, which model
    # the variants change and why, what it calls. None for an ONNX file given on its own.
    repository: dict[str, Any] | None = later()

    @property
    def is_graph(self) -> bool:
        """Whether the measured model is an ONNX graph (not a repository's Python model, BLS
        model or ensemble)."""
        return not self.repository or self.repository.get("kind") == "onnx"

    @property
    def input_shapes(self) -> dict[str, list[int]]:
        """Input name -> its dims as in the graph (-1 where dynamic)."""
        return {t.name: list(t.dims) for t in self.inputs}

    @property
    def output_shapes(self) -> dict[str, list[int]]:
        """Output name -> its dims as in the graph (-1 where dynamic)."""
        return {t.name: list(t.dims) for t in self.outputs}


@dataclass(frozen=True)
class ServerRecord(Record):
    """The tritonserver measured: where it came from, its version, its exact command."""

    source: str = ""
    version: str = ""
    command: tuple[str, ...] | None = None  # None: a remote server tritonlab did not start
    http_url: str = ""
    grpc_url: str = ""


@dataclass(frozen=True)
class PerfAnalyzerRecord(Record):
    """The perf_analyzer used: its binary (without this machine's path prefixes) and version."""

    binary: str = ""
    version: str = ""


@dataclass(frozen=True)
class SweepEntry(Record):
    """What a sweep recorded: its plan file and what the report recommends for."""

    plan_file: str = ""
    model: str = ""
    latency_budget_p99_us: float | None = None
    target_load_infer_per_s: float | None = None


@dataclass(frozen=True)
class AdaptiveEntry(Record):
    """Adaptive repeats: at most ``max_repeats`` rounds, extra rounds within ``budget_s`` and
    while the run's measuring in all stays within ``measuring_budget_s``."""

    max_repeats: int
    budget_s: float | None = None
    measuring_budget_s: float | None = later()


@dataclass(frozen=True)
class RunEntries:
    """The manifest's run-level entries as the command that runs gives them: what a sweep,
    adaptive rounds or a tune asked for (None: not asked by this command)."""

    sweep: SweepEntry | None = None
    adaptive: AdaptiveEntry | None = None
    tune: dict[str, Any] | None = None  # TuneSettings.to_dict()

    def apply(self, manifest: Manifest) -> Manifest:
        """``manifest`` with these entries (a re-run may allow more adaptive rounds than the
        run that measured); a tune's stored entry is kept by a command that gives none."""
        tune = manifest.tune if self.tune is None else self.tune
        return replace(manifest, sweep=self.sweep, adaptive=self.adaptive, tune=tune)


@dataclass(frozen=True, kw_only=True)
class Manifest(Record):
    """``results/manifest.json``: everything that produced a run's results. A manifest without
    ``schema_version`` is of version 1; the optional parts are stored only when set."""

    schema_version: int = SCHEMA_VERSION
    tool: ToolInfo = field(default_factory=ToolInfo)
    packages: dict[str, str] = field(default_factory=dict)
    machine: MachineInfo = field(default_factory=MachineInfo)
    created_utc: str = ""
    plan: ExperimentPlan
    plan_fingerprint: str = ""
    model: ModelRecord
    server: ServerRecord = field(default_factory=ServerRecord)
    perf_analyzer: PerfAnalyzerRecord = field(default_factory=PerfAnalyzerRecord)
    sweep: SweepEntry | None = later()
    adaptive: AdaptiveEntry | None = later()
    # What a tune searched for (goal, budgets, start); None for projects and sweeps.
    tune: dict[str, Any] | None = later()
    # What every request carried (shapes and value rules); None in runs before it was recorded.
    inputs: ModelInputs | None = later()
    # Faults met during the run and what was done (results/faults.json holds the same).
    faults: tuple[FaultRecord, ...] = later(())
    # The cluster nodes that measured; () for a local run.
    nodes: tuple[NodeEntry, ...] = later(())
    # The CPUs the server and perf_analyzer ran on (``cpu_split.py``); None in runs before
    # it was recorded, which shared every CPU.
    cpu_split: CpuSplit | None = later()

    @property
    def variant_order(self) -> list[str]:
        """Configuration names in the plan's order."""
        return [v.name for v in self.plan.variants]
