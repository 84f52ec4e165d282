"""The resolution benchmark's runs read for trust and for agreement between runs (its pages:
``resolution.py``), from the stored ``resolution.json`` only.

- A run's trust is its stored ``RunTrust`` record (``tritonlab.stats.run_trust``, the one its
  log states) where ``resolution.json`` holds one; a run summarised before it was stored is
  read from what the file does hold, by the same rules: its A/A controls' intervals (the
  family-wise rule), its cells stored disturbed (the block engine monitors every cell it
  measures, the classic engine none) and, for the classic engine, whether every p99 verdict
  paired every round (an unstable repeat has no p99, so a p99 in every round means no repeat
  was unstable); where that cannot be told, the page says the stable repeats are not stored.
- Agreement between runs is per figure: the words each configuration's throughput verdict got
  across the runs, and, apart, its p99 verdict's (issue 36 audit: "same word every run: yes"
  was read from throughput alone while two p99 verdicts changed word).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonlab.experiments.interference import MAX_DISTURBED_SHARE
from tritonlab.stats.run_trust import ControlFlag, RunTrust

FIGURES = (("throughput", "throughput"), ("p99", "latency_p99"))  # (words, stored key)
CLEAR = ("higher", "lower")


@dataclass(frozen=True)
class StoredTrust:
    """A run's trust as the stored file gives it: the record, whether it was stored or read
    from the run's other fields, and whether its stable repeats could be told."""

    trust: RunTrust
    stored: bool
    stability_known: bool = True

    @property
    def state(self) -> str:
        """The trust state, with the stable repeats that could not be told where they matter
        (an unchecked classic run could also have had unstable repeats)."""
        if self.stability_known:
            return self.trust.state
        return f"{self.trust.state} (its stable repeats not stored)"

    def text(self) -> str:
        """The run's caveat ('quiet' for a quiet run), as its log would state it."""
        caveat = self.trust.caveat() or self._quiet()
        return caveat if self.stability_known else f"{caveat} (its stable repeats not stored)"

    def _quiet(self) -> str:
        """'quiet', with the disturbed cells it rests on where there were any (issue 36 audit:
        "quiet" beside 16 cells stored disturbed read as a contradiction)."""
        t = self.trust
        if not t.cells_monitored or not t.cells_disturbed:
            return "quiet"
        return (
            f"quiet ({t.cells_disturbed} of {t.cells_monitored} monitored cells were stored "
            f"disturbed, within the {100 * MAX_DISTURBED_SHARE:.0f}% a run may rest on)"
        )


def control_phrase(verdict: dict[str, Any]) -> str:
    """A stored A/A verdict as the page prints it: 'higher (+7.3%, CI +1.9% to +12.2%)'."""
    ci = verdict.get("ci95_change_pct")
    if verdict.get("change_pct") is None:
        return str(verdict["word"])
    interval = "" if ci is None else f", CI {ci[0]:+.1f}% to {ci[1]:+.1f}%"
    return f"{verdict['word']} ({verdict['change_pct']:+.1f}%{interval})"


def _classic_stability_known(run: dict[str, Any]) -> bool:
    """True when a classic run's stored p99 verdicts show that no repeat was unstable: each
    paired every round, and the run's cells are its configurations' rounds and nothing else."""
    p99 = [v for v in run["verdicts"] if v["figure"] == "latency_p99"]
    configs = {v["config"] for v in run["verdicts"]}
    return (
        bool(p99)
        and all(v["pairs"] == run["blocks"] for v in p99)
        and run["cells"] == (len(configs) + 1) * run["blocks"]  # + the baseline
    )


