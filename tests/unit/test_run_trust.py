"""A run's trust (issue 36, item 2): one record computed once from the cells and the A/A
controls, each state on both sides of its limit, and every layer that quotes the run carrying
its doubt (log, summary.json, the run's README and page, recommendations and picks, deploy)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tritonlab.deploy.kubernetes import DeployOptions, write_deployment
from tritonlab.deploy.pick import resolve_pick
from tritonlab.experiments.interference import MAX_DISTURBED_SHARE, Interference
from tritonlab.experiments.store import CellResult, load_cells, save_cell
from tritonlab.report.build import build_report
from tritonlab.report.run_data import load_run
from tritonlab.run_layout import CELLS_DIR, RECOMMENDATIONS_FILE
from tritonlab.stats.noise_floor import NoiseFloor
from tritonlab.stats.run_trust import RunTrust, run_trust
from tritonlab.stats.verdicts import Verdict, Word

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


def _verdict(figure: str, word: Word, low: float, high: float) -> Verdict:
    return Verdict(figure, word, (low + high) / 2, 100.0, 100.0, "paired", low, high, 12)


def _floor(throughput: Word = Word.NO_CLEAR) -> NoiseFloor:
    low, high = (-6.1, -0.6) if throughput == Word.LOWER else (-4.0, 3.0)
    return NoiseFloor(
        "grpc_b1_c8",
        "baseline_aa",
        _verdict("throughput", throughput, low, high),
        _verdict("latency_p99", Word.NO_CLEAR, -5.0, 7.0),
    )


def _monitored(cells: list[CellResult], disturbed: int) -> list[CellResult]:
    """``cells`` as the interference monitor would store them, the first ``disturbed`` of them
    disturbed (other processes using 0.5 cores, steal 0.02)."""
    return [
        dataclasses.replace(
            c,
            interference=Interference(
                0.5 if i < disturbed else 0.01, 0.02 if i < disturbed else 0.0, 0.0, i < disturbed
            ),
        )
        for i, c in enumerate(cells)
    ]


@pytest.fixture(scope="module")
def seed_cells() -> list[CellResult]:
    return load_cells(FIXTURES / "seed_run")


def test_a_monitored_run_whose_control_told_nothing_apart_is_quiet(
    seed_cells: list[CellResult],
) -> None:
    trust = run_trust(_monitored(seed_cells, 0), [_floor()])
    assert (trust.state, trust.trusted, trust.caveat(), trust.doubts()) == ("quiet", True, "", [])
    assert RunTrust.from_dict(trust.to_dict()) == trust
    assert trust.to_dict()["state"] == "quiet"


def test_a_control_that_told_the_copies_apart_flags_the_run(
    seed_cells: list[CellResult],
) -> None:
    trust = run_trust(_monitored(seed_cells, 0), [_floor(Word.LOWER)])
    assert trust.state == "control flagged" and not trust.trusted
    assert trust.caveat().startswith("this run's verdicts are not to be trusted: its A/A control")
    assert "(throughput lower (-3%, CI -6% to -1%) at `grpc_b1_c8`)" in trust.caveat()


def test_one_flag_among_many_control_intervals_is_within_chance(
    seed_cells: list[CellResult],
) -> None:
    """A sweep's seven controls hold fourteen intervals, of which noise alone reads at least one
    different in about half of all runs: one flag there is within chance (the run is trusted,
    its quotes say a verdict near the noise floor may be noise); three are beyond it. One
    control (two intervals) with one flag is beyond it (9.75% < FAMILY_FALSE_ALARM)."""
    from tritonlab.stats.run_trust import FAMILY_FALSE_ALARM

    quiet_floors = [dataclasses.replace(_floor(), load_key=f"grpc_b1_c{i}") for i in range(6)]
    one = run_trust(_monitored(seed_cells, 0), [_floor(Word.LOWER), *quiet_floors])
    assert one.control_intervals == 14 and len(one.control_flags) == 1
    assert one.chance_of_flags == pytest.approx(1 - 0.95**14)
    assert one.state == "control flag within chance" and one.trusted
    assert one.caveat().startswith("this run is trusted, but 1 of its 14 A/A control intervals")
    assert "as noise alone does in 51% of runs with as many" in one.caveat()
    assert "not to be trusted" not in one.caveat()
    assert RunTrust.from_dict(one.to_dict()) == one
    lower = [dataclasses.replace(_floor(Word.LOWER), load_key=f"grpc_b1_c{i}") for i in range(3)]
    three = run_trust(_monitored(seed_cells, 0), [*lower, *quiet_floors[:4]])
    assert (three.chance_of_flags or 1.0) < FAMILY_FALSE_ALARM
    assert three.state == "control flagged" and not three.trusted
    assert "3 of its 14 control intervals, as noise alone does in 3.0% of runs" in three.caveat()
    single = run_trust(_monitored(seed_cells, 0), [_floor(Word.LOWER)])
    assert single.control_intervals == 2 and single.state == "control flagged"
    # a record from before the intervals were counted: any flag flags the run
    old = RunTrust.from_dict({k: v for k, v in one.to_dict().items() if k != "control_intervals"})
    assert old.control_intervals == 0 and old.state == "control flagged"


def test_disturbed_cells_over_the_limit_and_not_at_it(seed_cells: list[CellResult]) -> None:
    limit = int(MAX_DISTURBED_SHARE * len(seed_cells))  # the most cells still within it
    at = run_trust(_monitored(seed_cells, limit), [_floor()])
    assert at.state == "quiet"
    over = run_trust(_monitored(seed_cells, limit + 1), [_floor()])
    assert over.state == "disturbed"
    assert f"{limit + 1} of {len(seed_cells)} cells were stored disturbed" in over.caveat()
    assert "other processes used a median 0.50 cores, steal 0.02" in over.caveat()


def test_a_configuration_resting_on_a_minority_of_stable_repeats(
    seed_cells: list[CellResult],
) -> None:
    name, load = seed_cells[0].variant.name, seed_cells[0].load_key
    group = [c for c in seed_cells if (c.variant.name, c.load_key) == (name, load)]
    assert len(group) >= 3

    def unstable(count: int) -> list[CellResult]:
        ids = {c.cell_id for c in group[:count]}
        return [
            dataclasses.replace(c, perf=dataclasses.replace(c.perf, stable=False))
            if c.cell_id in ids
            else c
            for c in _monitored(seed_cells, 0)
        ]

    half = len(group) // 2  # at most half unstable: the figures rest on the majority
    assert run_trust(unstable(half), [_floor()]).state == "quiet"
    trust = run_trust(unstable(len(group) - 1), [_floor()])
    assert trust.state == "unstable repeats"
    assert f"`{name}` at `{load}` rests on 1 stable repeat of {len(group)}" in trust.caveat()


def test_a_run_nothing_checked_says_so(seed_cells: list[CellResult]) -> None:
    bare = [dataclasses.replace(c, interference=None) for c in seed_cells]
    trust = run_trust(bare, [])
    assert trust.state == "unchecked" and not trust.trusted
    assert trust.caveat() == (
        "this run's noise was not checked: no A/A control and no interference monitor checked "
        "its noise"
    )


def _disturbed_copy(source: Path, target: Path) -> Path:
    """A copy of the run folder ``source`` whose every cell was stored disturbed."""
    shutil.copytree(source, target)
    cells = load_cells(target)
    shutil.rmtree(target / "results" / CELLS_DIR)
    for cell in _monitored(cells, len(cells)):
        save_cell(target, cell)
    return target


def test_the_log_summary_page_and_readme_carry_a_disturbed_runs_doubt(tmp_path: Path) -> None:
    run = _disturbed_copy(FIXTURES / "sweep_run", tmp_path / "sweep")
    built = build_report(run)
    log = built.experiment_log.read_text()
    assert "- Trust: **disturbed**: this run's verdicts are not to be trusted: " in log
    # what disturbed the stored cells, beside their count (the steal time included)
    cells = len(load_cells(run))
    assert (
        f"what disturbed them: foreign CPU over 0.25 cores in {cells}, steal time over 0.25 "
        f"cores in 0 (median 0.50 foreign and 0.02 steal cores over them)"
    ) in log
    summary = json.loads(built.summary_json.read_text())
    assert summary["trust"]["state"] == "disturbed"
    recs = json.loads((run / "results" / RECOMMENDATIONS_FILE).read_text())
    assert recs["run_trust"]["state"] == "disturbed"
    assert "Note: this run's verdicts are not to be trusted" in recs["summary_line"]
    pick = recs["throughput_pick"]["justification"]
    assert pick.endswith("this pick rests on its verdicts.")
    assert "**Note: this run's verdicts are not to be trusted" in (run / "README.md").read_text()
    page = (run / "report.html").read_text()
    assert "<dt>Trust</dt><dd>disturbed: this run&#x27;s verdicts are not to be trusted" in page


def test_a_quiet_runs_quotes_carry_no_note(tmp_path: Path) -> None:
    run = tmp_path / "sweep"
    shutil.copytree(FIXTURES / "sweep_run", run)
    cells = load_cells(run)
    shutil.rmtree(run / "results" / CELLS_DIR)
    for cell in _monitored(cells, 0):
        save_cell(run, cell)
    built = build_report(run)
    assert (
        "Note:"
        not in json.loads((run / "results" / RECOMMENDATIONS_FILE).read_text())["summary_line"]
    )
    assert "- Trust: quiet: " in built.experiment_log.read_text()
    assert "what disturbed them" not in built.experiment_log.read_text()
    assert "**Note:" not in (run / "README.md").read_text()


def test_a_deployment_from_a_disturbed_run_says_so(tmp_path: Path) -> None:
    run = _disturbed_copy(ROOT / "examples" / "simple_mlp_sweep", tmp_path / "sweep")
    pick = resolve_pick(run)
    assert pick.trust is not None and pick.trust.state == "disturbed"
    out = tmp_path / "deploy"
    write_deployment(pick, run, out, DeployOptions())
    (deployment,) = [d for d in yaml.safe_load_all((out / "deployment.yaml").read_text()) if d]
    notes = deployment["metadata"]["annotations"]
    assert notes["tritonlab/run-trust"] == "disturbed"
    assert notes["tritonlab/run-doubt"].startswith("this run's verdicts are not to be trusted")
    assert "measure again on a quiet machine" in (out / "README.md").read_text()


def _pages() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pages", ROOT / "scripts" / "results_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pages"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_results_pages_quote_a_doubtful_run_with_its_doubt(tmp_path: Path) -> None:
    pages = _pages()
    run = load_run(_disturbed_copy(FIXTURES / "sweep_run", tmp_path / "sweep"))
    assert "**Note: this run's verdicts are not to be trusted" in pages.conditions(run)
    assert "(this run's verdicts are not to be trusted" in pages._baseline_figures(run, run)
    quiet = dataclasses.replace(run, trust=run_trust([], [_floor()]))
    assert "Note" not in pages.conditions(quiet)


def test_a_quiet_line_says_what_its_quiet_rests_on(seed_cells: list[CellResult]) -> None:
    """Issue 36 audit: "Trust: quiet: the A/A controls told no identical copies apart" where one
    did only once the process term widened it, and "quiet" for a tune with no control at all.
    The quiet line names a widened control and a run without one."""
    from tritonlab.report.conditions_text import trust_line

    widened = dataclasses.replace(
        _floor(),
        throughput=dataclasses.replace(
            _floor().throughput, unwidened_word=Word.HIGHER, unwidened_pct=(0.03, 3.77)
        ),
    )
    trust = run_trust(_monitored(seed_cells, 0), [widened])
    assert trust.state == "quiet" and len(trust.controls_widened) == 1
    line = trust_line(trust)
    assert "but only once the process term widened an interval: throughput at `grpc_b1_c8`" in line
    assert "(CI +0.03% to +3.8%)" in line
    assert RunTrust.from_dict(trust.to_dict()) == trust
    plain = trust_line(run_trust(_monitored(seed_cells, 0), [_floor()]))
    assert "process term" not in plain
    alone = trust_line(run_trust(_monitored(seed_cells, 0), []))
    assert "no A/A control was measured (the interference monitor alone checked it)" in alone
