"""The run folder's generated client (``report/templates/infer_client.py``): it compiles, and
a stateful model's one-request sequence takes a random id, never a fixed one that would join a
sequence perf_analyzer (which numbers its sequences from 1) holds open on the same server."""

from __future__ import annotations

import ast
from pathlib import Path

TEMPLATE = (
    Path(__file__).resolve().parents[2]
    / "src"
    / "tritonlab"
    / "report"
    / "templates"
    / "infer_client.py"
)


def test_the_client_compiles_and_its_sequence_id_is_not_fixed() -> None:
    source = TEMPLATE.read_text()
    tree = ast.parse(source)
    ids = [
        kw.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "sequence_id"
    ]
    assert ids, "the client sends a sequence to a stateful model"
    assert not any(isinstance(v, ast.Constant) for v in ids)
    assert "secrets.randbelow" in source


def test_a_stateful_runs_missing_cost_model_says_why() -> None:
    """Stop 54's defect: the reason named only missing serving-path cells or timings."""
    from tritonlab.report.cost_model_text import cost_model_section

    stateful = "\n".join(cost_model_section(None, [], [], graph=True, stateful=True))
    assert "carries state between requests" in stateful
    plain = "\n".join(cost_model_section(None, [], [], graph=True))
    assert "carries state" not in plain and "serving-path cells" in plain
