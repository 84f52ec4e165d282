"""Which verdicts a run's stopping rule left open, named (issue 36 audit: "the limit of 6
rounds was reached with 1 verdict(s) still open" named none of them).

The stopping rule stores only its count (``results/stopping.json``); the verdicts are read again
from the run folder's cells by the same function the rule called (``decisions/adaptive.py``:
a run's ``undecided_project``, a sweep's ``undecided_sweep``), and named only where that reading
finds as many as the rule counted.
"""

from __future__ import annotations

import re

from tritonlab.decisions.adaptive import undecided_project, undecided_sweep
from tritonlab.report.run_data import RunData

_COUNT = re.compile(r"with (\d+) verdict\(s\) still open")


def still_open(run: RunData, cores: int) -> list[str]:
    """The open verdicts the stop reason counts, each as the rule words it; [] where the reason
    counts none, or where reading the cells again does not find the count it stored."""
    stopping = run.stopping
    found = _COUNT.search(stopping.reason) if stopping is not None else None
    if stopping is None or found is None:
        return []
    root = run.paths.root
    order = [v.name for v in run.manifest.plan.variants]
    sweep = run.manifest.sweep
    if sweep is not None:
        if not sweep.latency_budget_p99_us:
            return []
        _, reasons = undecided_sweep(
            root,
            order,
            float(sweep.latency_budget_p99_us),
            sweep.target_load_infer_per_s,
            stopping.precision,
        )
    else:
        _, reasons = undecided_project(root, order, cores, stopping.precision)
    return reasons if len(reasons) == int(found.group(1)) else []


def reason_text(reason: str, open_verdicts: list[str]) -> str:
    """The stop reason with the open verdicts named: '... with 1 verdict still open (A/A control
    baseline_aa vs baseline: throughput ...)'."""
    if not open_verdicts:
        return reason
    count = len(open_verdicts)
    named = (
        f"with {count} verdict{'s' if count != 1 else ''} still open ({'; '.join(open_verdicts)})"
    )
    return _COUNT.sub(lambda _: named, reason, count=1)
