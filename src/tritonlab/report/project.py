"""Write the user's project folder around a run: scripts, client, README.

The folder follows the seed's layout (``models/``, ``scripts/``, ``client/``, ``benchmarks/``,
``docs/``, ``README.md``). The scripts hold the exact commands tritonlab ran, with every path
quoted, and run on their own without tritonlab's CLI.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from tritonlab import gateway
from tritonlab.client.infer import SHAPES_ONLY
from tritonlab.models.source import RepositorySource
from tritonlab.paths import portable_path
from tritonlab.perf.locate import PerfAnalyzerInstall
from tritonlab.perf.settings import PerfSettings
from tritonlab.report.conditions_text import uneven_repeats_note
from tritonlab.report.method_section import page_trust_note
from tritonlab.report.tune_section import pick_sentence
from tritonlab.run_layout import RunLayout
from tritonlab.server.locate import ServerInstall
from tritonlab.stats.aggregate import VariantSummary

if TYPE_CHECKING:
    from tritonlab.report.run_data import RunData

TEMPLATES = Path(__file__).parent / "templates"


def _q(value: object) -> str:
    return shlex.quote(str(value))


def _find_tritonlab(script: str) -> str:
    """Shell lines that set LOCATE to the installed tritonlab's locate command, or fail."""
    return (
        "# tritonlab, installed in the Python environment the script runs in, says where the\n"
        "# binaries are on this machine (see `python3 -m tritonlab.locate --help`).\n"
        'PYTHON="${TRITONLAB_PYTHON:-python3}"\n'
        'if command -v "$PYTHON" >/dev/null 2>&1 && "$PYTHON" -c "import tritonlab" '
        ">/dev/null 2>&1; then\n"
        '  LOCATE=("$PYTHON" -m tritonlab.locate)\n'
        "elif command -v tritonlab >/dev/null 2>&1; then\n"
        "  LOCATE=(tritonlab locate)\n"
        "else\n"
        f'  echo "{script}: tritonlab not found: activate the Python environment where '
        'tritonlab is installed (or set TRITONLAB_PYTHON)" >&2\n'
        "  exit 1\n"
        "fi\n"
    )


def start_server_script(install: ServerInstall) -> str:
    """A standalone start script: all variants loaded, loopback only, ports from the env.

    It holds no path of this machine: the installed tritonlab finds (and, for the bundled
    server, prepares) tritonserver at run time and sets the environment it needs, including
    the Python environment's ``bin`` first on PATH for the Python backend stub. An external
    ``--server-bin`` is the user's own path: written as given, and checked through tritonlab
    when it is installed.
    """
    if install.bundled:
        locate = (
            _find_tritonlab("start_server.sh")
            + 'LOCATED="$("${LOCATE[@]}" server --shell)"\n'
            + 'eval "$LOCATED"\n'
        )
    else:
        given = f"--server-bin {_q(install.binary)} --backend-dir {_q(install.backend_dir)}"
        locate = (
            f"TRITONSERVER={_q(install.binary)} BACKEND_DIR={_q(install.backend_dir)} "
            'CACHE_DIR=""\n'
            "# With tritonlab installed, it checks the binary and sets its environment.\n"
            'PYTHON="${TRITONLAB_PYTHON:-python3}"\n'
            'if "$PYTHON" -c "import tritonlab" >/dev/null 2>&1; then\n'
            f'  LOCATED="$("$PYTHON" -m tritonlab.locate server {given} --shell)"\n'
            '  eval "$LOCATED"\n'
            "fi\n"
        )
    return (
        "#!/usr/bin/env bash\n"
        "# Start Triton on this project's model repository (every variant loaded), bound to\n"
        "# 127.0.0.1. Ready when `curl -sf localhost:$HTTP_PORT/v2/health/ready` succeeds.\n"
        "# Stop with Ctrl-C.\n"
        "set -euo pipefail\n"
        'cd "$(dirname "$0")/.."\n'
        'HTTP_PORT="${HTTP_PORT:-8000}" GRPC_PORT="${GRPC_PORT:-8001}" '
        'METRICS_PORT="${METRICS_PORT:-8002}"\n' + locate + 'exec "$TRITONSERVER" \\\n'
        '  --model-repository="$PWD/models" \\\n'
        '  --backend-directory="$BACKEND_DIR" \\\n'
        '  ${CACHE_DIR:+"--cache-directory=$CACHE_DIR"} \\\n'
        '  --http-address=127.0.0.1 --http-port="$HTTP_PORT" \\\n'
        '  --grpc-address=127.0.0.1 --grpc-port="$GRPC_PORT" \\\n'
        '  --metrics-address=127.0.0.1 --metrics-port="$METRICS_PORT"\n'
    )


