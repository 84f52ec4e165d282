"""Hostile strings in the stored results come out of the Jinja2 templates escaped.

A model, file or configuration name and a configuration's description are written by whoever
ran the experiment; the page must show them as text, never run or load them. Built from a copy
of the recorded seed run with its strings replaced, the recommendations included.
"""

from __future__ import annotations

import dataclasses
import html
import json
import shutil
from pathlib import Path

from tritonlab.decisions.recommend import recommend
from tritonlab.report.html import render_html_report
from tritonlab.report.run_data import load_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = '"><img src=x onerror=alert(2)>'
QUOTES = 'it\'s "quoted" & <b>bold</b>'


def hostile_copy(target: Path) -> Path:
    """A copy of the seed run whose model, ONNX file and baseline description are hostile."""
    run_dir = target / "run"
    shutil.copytree(FIXTURES / "seed_run", run_dir)
    for cell in (run_dir / "results" / "cells").glob("baseline__*.json"):
        data = json.loads(cell.read_text())
        data["variant"]["description"] = SCRIPT + QUOTES
        cell.write_text(json.dumps(data))
    manifest_path = run_dir / "results" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["model"]["name"] = ATTRIBUTE
    manifest["model"]["onnx_file"] = SCRIPT + ".onnx"
    manifest_path.write_text(json.dumps(manifest))
    return run_dir


def test_hostile_strings_are_escaped_everywhere(tmp_path: Path) -> None:
    run = load_run(hostile_copy(tmp_path))
    recs = recommend(run.summaries, latency_budget_p99_us=1e9, target_load_infer_per_s=1)
    page = render_html_report(dataclasses.replace(run, recommendations=recs), {})
    # Nothing hostile survives as markup: one <script> (the page's own), no injected <img>.
    assert page.count("<script") == 1
    assert "<img" not in page and "<b>bold" not in page
    assert SCRIPT not in page and ATTRIBUTE not in page
    # Each shows as text, escaped like html.escape (quotes as &quot; and &#x27;).
    assert page.count(html.escape(SCRIPT + QUOTES)) >= 3  # table, explanations, frontier
    assert f"<title>{html.escape(ATTRIBUTE)} on Triton: experiment report</title>" in page
    assert f"<h1>{html.escape(ATTRIBUTE)} on NVIDIA Triton" in page
    assert html.escape(SCRIPT + ".onnx") in page  # the conditions' model line


def test_the_report_allows_only_its_own_style_and_script(tmp_path: Path) -> None:
    """Issue 32, 10: the offline report had no Content-Security-Policy. Now nothing loads from
    anywhere and only the page's own style sheet and script run, named by their sha256."""
    import base64
    import hashlib
    import re

    page = render_html_report(load_run(hostile_copy(tmp_path)), {})
    (policy,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert policy.startswith("default-src 'none'; img-src data:;")
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    (style,) = re.findall(r"<style>(.*?)</style>", page, re.S)
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert f"style-src {digest(style)};" in policy
    assert f"script-src {digest(script)};" in policy
