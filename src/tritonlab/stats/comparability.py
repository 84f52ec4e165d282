"""Whether two runs measured the same thing: what differs between their manifests, by kind.

A regression gate compares figures only where everything but the change under test is the
same. The kinds of difference, each named in the gate's reasons:

- ``model``: the served files (sha256) or the model's name;
- ``inputs``: the tensors sent (names, dtypes, dims) — never comparable, whatever is declared;
- ``machine``: the CPU model, the cores the run could use, the GPUs;
- ``software``: tritonserver, perf_analyzer, tritonlab's version, the Python packages that
  serve or measure, Python itself;
- ``measurement``: how perf_analyzer measured (window, stability, trials, engine, inputs).

A user who is testing one of them (a new model version, a new server release, another machine)
declares it (``--expect-change model``); a declared kind becomes a note, not a reason to stop.
The loads are compared per load point by the caller (a load in one run only is left out and
named).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tritonlab.experiments.manifest import Manifest
from tritonlab.models.inspect import TensorSpec

KINDS = ("model", "machine", "software", "measurement")
NEVER_EXPECTED = ("inputs",)

# The packages whose version can change a served or measured figure.
SERVING_PACKAGES = ("nvidia-pytriton", "tritonclient", "onnxruntime", "openvino", "numpy")


def input_signature(inputs: Sequence[TensorSpec]) -> list[tuple[str, str, tuple[int, ...]]]:
    """The tensors a model takes, as compared: (name, Triton dtype, dims) each."""
    return [(t.name, t.triton_dtype, tuple(t.dims)) for t in inputs]


def _placement(m: Manifest) -> str:
    """Where the server and perf_analyzer ran, as a comparison reads it."""
    split = m.cpu_split
    if split is None or not split.split:
        return "shared"
    return f"server {len(split.server_cpus)}, perf_analyzer {len(split.client_cpus)}"


def manifest_differences(base: Manifest, new: Manifest) -> dict[str, list[str]]:
    """Every difference between the two runs' manifests, by kind (kinds without one absent)."""
    found: dict[str, list[str]] = {}

    def note(kind: str, what: str, get: Callable[[Manifest], object]) -> None:
        a, b = get(base), get(new)
        if a != b:
            found.setdefault(kind, []).append(f"{what}: {a} (baseline) vs {b} (new)")

    note("model", "model name", lambda m: m.model.name)
    note("model", "model sha256", lambda m: m.model.sha256[:12])
    note("inputs", "model inputs", lambda m: input_signature(m.model.inputs))
    note("inputs", "data sent", lambda m: None if m.inputs is None else m.inputs.fingerprint_dict())
    note("machine", "CPU", lambda m: m.machine.cpu_model)
    note("machine", "cores usable", lambda m: m.machine.cores)
    note("machine", "GPUs", lambda m: list(m.machine.gpus) or "none")
    note("machine", "CPUs of the server and perf_analyzer", _placement)
    note("software", "tritonserver", lambda m: m.server.version)
    note("software", "perf_analyzer", lambda m: m.perf_analyzer.version)
    note("software", "tritonlab", lambda m: m.tool.version)
    note("software", "Python", lambda m: m.machine.python)
    for package in SERVING_PACKAGES:
        note("software", package, lambda m: m.packages.get(package, "absent"))  # noqa: B023
    note("measurement", "perf_analyzer settings", lambda m: m.plan.measurement.to_dict())
    return found


def split_differences(
    found: dict[str, list[str]], expected: set[str]
) -> tuple[list[str], list[str]]:
    """(reasons the runs are not comparable, notes on the declared changes)."""
    blocking = [
        d
        for kind, items in found.items()
        if kind not in expected or kind in NEVER_EXPECTED
        for d in items
    ]
    declared = [
        f"{d} (declared with --expect-change {kind})"
        for kind, items in found.items()
        if kind in expected and kind not in NEVER_EXPECTED
        for d in items
    ]
    return blocking, declared
