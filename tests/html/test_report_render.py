"""report.html: self-contained, escaped, well-formed, and rendered by headless Chromium.

The static tests read the page built from a copy of a recorded run; the ``html`` tests open it
in Debian's ``chromium`` (no network, no GPU) and check that every embedded plot decoded, then
save a screenshot under ``test-artifacts/`` at the repository root. Locally the browser tests
skip when ``chromium`` is not on PATH; with ``CI=true`` or ``TRITONLAB_HTML_TESTS=1`` (set by
``.ci/run``) a missing browser is a failure.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from tritonlab.decisions.recommend import recommend
from tritonlab.report.build import build_report
from tritonlab.report.html import render_html_report
from tritonlab.report.recommend_summary_text import summary_line
from tritonlab.report.recommend_text import justification
from tritonlab.report.run_data import load_run

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
FIXTURES = REPO_ROOT / "tests" / "fixtures"
RUNS = [name for name in ("seed_run", "sweep_run") if (FIXTURES / name / "results").is_dir()]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=5000",
]


@dataclass(frozen=True)
class BuiltRun:
    run_dir: Path
    html_path: Path
    page: str
    plots: dict[str, Path]


def build_copy(name: str, target: Path) -> BuiltRun:
    run_dir = target / name
    shutil.copytree(FIXTURES / name, run_dir)
    built = build_report(run_dir)
    assert built.html_report == run_dir / "report.html"
    return BuiltRun(run_dir, built.html_report, built.html_report.read_text(), built.plots)


@pytest.fixture(scope="module", params=RUNS)
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> BuiltRun:
    return build_copy(request.param, tmp_path_factory.mktemp("html"))


class Structure(HTMLParser):
    """Collects tags, checks nesting, and records every URL-bearing attribute."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.urls: list[tuple[str, str, str]] = []
        self.images: list[str] = []
        self.counts: dict[str, int] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.counts[tag] = self.counts.get(tag, 0) + 1
        for key, value in attrs:
            if key in ("src", "href", "srcset", "action", "poster", "data"):
                self.urls.append((tag, key, value or ""))
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()


def parse(page: str) -> Structure:
    parser = Structure()
    parser.feed(page)
    parser.close()
    return parser


def test_page_is_well_formed_html5(built: BuiltRun) -> None:
    assert built.page.startswith('<!DOCTYPE html>\n<html lang="en">')
    doc = parse(built.page)
    assert doc.errors == []
    assert doc.stack == [], f"unclosed: {doc.stack}"
    for tag in ("html", "head", "body", "title", "h1", "main"):
        assert doc.counts.get(tag) == 1, tag
    assert '<meta charset="utf-8">' in built.page


def test_page_is_self_contained(built: BuiltRun) -> None:
    doc = parse(built.page)
    for tag, attr, url in doc.urls:
        assert url.startswith(("data:image/png;base64,", "#")), (tag, attr, url[:60])
    assert "<link" not in built.page and "@import" not in built.page
    assert not re.search(r"url\(", built.page), "no CSS url(): nothing is fetched"
    assert not re.search(r"(?i)(src|href)\s*=\s*[\"']?(https?:)?//", built.page)
    # Every plot written is embedded, byte for byte, and nothing else is.
    assert len(doc.images) == len(built.plots) >= 1
    embedded = [base64.b64decode(src.split(",", 1)[1]) for src in doc.images]
    assert sorted(embedded) == sorted(p.read_bytes() for p in built.plots.values())


def test_page_carries_tables_explanations_and_conditions(built: BuiltRun) -> None:
    run = load_run(built.run_dir)
    manifest, analyses = run.manifest, run.analyses
    page = built.page
    for analysis in analyses:
        for report in analysis.reports:
            s = report.summary
            assert s.variant.description in page
            assert f"{s.throughput.median:,.0f}" in page
            assert f"{s.latency_p99.median:,.0f}" in page
            spread = s.throughput.range  # the range of the repeats, as the table shows it
            if spread:
                assert f"{spread[0]:,.0f}–<wbr>{spread[1]:,.0f}" in page
            for verdict in report.verdicts.values():
                if report.reference is not None and verdict.figure in ("throughput", "p99"):
                    assert verdict.phrase() in page
            for text in (report.background, report.action, report.result):
                assert html.escape(text) in page
    assert page.count("<dt>Background</dt>") == sum(len(a.reports) for a in analyses)
    machine = manifest.machine
    assert f"{machine.cpu_model}, {machine.cores} cores" in page
    assert manifest.created_utc in page
    assert "--model-control-mode=explicit" in page
    assert "perf_analyzer</h3>" in page or "perf_analyzer, load" in page