def run_perf_script(perf: PerfAnalyzerInstall, settings: PerfSettings) -> str:
    """The baseline perf_analyzer command, with the model swappable from the command line.

    perf_analyzer and its libraries are found at run time through the installed tritonlab
    (``perf`` is only the install this run used; none of its paths is written).
    """
    del perf  # found again at run time, wherever the project folder runs
    args = settings.to_args("CSV")
    fixed = [
        a
        for i, a in enumerate(args)
        if a not in ("-m", "-u", "-f", "-v") and args[i - 1] not in ("-m", "-u", "-f")
    ]
    url = "$GRPC_URL" if settings.protocol == "grpc" else "$HTTP_URL"
    return (
        "#!/usr/bin/env bash\n"
        "# The fixed perf_analyzer baseline used in docs/experiment_log.md.\n"
        "# Usage: bash scripts/run_perf.sh [MODEL] (default: the baseline); the server from\n"
        "# scripts/start_server.sh must be running. Raw output goes to benchmarks/manual/.\n"
        "set -euo pipefail\n"
        'cd "$(dirname "$0")/.."\n'
        f"DEFAULT_MODEL={_q(settings.model_name)}\n"
        'MODEL="${1:-$DEFAULT_MODEL}"\n'
        'GRPC_URL="${GRPC_URL:-127.0.0.1:${GRPC_PORT:-8001}}"\n'
        'HTTP_URL="${HTTP_URL:-127.0.0.1:${HTTP_PORT:-8000}}"\n'
        + _find_tritonlab("run_perf.sh")
        + 'LOCATED="$("${LOCATE[@]}" perf --shell)"\n'
        'eval "$LOCATED"\n'
        "mkdir -p benchmarks/manual\n"
        f'"$PERF_ANALYZER" -m "$MODEL" -u "{url}" \\\n  '
        + " ".join(_q(a) for a in fixed)
        + ' \\\n  -f "benchmarks/manual/$MODEL.csv" | tee "benchmarks/manual/$MODEL.txt"\n'
    )


def export_script_demo(name: str = "simple_mlp") -> str:
    """Re-export built-in model ``name`` (fixed seed) into the project folder and its
    configurations' ``models/*/1/model.onnx`` (large examples are committed without them)."""
    return (
        "#!/usr/bin/env python3\n"
        '"""Re-export the built-in model NAME (PyTorch, fixed seed) into this folder."""\n'
        "import shutil\n"
        "from pathlib import Path\n\n"
        "from tritonlab.models.zoo import export_builtin\n\n"
        f"NAME = {name!r}\n"
        "here = Path(__file__).resolve().parent.parent\n"
        "check = export_builtin(NAME, here / (NAME + '.onnx'))\n"
        "print(f'exported {check.onnx_path}; max abs diff vs PyTorch {check.max_abs_diff:.3g}')\n"
        "for folder in sorted((here / 'models').glob(NAME + '*')):\n"
        "    if '__serving_path_' not in folder.name:  # probes serve the null model\n"
        "        (folder / '1').mkdir(parents=True, exist_ok=True)\n"
        "        shutil.copyfile(check.onnx_path, folder / '1' / 'model.onnx')\n"
        "        print(f'copied to {folder.name}/1/model.onnx')\n"
    )


