"""What produced a result: tool, server and library versions, machine, OS, commit, date.

``Manifest`` is the typed face of ``results/manifest.json``: written once by the runner, read
once by the report. ``to_dict`` writes the same keys as before plus ``schema_version``;
``from_dict`` reads older manifests (without ``schema_version``, counted as version 1).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import tritonlab
from tritonlab.experiments.model_record import ModelRecord
from tritonlab.experiments.plan import ExperimentPlan
from tritonlab.models.inputs import ModelInputs
from tritonlab.procenv import child_environment
from tritonlab.records import Record
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


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (else the platform's, else ``unknown``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _tool_commit() -> str | None:
    """The checkout's commit, "-dirty" when tritonlab's own sources differ from it.

    Only the package's sources count: a run that writes into a tracked folder of the same
    checkout (the committed examples) does not make the code that measured it dirty.
    """
    source = Path(tritonlab.__file__).resolve().parent
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            env=child_environment(),
        )
        if out.returncode == 0:
            dirty = subprocess.run(
                [
                    "git",
                    "-C",
                    str(source),
                    "status",
                    "--porcelain",
                    "--untracked-files=no",
                    "--",
                    ".",
                ],
                capture_output=True,
                text=True,
                timeout=5,
                env=child_environment(),
            ).stdout.strip()
            return out.stdout.strip() + ("-dirty" if dirty else "")
    return None


def package_versions() -> dict[str, str]:
    """Installed version of each package the results depend on; missing packages are left out."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), what the cost model counts."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def machine_info() -> dict[str, Any]:
    """This machine as JSON: CPU model and counts, memory (GiB), GPUs, OS and Python."""
    return {
        "cpu_model": cpu_model(),
        "cpu_count_logical": os.cpu_count(),
        "cpu_affinity_count": available_cores(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "gpus": gpu_names(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


SCHEMA_VERSION = 2


@dataclass(frozen=True)
class ToolInfo:
    """The tritonlab that measured: name, version and git commit (None outside a checkout)."""

    name: str
    version: str
    commit: str | None

    @classmethod
    def current(cls) -> ToolInfo:
        """This tritonlab: its version and, from a git checkout, its commit."""
        return cls("tritonlab", tritonlab.__version__, _tool_commit())


@dataclass(frozen=True)
class MachineInfo:
    """The machine measured on: CPU model and counts, memory in GiB, GPUs, OS and Python."""

    cpu_model: str
    cpu_count_logical: int | None
    cpu_affinity_count: int | None
    memory_gib: float | None
    gpus: tuple[str, ...]
    os: str
    python: str

    @property
    def cores(self) -> int:
        """The cores this process may run on (at least 1)."""
        return int(self.cpu_affinity_count or self.cpu_count_logical or 1)

    @classmethod
    def current(cls) -> MachineInfo:
        """The machine this runs on."""
        return cls.from_dict(machine_info())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachineInfo:
        """The machine stored by :meth:`to_dict`; missing fields read as unknown."""
        return cls(
            cpu_model=str(data.get("cpu_model", "unknown CPU")),
            cpu_count_logical=data.get("cpu_count_logical"),
            cpu_affinity_count=data.get("cpu_affinity_count"),
            memory_gib=data.get("memory_gib"),
            gpus=tuple(data.get("gpus") or ()),
            os=str(data.get("os", "")),
            python=str(data.get("python", "")),
        )

    def to_dict(self) -> dict[str, Any]:
        """The machine as JSON (memory in GiB)."""
        return asdict(self) | {"gpus": list(self.gpus)}


@dataclass(frozen=True)
class FaultRecord:
    """One fault: which cell, what happened, the server log's lines, and what was done."""

    cell: str
    what: str
    action: str  # "restarted, re-measuring" | "retrying" | "gave up: cell stored as failed"
    log_lines: tuple[str, ...]
    utc: str

    def to_dict(self) -> dict[str, Any]:
        """The fault as JSON (log lines as a list)."""
        data = asdict(self)
        data["log_lines"] = list(self.log_lines)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultRecord:
        """The fault stored by :meth:`to_dict`; missing fields read as empty."""
        return cls(
            cell=str(data.get("cell", "")),
            what=str(data.get("what", "")),
            action=str(data.get("action", "")),
            log_lines=tuple(data.get("log_lines") or ()),
            utc=str(data.get("utc", "")),
        )


@dataclass(frozen=True)
class NodeIdentity:
    """A cluster node as it describes itself: its Ray id, address, host, machine and the
    versions that decide what it measures (``distributed/nodes.NodeFacts`` builds on it)."""

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

    server_version: str = ""
    lost_utc: str | None = None
    lost_why: str = ""
    serving_path: bool = False  # it measured the serving-path probes
    profiled: bool = False  # it took the operator profile and in-process timings

    def to_dict(self) -> dict[str, Any]:
        """The node as JSON; when and why it was lost only if it was, the flags only if set."""
        data = {"label": self.label} | super().to_dict()
        if not self.lost_utc:
            del data["lost_utc"], data["lost_why"]
        for flag in ("serving_path", "profiled"):
            if not data[flag]:
                del data[flag]
        return data


@dataclass(frozen=True)
class ServerRecord:
    """The tritonserver measured: where it came from, its version, its exact command."""

    source: str
    version: str
    command: tuple[str, ...] | None  # None: a remote server tritonlab did not start
    http_url: str
    grpc_url: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerRecord:
        """The server stored by :meth:`to_dict`; missing fields read as empty."""
        command = data.get("command")
        return cls(
            source=str(data.get("source", "")),
            version=str(data.get("version", "")),
            command=tuple(command) if command else None,
            http_url=str(data.get("http_url", "")),
            grpc_url=str(data.get("grpc_url", "")),
        )

    def to_dict(self) -> dict[str, Any]:
        """The server as JSON: where it came from, version, command line and URLs."""
        return asdict(self) | {"command": None if self.command is None else list(self.command)}


@dataclass(frozen=True)
class PerfAnalyzerRecord:
    """The perf_analyzer used: its binary (without this machine's path prefixes) and version."""

    binary: str
    version: str


@dataclass(frozen=True)
class SweepEntry:
    """What a sweep recorded: its plan file and what the report recommends for."""

    plan_file: str
    model: str
    latency_budget_p99_us: float | None = None
    target_load_infer_per_s: float | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepEntry:
        """The sweep entry stored by :meth:`to_dict`; missing fields read as empty or None."""
        budget, target = data.get("latency_budget_p99_us"), data.get("target_load_infer_per_s")
        return cls(
            plan_file=str(data.get("plan_file", "")),
            model=str(data.get("model", "")),
            latency_budget_p99_us=None if budget is None else float(budget),
            target_load_infer_per_s=None if target is None else float(target),
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON (latency budget in µs, target load in inferences/s)."""
        return asdict(self)


@dataclass(frozen=True)
class AdaptiveEntry:
    """Adaptive repeats: at most ``max_repeats`` rounds, extra rounds within ``budget_s``."""

    max_repeats: int
    budget_s: float | None = None


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


@dataclass(frozen=True)
class Manifest:
    """``results/manifest.json``: everything that produced a run's results."""

    tool: ToolInfo
    packages: dict[str, str]
    machine: MachineInfo
    created_utc: str
    plan: ExperimentPlan
    plan_fingerprint: str
    model: ModelRecord
    server: ServerRecord
    perf_analyzer: PerfAnalyzerRecord
    sweep: SweepEntry | None = None
    adaptive: AdaptiveEntry | None = None
    # What a tune searched for (goal, budgets, start); None for projects and sweeps.
    tune: dict[str, Any] | None = None
    # What every request carried (shapes and value rules); None in runs before it was recorded.
    inputs: ModelInputs | None = None
    # Faults met during the run and what was done (results/faults.json holds the same).
    faults: tuple[FaultRecord, ...] = ()
    # The cluster nodes that measured; () for a local run.
    nodes: tuple[NodeEntry, ...] = ()
    schema_version: int = SCHEMA_VERSION

    @property
    def variant_order(self) -> list[str]:
        """Configuration names in the plan's order."""
        return [v.name for v in self.plan.variants]

    @property
    def descriptions(self) -> dict[str, str]:
        """Variant name -> its description, in plan order."""
        return {v.name: v.description for v in self.plan.variants}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        """The manifest ``data`` holds; a damaged one (a key missing, a wrong type) is one
        ``ResultFileError`` line naming what is wrong, not a traceback."""
        from tritonlab.errors import ResultFileError

        version = data.get("schema_version", 1) if isinstance(data, dict) else 1
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise ResultFileError(
                f"results/manifest.json has schema {version!r}, this tritonlab reads up to "
                f"{SCHEMA_VERSION}; upgrade tritonlab, or pass --fresh to measure the folder again"
            )
        try:
            return cls._parse(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            what = f"no {exc.args[0]!r} entry" if isinstance(exc, KeyError) else str(exc)
            raise ResultFileError(
                f"results/manifest.json is damaged ({what}); restore it from a copy, or pass "
                "--fresh to measure the folder again"
            ) from None

    @classmethod
    def _parse(cls, data: dict[str, Any]) -> Manifest:
        tool = data.get("tool") or {}
        sweep, adaptive = data.get("sweep"), data.get("adaptive")
        return cls(
            tool=ToolInfo(
                str(tool.get("name", "tritonlab")), str(tool.get("version", "")), tool.get("commit")
            ),
            packages=dict(data.get("packages") or {}),
            machine=MachineInfo.from_dict(data.get("machine") or {}),
            created_utc=str(data.get("created_utc", "")),
            plan=ExperimentPlan.from_dict(data["plan"]),
            plan_fingerprint=str(data.get("plan_fingerprint", "")),
            model=ModelRecord.from_dict(data["model"]),
            server=ServerRecord.from_dict(data.get("server") or {}),
            perf_analyzer=PerfAnalyzerRecord(
                str((data.get("perf_analyzer") or {}).get("binary", "")),
                str((data.get("perf_analyzer") or {}).get("version", "")),
            ),
            sweep=SweepEntry.from_dict(sweep) if isinstance(sweep, dict) else None,
            adaptive=AdaptiveEntry(int(adaptive["max_repeats"]), adaptive.get("budget_s"))
            if isinstance(adaptive, dict)
            else None,
            inputs=ModelInputs.from_dict(data["inputs"])
            if isinstance(data.get("inputs"), dict)
            else None,
            faults=tuple(FaultRecord.from_dict(f) for f in data.get("faults") or ()),
            nodes=tuple(NodeEntry.from_dict(n) for n in data.get("nodes") or ()),
            tune=dict(data["tune"]) if isinstance(data.get("tune"), dict) else None,
            schema_version=int(data.get("schema_version", 1)),
        )

    def to_dict(self) -> dict[str, Any]:
        """The manifest as ``results/manifest.json`` stores it; optional parts only when set."""
        data: dict[str, Any] = {
            "schema_version": self.schema_version,
            "tool": {
                "name": self.tool.name,
                "version": self.tool.version,
                "commit": self.tool.commit,
            },
            "packages": dict(self.packages),
            "machine": self.machine.to_dict(),
            "created_utc": self.created_utc,
            "plan": self.plan.to_dict(),
            "plan_fingerprint": self.plan_fingerprint,
            "model": self.model.to_dict(),
            "server": self.server.to_dict(),
            "perf_analyzer": {
                "binary": self.perf_analyzer.binary,
                "version": self.perf_analyzer.version,
            },
        }
        if self.sweep is not None:
            data["sweep"] = self.sweep.to_dict()
        if self.inputs is not None:
            data["inputs"] = self.inputs.to_dict()
        if self.tune is not None:
            data["tune"] = dict(self.tune)
        if self.faults:
            data["faults"] = [f.to_dict() for f in self.faults]
        if self.nodes:
            data["nodes"] = [n.to_dict() for n in self.nodes]
        if self.adaptive is not None:
            data["adaptive"] = {
                "max_repeats": self.adaptive.max_repeats,
                "budget_s": self.adaptive.budget_s,
            }
        return data
