"""Models bench: every model of the corpus (``model_corpus.json``) through ``tritonlab run``
with no flags, and what came out.

For each model, fetched and checked first (``model_corpus.fetch``), it runs ``tritonlab run
MODEL --out WORK/NAME`` (no other flag: the shapes, values and configurations are tritonlab's
own choice) and reads the run folder, not the console: whether the server answered the check
(``results/infer_check.json``), how many cells were measured, how the dynamic dims were sized
and the control inputs' values chosen (the manifest's inputs), the headline throughput words
against the baseline, the command's wall time, and for a failed run its last line on stderr. It
also checks that no ``tritonserver`` of the run is left behind.

Each run's trust (``tritonlab.stats.run_trust.RunTrust``, what its log states: its A/A control,
the cells stored disturbed) is stored beside its verdicts and quoted in the table; a run stored
before it was (the committed ``models.json`` keeps only its disturbed-cell count) is said to
have none, and its verdicts near the noise floor (the interval's nearer end within 1% of zero)
are named as ones that may be noise (issue 36 audit).

Writes ``OUT/models.json`` and ``OUT/models.md`` (rewritten after every model), and after the
whole corpus the table in docs/models.md (between its markers; ``--render`` writes both again
from the stored JSON, and a unit test checks they are in step). Usage:
    python benchmarks/models_bench.py --out benchmarks/results [--work DIR] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARKER = ".tritonlab-models-bench"
# A model is given this long (the longest default run measured here took about a third of it).
RUN_TIMEOUT_S = 1800
# A verdict whose interval's nearer end is this close to zero (%) sits near the noise floor.
NEAR_FLOOR_PCT = 1.0
# A stored throughput phrase, e.g. "instances_2: lower (-3%, CI -5% to -0.1%)".
_PHRASE = re.compile(
    r"^(?P<config>[^:]+): (?P<word>higher|lower) \((?P<change>[+-][\d.]+)%, "
    r"CI (?P<low>[+-][\d.]+)% to (?P<high>[+-][\d.]+)%\)$"
)


def _leftover_servers(folder: Path) -> int:
    """``tritonserver`` processes still running whose command line names ``folder``."""
    count = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "tritonserver" in cmdline and str(folder) in cmdline:
            count += 1
    return count


def summarise_model(folder: Path) -> dict[str, Any]:
    """What a finished run folder says: served, measured, sizes and values, the words."""
    from tritonlab.report.run_data import load_run

    run = load_run(folder)
    inputs = run.manifest.inputs
    words, verdicts = [], []
    for analysis in run.analyses:
        for report in analysis.reports[1:]:
            verdict = report.verdicts.get("throughput")
            if verdict is not None and not report.summary.variant.control:
                words.append(f"{report.summary.variant.name}: {verdict.phrase()}")
                verdicts.append(
                    {
                        "config": report.summary.variant.name,
                        "word": verdict.word.value,
                        "change_pct": verdict.change_pct,
                        "ci95_pct": verdict.ci95_change_pct,
                    }
                )
    return {
        "served": bool(run.infer_checks),
        "checked_against": sorted({c.reference for c in run.infer_checks}),
        # a model that carries state is checked over a sequence (None: one request)
        "sequence_requests": max((c.sequence_requests or 0 for c in run.infer_checks), default=0)
        or None,
        "cells": len(run.cells),
        "batched": inputs.batched if inputs else None,
        "dims": inputs.dims_note if inputs else "",
        "controls": [
            f"{r.name} = {r.values_text()}"
            for r in (inputs.rules if inputs else ())
            if r.kind == "constant"
        ],
        "inputs": inputs.describe() if inputs else [],
        "throughput": words,
        # the same verdicts' figures (the noise-floor check reads their unrounded ends)
        "throughput_verdicts": verdicts,
        # the run's trust, as its log states it (its A/A control, the cells stored disturbed)
        "trust": run.trust.to_dict(),
        # the interference monitor: cells stored disturbed (other work on the machine)
        "cells_stored_disturbed": sum(
            1 for c in run.cells if c.interference is not None and c.interference.disturbed
        ),
    }


def _last_line(text: str) -> str:
    return next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")


def _portable(line: str, path: Path, folder: Path) -> str:
    """``line`` without this machine's paths: the model file as MODEL, the run folder as RUN,
    the home folder as $HOME (the committed results name no absolute path)."""
    for where, word in ((folder, "RUN"), (path, "MODEL"), (Path.home(), "$HOME")):
        line = line.replace(str(where.resolve()), word).replace(str(where), word)
    return line


def run_model(name: str, path: Path, folder: Path) -> dict[str, Any]:
    """``tritonlab run`` of one model with no flags, and what its folder holds."""
    tritonlab = str(Path(sys.executable).parent / "tritonlab")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [tritonlab, "run", str(path), "--out", str(folder)],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
        rc, err = done.returncode, done.stderr
    except subprocess.TimeoutExpired as exc:
        rc, err = 124, str(exc.stderr or "")
    entry: dict[str, Any] = {
        "name": name,
        "rc": rc,
        "wall_s": round(time.monotonic() - started, 1),
        "traceback": "Traceback (most recent call last)" in err,
        "error": _portable(_last_line(err), path, folder) if rc else "",
        "servers_left": _leftover_servers(folder),
    }
    if rc == 0:
        entry |= summarise_model(folder)
    return entry


def table_lines(report: dict[str, Any]) -> list[str]:
    """The table of every model and the line that counts them."""
    lines = [
        "| model | kind | from | served | cells | sizes and values | throughput vs baseline "
        "| trust | time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["models"]:
        if r["rc"] != 0:
            served = f"no (exit {r['rc']}): {r['error'][:160]}"
            cells = sizes = words = "-"
        else:
            served = "yes, answers = " + ", ".join(r["checked_against"])
            if r.get("sequence_requests"):
                served += f" over a {r['sequence_requests']}-request sequence (state kept)"
            cells = str(r["cells"])
            sizes = "; ".join(filter(None, [r["dims"], *r["controls"]])) or "fixed by the graph"
            words = "; ".join(r["throughput"]) or "-"
            if r.get("cells_stored_disturbed"):
                cells += f" ({r['cells_stored_disturbed']} disturbed)"
        lines.append(
            f"| {r['name']} | {r['kind']} | `{r['package']}=={r['version']}` | {served} | {cells} "
            f"| {sizes} | {words} | {trust_text(r)} | {r['wall_s']:.0f} s |"
        )
    disturbed = sum(r.get("cells_stored_disturbed") or 0 for r in report["models"])
    ok = sum(1 for r in report["models"] if r["rc"] == 0 and r.get("cells"))
    left = sum(r["servers_left"] for r in report["models"])
    tracebacks = sum(1 for r in report["models"] if r["traceback"])
    return [
        *lines,
        "",
        f"{ok} of {len(report['models'])} served, checked and measured; tracebacks: "
        f"{tracebacks}; servers left running: {left}; cells the interference monitor stored "
        f"as disturbed (other work on the machine): {disturbed} of "
        f"{sum(r.get('cells') or 0 for r in report['models'])}.",
    ]


def trust_text(entry: dict[str, Any]) -> str:
    """The run's trust state as its log states it ('quiet', 'control flagged', ...), 'not
    stored' for a run stored before it was, '-' for a run that measured nothing."""
    if entry["rc"] != 0:
        return "-"
    if entry.get("trust") is None:
        return "not stored"
    from tritonlab.stats.run_trust import RunTrust

    return RunTrust.from_dict(entry["trust"]).state