def export_script_user(onnx_source: Path, model_name: str, run_dir: Path | None = None) -> str:
    """Rebuild ``models/`` from the ONNX file: the one given on the command line, else the
    file's place inside the project folder (no path outside the project is written)."""
    inside = portable_path(onnx_source.resolve(), run_dir.resolve()) if run_dir else None
    relative = inside if inside and not inside.startswith(("/", "$")) else onnx_source.name
    # Every name the user chose goes in as a Python literal (repr), never pasted into code or
    # a docstring: a file name is text, whatever quotes or newlines it holds.
    return (
        "#!/usr/bin/env python3\n"
        '"""Rebuild models/ from the ONNX file: read its graph, write every variant.\n\n'
        "Usage: python scripts/export_model.py [ONNX] (default: SOURCE, in the project).\n"
        '"""\n'
        "import sys\n"
        "from pathlib import Path\n\n"
        "from tritonlab.models.inspect import inspect_onnx\n"
        "from tritonlab.repository.layout import build_repository\n"
        "from tritonlab.repository.variants import seed_comparison_variants\n\n"
        f"SOURCE = {relative!r}\n"
        "here = Path(__file__).resolve().parent.parent\n"
        "onnx = Path(sys.argv[1]) if len(sys.argv) > 1 else here / SOURCE\n"
        "if not onnx.is_file():\n"
        f"    sys.exit(f'{{onnx}} not found: pass the ONNX file, "
        "python scripts/export_model.py PATH')\n"
        "info = inspect_onnx(onnx)\n"
        f"for m in build_repository(here / 'models', info, {model_name!r}, "
        "seed_comparison_variants()):\n"
        "    print('wrote', m.config_path)\n"
    )


def export_script_repository(source: RepositorySource, model_name: str, run_dir: Path) -> str:
    """Rebuild ``models/`` from the user's repository (the path as given, relative where it lies
    inside the project): the baseline, the user's own configuration, written beside it."""
    inside = portable_path(source.root.resolve(), run_dir.resolve())
    root = inside if not inside.startswith(("/", "$")) else str(source.root)
    return (
        "#!/usr/bin/env python3\n"
        '"""Rebuild models/ from the Triton repository: the model as its own config.pbtxt\n'
        "serves it (the repository is only read).\n\n"
        "Usage: python scripts/export_model.py [REPOSITORY] (default: ROOT).\n"
        '"""\n'
        "import sys\n"
        "from pathlib import Path\n\n"
        "from tritonlab.experiments.repository_plan import repository_baseline\n"
        "from tritonlab.repository.layout import add_model\n"
        "from tritonlab.repository.user_repo import read_repository_model\n\n"
        f"ROOT = {root!r}\n"
        f"MODEL = {source.model!r}\n"
        f"STEP = {source.tuned if source.tuned != source.model else None!r}\n"
        "here = Path(__file__).resolve().parent.parent\n"
        "root = Path(sys.argv[1]) if len(sys.argv) > 1 else here / ROOT\n"
        "info = read_repository_model(root, MODEL, STEP)\n"
        f"model = add_model(here / 'models', info, {model_name!r}, repository_baseline(info))\n"
        "print('wrote', model.config_path)\n"
    )


def client_script(model_name: str) -> str:
    """``client/infer_client.py`` for the run folder: the template, ``model_name`` as a literal."""
    return (
        (TEMPLATES / "infer_client.py")
        .read_text()
        .replace('"__MODEL_NAME__"', repr(model_name))  # a literal, whatever the name holds
    )