def test_rebuilding_gives_identical_files(built: BuiltRun) -> None:
    before = {
        p: p.read_bytes()
        for p in [
            built.html_path,
            built.run_dir / "docs" / "experiment_log.md",
            *built.plots.values(),
        ]
    }
    again = build_report(built.run_dir)
    assert set(again.plots.values()) == set(built.plots.values())
    for path, content in before.items():
        assert path.read_bytes() == content, path


def test_all_text_is_escaped(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "seed_run", run_dir)
    hostile = '<img src=x onerror="alert(1)"> & co'
    for cell in (run_dir / "results" / "cells").glob("baseline__*.json"):
        data = json.loads(cell.read_text())
        data["variant"]["description"] = hostile
        cell.write_text(json.dumps(data))
    manifest_path = run_dir / "results" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["machine"]["cpu_model"] = "<script>alert('cpu')</script>"
    manifest_path.write_text(json.dumps(manifest))
    page = build_report(run_dir).html_report.read_text()  # type: ignore[union-attr]
    assert hostile not in page and "<script>alert" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; co" in page
    assert "&lt;script&gt;alert(&#x27;cpu&#x27;)&lt;/script&gt;" in page
    assert parse(page).counts["script"] == 1  # only the page's own image counter


def test_recommendations_are_rendered(tmp_path: Path) -> None:
    run = load_run(FIXTURES / "seed_run")
    recs = recommend(run.summaries, latency_budget_p99_us=8000, target_load_infer_per_s=2000)
    page = render_html_report(dataclasses.replace(run, recommendations=recs), {})
    assert parse(page).errors == []
    assert '<section id="recommendations">' in page
    assert recs.throughput_pick is not None and recs.latency_pick is not None
    for pick in (recs.throughput_pick, recs.latency_pick):
        assert f"{pick.kind}: {pick.point.description}" in page
        assert html.escape(justification(pick, recs)) in page
    assert html.escape(summary_line(recs)) in page
    assert "8,000 µs" in page


# ---------------------------------------------------------------- headless Chromium


def chromium_binary() -> str:
    found = shutil.which("chromium")
    if found is None:
        message = (
            "chromium is not on PATH: install Debian's chromium package "
            "(TRITONLAB_HTML_TESTS=1 bash scripts/setup.sh does)"
        )
        if os.environ.get("CI") == "true" or os.environ.get("TRITONLAB_HTML_TESTS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found


def run_chromium(args: list[str], profile: Path, timeout_s: float = 120.0) -> str:
    """Run headless Chromium in its own session; on timeout kill that session's group only."""
    command = [chromium_binary(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this test started, nothing else
        proc.communicate()
        raise
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {err[-2000:]}"
    return out


@pytest.mark.html
def test_chromium_renders_every_image(built: BuiltRun, tmp_path: Path) -> None:
    dom = run_chromium(["--dump-dom", built.html_path.as_uri()], tmp_path / "profile")
    match = re.search(r'<body[^>]*data-images-loaded="(\d+)/(\d+)"', dom)
    assert match, "the page's load handler did not run: " + dom[:300]
    loaded, total = int(match.group(1)), int(match.group(2))
    assert loaded == total == len(built.plots) >= 1


@pytest.mark.html
def test_chromium_screenshot_is_a_real_page(built: BuiltRun, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"report_{built.run_dir.name}.png"
    shot.unlink(missing_ok=True)
    run_chromium(
        [f"--screenshot={shot}", "--window-size=1280,2000", built.html_path.as_uri()],
        tmp_path / "profile",
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(shot) as image:
        assert image.size == (1280, 2000)
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 200, "too few colours: blank page?"
        white = sum(n for n, c in colours if c == (255, 255, 255))
        assert white < 0.9 * 1280 * 2000, "the page is almost all white"
        # The dark header band is drawn: the page's CSS was applied.
        assert rgb.getpixel((5, 5)) == (16, 42, 67)