def run_trust(run: dict[str, Any]) -> StoredTrust:
    """The trust of one stored run (see the module docstring)."""
    if run.get("trust") is not None:
        return StoredTrust(RunTrust.from_dict(run["trust"]), stored=True)
    floors = run.get("aa_control") or []
    flags = tuple(
        ControlFlag(f["load_key"], name, control_phrase(f[key]))
        for f in floors
        for name, key in FIGURES
        if f[key]["word"] in CLEAR
    )
    intervals = sum(f[key].get("ci95_change_pct") is not None for f in floors for _, key in FIGURES)
    monitored = run["engine"] == "blocks" and run.get("foreign_cores_max") is not None
    trust = RunTrust(
        cells=run["cells"],
        cells_monitored=run["cells"] if monitored else 0,
        cells_disturbed=run.get("cells_stored_disturbed", 0),
        foreign_cores_median=None,
        steal_cores_median=None,
        controls=len(floors),
        control_flags=flags,
        unstable=None,  # the block engine has no stability check; a classic run's: below
        control_intervals=intervals,
    )
    known = run["engine"] != "classic" or _classic_stability_known(run)
    return StoredTrust(trust, stored=False, stability_known=known)


def _run_list(numbers: list[int]) -> str:
    """'run 2' or 'runs 1, 2, 3'."""
    return ("run " if len(numbers) == 1 else "runs ") + ", ".join(str(n) for n in numbers)


def trusted_runs(runs: list[dict[str, Any]]) -> str:
    """'2 of 3 (run 2: control flagged)': how many of ``runs`` may be quoted without a doubt,
    and the state of each other one, runs of one state together."""
    ordered = sorted(runs, key=lambda r: r["run"])
    read = [(r["run"], run_trust(r)) for r in ordered]
    trusted = sum(1 for _, t in read if t.trust.trusted)
    states: dict[str, list[int]] = {}
    for number, t in read:
        if not t.trust.trusted:
            states.setdefault(t.state, []).append(number)
    said = [f"{_run_list(numbers)}: {state}" for state, numbers in states.items()]
    # a trusted run that rests on cells stored disturbed says so here too (issue 36 audit: the
    # table named run 2's flag and not run 1's 16 disturbed cells, where run 1 was one side of
    # the engine's only disagreement between runs)
    said += [
        f"run {number}: trusted, {t.trust.cells_disturbed} of {t.trust.cells_monitored} cells "
        "stored disturbed"
        for number, t in read
        if t.trust.trusted and t.trust.cells_disturbed
    ]
    doubts = "; ".join(said)
    return f"{trusted} of {len(runs)}" + (f" ({doubts})" if doubts else "")


def words_by_config(runs: list[dict[str, Any]], figure: str) -> dict[str, list[str]]:
    """The word each configuration's ``figure`` verdict ("throughput", "latency_p99") got in
    each of ``runs``, in run order."""
    words: dict[str, list[str]] = {}
    for run in sorted(runs, key=lambda r: r["run"]):
        for v in run["verdicts"]:
            if v["figure"] == figure:
                words.setdefault(v["config"], []).append(v["word"])
    return words


def same_words(words: dict[str, list[str]], runs: int) -> str:
    """'yes', 'n/a (one run)', or 'no (batch_0ms_x1: no clear difference, lower, lower)' with
    every configuration whose word changed between runs."""
    if runs < 2:
        return "n/a (one run)"
    changed = {c: w for c, w in words.items() if len(set(w)) > 1}
    if not changed:
        return "yes"
    return "no (" + "; ".join(f"{c}: {', '.join(w)}" for c, w in changed.items()) + ")"


def trust_lines(report: dict[str, Any]) -> list[str]:
    """Under the summary: each run with a caveat, and how the trust of runs stored without a
    record was read."""
    lines = []
    for run in report["runs"]:
        t = run_trust(run)
        if t.trust.caveat() or not t.stability_known:
            lines.append(f"- {run['model']}, {run['engine']} engine, run {run['run']}: {t.text()}.")
    if any(run.get("trust") is None for run in report["runs"]):
        lines.append(
            "- resolution.json stores no trust record for "
            + (
                "these runs"
                if all(run.get("trust") is None for run in report["runs"])
                else "some runs"
            )
            + ": each one's is read from what it stores, by the rules of its log "
            "(`tritonlab.stats.run_trust`): its A/A controls' intervals (family-wise: one "
            "control's two intervals reading a difference in one is already more than noise "
            "gives in one run in ten), its cells stored disturbed (the block engine monitors "
            "every cell, the classic engine none) and, for the classic engine, whether every p99 "
            "verdict paired every round (an unstable repeat has no p99)."
        )
    return lines