def project_readme(run: RunData) -> str:
    """The run folder's ``README.md`` as markdown text: what was measured and how to rerun it."""
    manifest, analyses = run.manifest, run.analyses
    model, machine = manifest.model.name, manifest.machine
    kind = str((manifest.model.repository or {}).get("kind") or "onnx")
    lines = [
        f"# {model} on NVIDIA Triton Inference Server",
        "",
        "## What this is",
        "",
        f"{_model_words(kind, model)} deployed on a real Triton {manifest.server.version}, "
        f"called by a client that {_checked_words(run)}, measured with a fixed "
        f"perf_analyzer baseline, and compared across {_compared_words(run)}. Every number "
        "below was measured by tritonlab on "
        f"{machine.cpu_model} ({machine.cpu_affinity_count} cores) on "
        f"{manifest.created_utc[:10]}.",
        "",
        "## Layout",
        "",
        "- `models/` the Triton model repository: one folder per configuration "
        + (
            "(`config.pbtxt` + `1/model.onnx`)."
            if kind == "onnx"
            else "of the model measured (and of the step its configurations change), beside "
            "the models it calls as given (`config.pbtxt` and each model's own files, as in "
            "the repository given)."
        ),
        "- `scripts/start_server.sh` starts Triton on it; `scripts/run_perf.sh [MODEL]` runs the "
        "baseline perf_analyzer command; `scripts/export_model.py` rebuilds the model/repository.",
        "- `client/infer_client.py` sends one validated request.",
        "- `benchmarks/<config>/` raw perf_analyzer output and CSV per repeat.",
        "- `docs/experiment_log.md` the explained results; `results/` the machine-readable "
        "cells, manifest and summary.",
        "- `report.html` the whole report on one self-contained page (tables, explanations, "
        "plots embedded; opens offline); `plots/*.png` the plots on their own.",
        "",
        "## Reproduce",
        "",
        "```bash",
        "# with the Python environment where tritonlab is installed active:",
        "bash scripts/start_server.sh &   # ready: curl -sf localhost:8000/v2/health/ready",
        "python client/infer_client.py    # one checked request over gRPC",
        f"bash scripts/run_perf.sh {model}  # the fixed baseline",
        "tritonlab report .               # rebuild docs/, plots/, report.html from results/",
        "```",
        "",
        "## Key results",
        "",
        # the run's doubts travel with its verdicts, a tune's race rule too (issue 36 audit: a
        # tune's README quoted its verdicts without its log's two caveats, or its pick)
        *([note, ""] if (note := page_trust_note(run)) else []),
    ]
    if run.tune is not None and (said := pick_sentence(run.tune, run.summaries)):
        lines += [said + " (Its figures and the race's verdicts: `docs/experiment_log.md`.)", ""]
    cached = [r.summary for a in analyses for r in a.reports if r.summary.cache_hits]
    if cached:  # issue 36 audit: +768% quoted as if the cache helped any traffic
        hits = sum(s.cache_hits for s in cached)
        lookups = sum(s.cache_hits + s.cache_misses for s in cached)
        lines += [
            f"The response-cache rows hold only for traffic whose inputs repeat as this run's "
            f"did: the cache answered {hits:,} of their {lookups:,} requests, so the model ran "
            f"for {lookups - hits:,}.",
            "",
        ]
    for analysis in analyses:
        lines += [f"Load point `{analysis.load_key}`:", ""]
        counts = [len(r.summary.cells) for r in analysis.reports]
        if caution := uneven_repeats_note(counts, tune=run.tune is not None):
            lines += [caution, ""]
        for report in analysis.reports:
            s = report.summary
            # few pairs travel with the verdicts they give (issue 36 audit: a 2-pair t-interval
            # quoted on the page as if it were the log's signed-rank one)
            quoted = [report.verdicts.get(f) for f in ("throughput", "latency_p99")]
            is_baseline = not report.changed and not s.variant.control
            few = sorted({v.pairs_note() for v in quoted if v and not is_baseline} - {""})
            pairs = f"; {'; '.join(f'verdicts{n}' for n in few)}" if few else ""
            lines.append(f"- **{s.variant.description}**: {_figures(s, report.note)}{pairs}.")
        lines.append("")
    lines += ["Why each number moved is explained in `docs/experiment_log.md`.", ""]
    return "\n".join(lines)


# What a repository's model is, for the README's first line (issue 36 audit: an ensemble with
# Python steps called "an ONNX model" with a `1/model.onnx` layout).
_KIND_WORDS = {
    "ensemble": "An ensemble (`{model}`: Triton's ensemble scheduler calling the repository's "
    "steps)",
    "bls": "A Python BLS model (`{model}`, calling the repository's models from its Python code)",
    "python": "A Python model (`{model}`)",
}


def _model_words(kind: str, model: str) -> str:
    """'An ONNX model (`m`)', or what a repository's model is."""
    return _KIND_WORDS.get(kind, "An ONNX model (`{model}`)").format(model=model)


