"""Whether two rows were measured under the same workload, and if not, what differs.

A comparison between two rows (a verdict, an explanation rule, a saturation step) says
something about the configurations only when they did the same work under the same load: the
same model, the same input shapes (a transformer's sequence length), the same client (protocol
and client batch size) and the same offered load. ``workload_differences`` names each part that
differs; a rule whose precondition fails makes no claim, and a verdict says "not comparable"
with those words.
"""

from __future__ import annotations

from typing import Protocol

from tritonlab.experiments.plan import sequence_length_of
from tritonlab.perf.settings import PerfSettings
from tritonlab.repository.variants import served_model_of

OFFERED_LOADS = "different offered loads"


class WorkloadRow(Protocol):
    """What a workload comparison reads of a row (``aggregate.VariantSummary`` has it): the
    served model, the load's key and the settings perf_analyzer ran with."""

    @property
    def model_name(self) -> str: ...
    @property
    def load_key(self) -> str: ...
    @property
    def settings(self) -> PerfSettings: ...


def same_offered_load(a: WorkloadRow, b: WorkloadRow, tolerance: float = 1e-9) -> bool:
    """Closed loop at one concurrency, or open loop at the same request rate with requests
    spaced alike (Poisson or evenly). Rates a share of each configuration's own peak differ
    by configuration: rows offered them are not compared (issue 36 audit: a p99 "+140%"
    between 1,181 and 1,163 req/s; a 2% tolerance let them be)."""
    ra, rb = a.settings.request_rate_per_s, b.settings.request_rate_per_s
    if ra is None and rb is None:
        return a.settings.concurrency == b.settings.concurrency
    if ra is None or rb is None:
        return False
    if a.settings.request_distribution != b.settings.request_distribution:
        return False
    return abs(ra - rb) <= tolerance * max(ra, rb)


def shapes_text(shapes: dict[str, tuple[int, ...]]) -> str:
    """Input shapes in words, ``input_ids [128], attention_mask [128]`` (``none`` when empty)."""
    return ", ".join(f"{k} {list(v)}" for k, v in sorted(shapes.items())) or "none"


def _different(what: str, a: object, b: object) -> str:
    return f"different {what} ({a} and {b})"


def _input_difference(a: WorkloadRow, b: WorkloadRow) -> str | None:
    """The sequence lengths (or, without them, the input shapes) when they differ, else None."""
    la, lb = sequence_length_of(a.load_key), sequence_length_of(b.load_key)
    if la != lb and la is not None and lb is not None:
        return _different("sequence lengths", la, lb)
    sa, sb = dict(a.settings.input_shapes), dict(b.settings.input_shapes)
    if sa != sb:
        return _different("input shapes", shapes_text(sa), shapes_text(sb))
    if la != lb:  # one key names a length, the other none: not known to be the same work
        return _different("sequence lengths", la or "unstated", lb or "unstated")
    return None


def workload_differences(
    a: WorkloadRow, b: WorkloadRow, *, client: bool = True, load: bool = True
) -> list[str]:
    """What differs between the workloads of ``a`` and ``b``, each as ``different X (a and
    b)``: the model, the input shapes (sequence length), with ``client`` the protocol and the
    client batch size, with ``load`` the offered load. Empty when the workload is the same."""
    out = []
    ma, mb = served_model_of(a.model_name), served_model_of(b.model_name)
    if ma != mb:
        out.append(_different("models", ma, mb))
    if (inputs := _input_difference(a, b)) is not None:
        out.append(inputs)
    if client and a.settings.protocol != b.settings.protocol:
        out.append(_different("protocols", a.settings.protocol, b.settings.protocol))
    if client and a.settings.batch_size != b.settings.batch_size:
        out.append(_different("client batch sizes", a.settings.batch_size, b.settings.batch_size))
    if load and not same_offered_load(a, b):
        out.append(OFFERED_LOADS)
    return out


def same_workload(a: WorkloadRow, b: WorkloadRow, *, load: bool = True) -> bool:
    """True when ``a`` and ``b`` share model, input shapes, protocol, client batch size and
    (with ``load``) the offered load: the precondition of every rule that compares two rows."""
    return not workload_differences(a, b, load=load)