def _nearer_end(word: str, low: float, high: float) -> float:
    """The end of a "higher" or "lower" interval nearer zero."""
    return low if word == "higher" else high


def near_floor(entry: dict[str, Any]) -> list[str]:
    """The run's throughput verdicts that read a difference whose interval's nearer end lies
    within ``NEAR_FLOOR_PCT`` of zero, as the table quotes them: from the stored figures where
    the run has them, else from the stored phrase (its ends as printed)."""
    found = []
    figures = entry.get("throughput_verdicts")
    for i, phrase in enumerate(entry.get("throughput") or []):
        if figures is not None:
            v = figures[i]
            if v["word"] not in ("higher", "lower") or not v.get("ci95_pct"):
                continue
            end = _nearer_end(v["word"], *v["ci95_pct"])
        else:
            m = _PHRASE.match(phrase)
            if m is None:
                continue
            end = _nearer_end(m["word"], float(m["low"]), float(m["high"]))
        if abs(end) <= NEAR_FLOOR_PCT:
            found.append(phrase)
    return found


def trust_lines(report: dict[str, Any]) -> list[str]:
    """Under the table: which runs' trust was not stored, and their verdicts near the noise
    floor that may be noise; each stored trust's caveat (a doubt travels with its verdicts)."""
    from tritonlab.stats.run_trust import RunTrust

    measured = [r for r in report["models"] if r["rc"] == 0]
    missing = [r for r in measured if r.get("trust") is None]
    lines = []
    if missing:
        which = (
            f"these {len(missing)} runs"
            if len(missing) == len(measured)
            else f"{len(missing)} of the runs ({', '.join(r['name'] for r in missing)})"
        )
        text = (
            f"This benchmark did not store {which}' A/A control or trust record (models.json "
            "keeps only the cells the interference monitor stored disturbed, counted above): "
            "nothing here says whether a run told identical configurations apart, so a verdict "
            "near the noise floor may be noise."
        )
        near = [f"{r['name']} {phrase}" for r in missing for phrase in near_floor(r)]
        if near:
            printed = any(r.get("throughput_verdicts") is None for r in missing)
            text += (
                f" Those whose interval's nearer end is within {NEAR_FLOOR_PCT:g}% of zero"
                + (
                    " (the ends as models.json prints them; it does not store them unrounded)"
                    if printed
                    else ""
                )
                + ": "
                + "; ".join(near)
                + "."
            )
        lines += ["", text]
    caveats = [
        (r["name"], RunTrust.from_dict(r["trust"]).caveat())
        for r in measured
        if r.get("trust") is not None
    ]
    doubts = [f"- {name}: {caveat}." for name, caveat in caveats if caveat]
    return lines + (["", *doubts] if doubts else [])


