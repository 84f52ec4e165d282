"""This machine's ceilings for one thread: memory bandwidth (a STREAM-like triad) and the GEMM
rate (FLOP/s), the two lines of a roofline.

Both are measured with the libraries the model runs on, on one thread (the backends' instances
run one intra-op thread each, and so do the in-process operator timings they are set against):

- bandwidth: numpy on arrays far larger than the last-level cache. The triad ``a = b + s*c`` is
  two numpy passes (``a = s*c``, then ``a += b``), so it moves 5 arrays' worth of bytes, and
  those are the bytes counted (STREAM's fused triad counts 3). The copy ``a = b`` (2 arrays) is
  measured too; the ceiling is the faster of the two, best of the repeats, as STREAM reports.
- GEMM: float32 MatMuls of two square matrices (256 to 1024) in onnxruntime on one intra-op
  thread, the kernel library (MLAS) that runs the model's own MatMul, Gemm and Conv; 2·n³ FLOP
  per run, the best size's best run (smaller matrices stay in cache and run fastest: 43 GFLOP/s
  at 512 against 34 at 2048 on the 2-core EPYC here).

A measurement takes a few seconds; it is kept per machine and library versions in tritonlab's
cache folder so a second run on the same machine reuses it (the record says when it was taken).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonlab import gateway
from tritonlab.perf.in_process import ort_session
from tritonlab.records import Record

BANDWIDTH_ELEMENTS = 1 << 24  # float64: 128 MiB per array, 16x an 8 MiB L3
GEMM_SIZES = (256, 384, 512, 768, 1024)
REPEATS = 7
MIN_SECONDS_PER_SIZE = 0.3  # a GEMM size is run at least this long (best run kept)


@dataclass(frozen=True)
class MachineCeilings(Record):
    """Per-thread roofline ceilings of this machine (bytes/s, FLOP/s), and how measured."""

    bandwidth_bytes_per_s: float  # max(triad, copy)
    triad_bytes_per_s: float
    copy_bytes_per_s: float
    gemm_flop_per_s: float
    gemm_size: int
    bandwidth_array_bytes: int
    threads: int
    cpu: str
    measured_utc: str
    libraries: dict[str, str]
    last_level_cache_bytes: int = 0  # 0: unknown

    def fits_cache(self, bytes_moved: float) -> bool:
        """Would this many bytes stay in the last-level cache between hot-loop runs?"""
        return bool(self.last_level_cache_bytes) and bytes_moved <= self.last_level_cache_bytes

    @property
    def ridge_flop_per_byte(self) -> float:
        """The intensity where the two ceilings meet: below it, bandwidth binds."""
        return self.gemm_flop_per_s / self.bandwidth_bytes_per_s

    def attainable_flop_per_s(self, intensity: float) -> float:
        """The roofline at ``intensity`` FLOP/byte: FLOP/s one thread can reach at most."""
        return min(self.gemm_flop_per_s, self.bandwidth_bytes_per_s * intensity)

    def binding(self, intensity: float) -> str:
        """The roof that binds at ``intensity`` FLOP/byte: memory bandwidth or compute (GEMM)."""
        return "memory bandwidth" if intensity < self.ridge_flop_per_byte else "compute (GEMM)"


def _libraries() -> dict[str, str]:
    import onnxruntime as ort

    return {"numpy": np.__version__, "onnxruntime": ort.__version__}


def cpu_model(fallback: str = "unknown") -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (else the platform's, else ``fallback``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or fallback


def last_level_cache_bytes() -> int:
    """The largest cache of CPU 0 (Linux sysfs), 0 when it cannot be read."""
    sizes = []
    for size in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = size.read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=0)


def measure_bandwidth(
    elements: int = BANDWIDTH_ELEMENTS, repeats: int = REPEATS
) -> tuple[float, float]:
    """(triad, copy) bytes per second on one thread (numpy's element-wise kernels run on the
    calling thread), best of ``repeats``."""
    a = np.zeros(elements)
    b = np.random.default_rng(0).standard_normal(elements)
    c = np.random.default_rng(1).standard_normal(elements)
    scalar = 3.0
    triad = copy = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.multiply(c, scalar, out=a)
        np.add(a, b, out=a)
        triad = min(triad, time.perf_counter() - start)
        start = time.perf_counter()
        np.copyto(a, b)
        copy = min(copy, time.perf_counter() - start)
    size = a.nbytes
    return 5 * size / triad, 2 * size / copy


def measure_gemm(size: int = 512, repeats: int = REPEATS) -> float:
    """FLOP per second of one float32 ``size``³ MatMul in onnxruntime on one thread."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        "gemm",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [size, size]) for n in ("a", "b")],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [size, size])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort_session(onnx.shape_inference.infer_shapes(model).SerializeToString(), 1)
    rng = np.random.default_rng(2)
    feed = {n: rng.standard_normal((size, size)).astype(np.float32) for n in ("a", "b")}
    session.run(None, feed)  # warm
    best = float("inf")
    runs = 0
    until = time.perf_counter() + MIN_SECONDS_PER_SIZE
    while runs < repeats or time.perf_counter() < until:  # small sizes: many runs, best kept
        start = time.perf_counter()
        session.run(None, feed)
        best = min(best, time.perf_counter() - start)
        runs += 1
    return 2.0 * size**3 / best