def _compared_words(run: RunData) -> str:
    """What the run varied: the knobs its configurations changed against the baseline, and
    the loads' dimensions that took more than one value (issue 36 audit: "dynamic batching,
    instance count" said of a tune that varied max batch size, protocol and concurrency)."""
    from tritonlab.explanation.rule_support import raw_changed_fields
    from tritonlab.repository.knobs import KNOB_LABELS

    variants = [v for v in run.manifest.plan.variants if not v.control]
    fields = dict.fromkeys(f for v in variants[1:] for f in raw_changed_fields(variants[0], v))
    # a config.pbtxt override is named by what it set (issue 36 audit: a warm-up run's
    # README said it compared "(none)")
    overrides = dict.fromkeys(k for v in variants for k in (v.config_overrides or {}))
    knobs = ", ".join(
        f"config.pbtxt {', '.join(overrides) or 'overrides'}"
        if f == "config_overrides"
        else KNOB_LABELS.get(f, f)
        for f in fields
    )
    settings = [s.settings for s in run.summaries]
    loads = [
        name
        for name, values in (
            ("concurrency", {x.concurrency for x in settings}),
            ("request rate", {x.request_rate_per_s for x in settings}),
            ("protocol", {x.protocol for x in settings}),
            ("client batch size", {x.batch_size for x in settings}),
            ("input shape", {str(sorted(x.input_shapes.items())) for x in settings}),
        )
        if len(values) > 1
    ]
    listed = " and ".join(loads) if len(loads) < 3 else ", ".join(loads[:-1]) + f" and {loads[-1]}"
    where = f", at more than one {listed}" if loads else ""
    # a pipeline's configurations change one step, not the measured model's own config.pbtxt
    # (issue 36 audit: an ensemble's README read as if its own config had been varied)
    repository = run.manifest.model.repository or {}
    step = repository.get("tuned")
    of = f" of step `{step}`" if step and step != run.manifest.model.name else ""
    return f"serving configurations{of} ({knobs or 'the same configuration only'}){where}"


def _checked_words(run: RunData) -> str:
    """What the client's check compared: shapes and values against a reference, or only shapes
    and dtypes where nothing gave expected values (issue 36 audit: "validates shapes and values"
    where the check recorded "shapes and dtypes only")."""
    checks = run.infer_checks
    if checks and all(c.reference == SHAPES_ONLY for c in checks):
        return "validates shapes and dtypes (no expected values were given, so none were checked)"
    return "validates shapes and values"


def _figures(s: VariantSummary, note: str) -> str:
    """A row's throughput and p99 with the table's note; a figure a cell could not give is
    said as such (issue 36 audit: "not measured" for a measured cell perf_analyzer marked
    unstable, with no p99)."""
    tput, p99 = s.throughput.median, s.latency_p99.median
    if tput is not None and p99 is not None:
        # one decimal under 100 infer/s: 11.5 and 11.4 must not read 12 and 11 (issue 36 audit)
        return f"{tput:,.{1 if tput < 100 else 0}f} infer/s, p99 {p99:,.0f} µs ({note})"
    if not s.cells:
        return "not measured"
    unstable = sum(not c.perf.stable for c in s.cells)
    cells = f"{len(s.cells)} cell{'s' if len(s.cells) != 1 else ''}" + (
        f", {unstable} unstable" if unstable else ""
    )
    if tput is None:
        return f"measured ({cells}) without a throughput or p99 to quote"
    return f"{tput:,.0f} infer/s and no p99 ({cells}), so no verdict"


def write_project_files(
    run_dir: Path,
    model_name: str,
    server_install: ServerInstall | None,
    perf_install: PerfAnalyzerInstall,
    baseline_settings: PerfSettings,
    export_script: str,
) -> None:
    """Write scripts and client (the README is written by the report step)."""
    layout = RunLayout(run_dir)
    if server_install is not None:
        gateway.write_text(layout.start_server_script, start_server_script(server_install))
    gateway.write_text(layout.run_perf_script, run_perf_script(perf_install, baseline_settings))
    gateway.write_text(layout.export_model_script, export_script)
    gateway.write_text(layout.infer_client, client_script(model_name))
    for path in (
        layout.start_server_script,
        layout.run_perf_script,
        layout.export_model_script,
        layout.infer_client,
    ):
        if path.exists():
            path.chmod(0o755)