def _measured(report: dict[str, Any]) -> str:
    return (
        f"Measured {report['date_utc']} UTC on {report['machine']} ({report['cores']} cores), "
        f"commit {report['commit']}"
    )


def render_md(report: dict[str, Any]) -> str:
    """``models.md``: the table with how it was measured."""
    lines = [
        "# Models bench: real ONNX models from registry wheels, `tritonlab run` with no flags",
        "",
        f"{_measured(report)}, `python benchmarks/models_bench.py` (its docstring states "
        "the method; the corpus and each file's sha256: `benchmarks/model_corpus.json`).",
        "",
        *table_lines(report),
        *trust_lines(report),
    ]
    return "\n".join(lines) + "\n"


DOCS_PAGE = ROOT / "docs" / "models.md"
DOCS_BEGIN = "<!-- models-bench: generated by benchmarks/models_bench.py --render -->"
DOCS_END = "<!-- models-bench: end -->"


def docs_block(report: dict[str, Any]) -> str:
    """The block docs/models.md quotes, between its markers."""
    lines = [
        DOCS_BEGIN,
        f"{_measured(report)} ([`benchmarks/results/models.md`]"
        "(../benchmarks/results/models.md)); each model run as `tritonlab run MODEL --out DIR`, "
        "nothing else given:",
        "",
        *table_lines(report),
        *trust_lines(report),
        DOCS_END,
    ]
    return "\n".join(lines)


def rewritten_docs(text: str, report: dict[str, Any]) -> str:
    """``text`` (docs/models.md) with its generated block replaced by ``docs_block``."""
    start, end = text.index(DOCS_BEGIN), text.index(DOCS_END) + len(DOCS_END)
    return text[:start] + docs_block(report) + text[end:]


def render(out: Path) -> None:
    """Write ``models.md`` and docs/models.md's block again from ``out``'s ``models.json``."""
    stored = json.loads((out / "models.json").read_text())
    (out / "models.md").write_text(render_md(stored))
    DOCS_PAGE.write_text(rewritten_docs(DOCS_PAGE.read_text(), stored))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--work", type=Path, default=ROOT / "models-bench-work")
    parser.add_argument(
        "--render", action="store_true", help="only write models.md and docs/models.md again"
    )
    parser.add_argument(
        "--reread", action="store_true", help="summarise the stored run folders in --work again"
    )
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    if args.render:
        render(args.out)
        return
    if args.reread:  # the stored run folders read again (after a change to what is summarised)
        stored = json.loads((args.out / "models.json").read_text())
        for entry in stored["models"]:
            if entry["rc"] == 0:
                entry |= summarise_model(args.work / entry["name"] / "run")
        (args.out / "models.json").write_text(json.dumps(stored, indent=2) + "\n")
        render(args.out)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_common import fresh_folder, report_header
    from model_corpus import fetch, load_corpus

    corpus = [m for m in load_corpus() if not args.names or m.name in args.names]
    paths = {m.name: fetch(m) for m in corpus}  # every file checked before anything runs
    report: dict[str, Any] = {**report_header(), "models": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for model in corpus:
        folder = args.work / model.name
        fresh_folder(folder, MARKER, "benchmarks/models_bench.py")
        entry = run_model(model.name, paths[model.name], folder / "run")
        entry |= {"kind": model.kind, "package": model.package, "version": model.version}
        report["models"].append(entry)
        (args.out / "models.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.out / "models.md").write_text(render_md(report))
        print(f"{model.name}: rc {entry['rc']}, {entry['wall_s']:.0f} s", flush=True)
    if not args.names:  # the whole corpus: the page quotes it
        render(args.out)


if __name__ == "__main__":
    main()