def measure_ceilings(
    elements: int = BANDWIDTH_ELEMENTS,
    gemm_sizes: tuple[int, ...] = GEMM_SIZES,
    repeats: int = REPEATS,
) -> MachineCeilings:
    """Measure this machine's one-thread bandwidth (bytes/s, best of triad and copy) and GEMM
    rate (FLOP/s, best of ``gemm_sizes``); takes a few seconds."""
    triad, copy = measure_bandwidth(elements, repeats)
    rates = {size: measure_gemm(size, repeats) for size in gemm_sizes}
    best = max(rates, key=lambda size: rates[size])
    return MachineCeilings(
        bandwidth_bytes_per_s=max(triad, copy),
        triad_bytes_per_s=triad,
        copy_bytes_per_s=copy,
        gemm_flop_per_s=rates[best],
        gemm_size=best,
        bandwidth_array_bytes=elements * 8,
        threads=1,
        cpu=cpu_model(platform.machine()),
        measured_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        libraries=_libraries(),
        last_level_cache_bytes=last_level_cache_bytes(),
    )


def cache_key() -> str:
    """What the cached ceilings must match to be reused: the CPU model and numeric libraries."""
    return f"v3|{cpu_model(platform.machine())}|{json.dumps(_libraries(), sort_keys=True)}"


def store_ceilings(cache_dir: Path, ceilings: MachineCeilings) -> None:
    """Keep ``ceilings`` for later runs on this machine (a read-only cache is no error)."""
    path = cache_dir / "machine_ceilings.json"
    text = json.dumps({"key": cache_key(), "ceilings": ceilings.to_dict()}, indent=1)
    with contextlib.suppress(OSError):  # the next run measures again
        cache_gate = gateway.open_root(cache_dir)
        cache_gate.write_text(path, text)


def machine_ceilings(cache_dir: Path | None) -> MachineCeilings:
    """This machine's ceilings: from ``cache_dir`` when measured there for the same processor
    and libraries, else measured now (and stored there)."""
    path = cache_dir / "machine_ceilings.json" if cache_dir else None
    if path is not None and path.exists():
        # a damaged cache entry is measured again
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            stored = json.loads(path.read_text())
            if stored.get("key") == cache_key():
                return MachineCeilings.from_dict(stored["ceilings"])
    ceilings = measure_ceilings()
    if cache_dir is not None:
        store_ceilings(cache_dir, ceilings)
    return ceilings
