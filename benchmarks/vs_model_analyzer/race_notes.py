"""What the Model Analyzer benchmark pages say beside a tune's pick, its race verdicts and the
re-measurement, read from their stored JSON alone (issue 36, seventeenth audit).

- **A tune's pick with its stop reason.** A pick whose race hit its round limit with verdicts
  undecided is not a settled best: the page quotes the stored stop reason and names the
  contenders the race did not separate from the pick, each with its stored verdict (parsed from
  the stop reason, never typed). The audit: "its pick" shown for both tune searches of
  ``vs_model_analyzer.md``, where each race had stopped at its 12-round limit undecided.
- **A tune race verdict with its two caveats**, as the README's generated blocks attach them:
  whether an A/A control was measured in the tune (said only where the stored data shows it;
  else that the page stores no such record), and that the race added rounds one at a time
  until its verdicts were decided, which raises the chance of a false higher or lower above
  the stated level (from the stored round count; else the rule, and that the count is not
  stored). The audit: ``pipeline_vs_model_analyzer.md`` quoted "lower (-8%, ...)" bare.
- **The re-measurement's noise check.** The re-measurement stores no A/A control and no
  interference record; where two tools picked one point, that pair, measured side by side, is
  the only check of its noise, and the page gives its verdicts from the stored rounds.

Used by ``compare.py`` (the demo MLP) and ``pipeline_page.py`` (the built-in pipeline).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))  # tritonlab, this checkout

from tritonlab.decisions.search_space import MIN_RACE_ROUNDS, Knobs
from tritonlab.stats.verdicts import CONFIDENCE

_WORD = r"(?:higher|lower|no clear difference|not comparable|no verdict)"
# a verdict phrase: its word and its parenthesis (which may hold one nested pair)
_VERDICT = re.compile(
    rf"(?P<who>(?:(?!: ).)+?): (?P<phrase>{_WORD}(?: \((?:[^()]|\([^()]*\))*\))?)(?=; |$)"
)
_POINT = r"at concurrency \d+"
_LIMIT = re.compile(r"^(\d+) race rounds measured")
UNSEPARATED = ("no clear difference", "no verdict")
# the keys a record of the re-measurement's noise would be stored under
NOISE_RECORDS = ("aa_control", "trust", "interference")


@dataclass(frozen=True)
class RaceStop:
    """A tune's stop reason, read: whether it ended a race (decided, or at the round limit),
    the rounds it names, the leader and each contender's verdict against the leader."""

    reason: str
    race: bool
    decided: bool
    rounds: int | None
    leader: str | None
    verdicts: tuple[tuple[str, str], ...]

    def unseparated(self) -> tuple[tuple[str, str], ...]:
        """The contenders whose verdict against the leader is no clear difference (or none)."""
        return tuple(v for v in self.verdicts if v[1].startswith(UNSEPARATED))


def read_stop(reason: str) -> RaceStop:
    """``reason`` (a tune's stored stop reason) read. Two wordings are stored: 'the race is
    decided: against LEADER, CONTENDER: VERDICT; ...' (before issue 36) and 'LEADER leads by
    the median of its repeats; each other contender against it: CONTENDER: VERDICT; ...'."""
    head, _, body = reason.partition(": ")
    decided = head == "the race is decided"
    limit = _LIMIT.match(head)
    if not (decided or limit) or not body:
        return RaceStop(reason, False, False, None, None, ())
    first = re.match(rf"(?:against )?(.*?{_POINT})", body)
    verdicts = []
    for m in _VERDICT.finditer(body):
        who = m.group("who").lstrip("; ").strip()
        who = re.sub(rf"^.*{_POINT}, ", "", who)  # 'against LEADER, CONTENDER': the contender
        verdicts.append((who, m.group("phrase")))
    return RaceStop(
        reason,
        True,
        decided,
        int(limit.group(1)) if limit else None,
        first.group(1) if first else None,
        tuple(verdicts),
    )


def point_text(serving: dict[str, Any], protocol: str, concurrency: int) -> str:
    """A pick as tune's stop reason names a point: '7 instances, dynamic batching (delay 0,
    max batch 64), 1 thread, grpc at concurrency 128'."""
    knobs = Knobs(
        int(serving.get("instance_count") or 1),
        bool(serving.get("dynamic_batching")),
        int(serving.get("max_batch_size") or 0),
        serving.get("intra_op_threads"),
        protocol,
    )
    return f"{knobs.description} at concurrency {concurrency}"


def _or_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def race_caveats(stop: RaceStop, race_rounds: int | None, trust: dict[str, Any] | None) -> str:
    """The two caveats a quoted race verdict carries, as sentences: how its rounds were added
    (``race_rounds`` where stored, else the rounds the stop reason names) and whether an A/A
    control was measured in the tune (``trust``: its stored trust record, or None)."""
    rounds = race_rounds if race_rounds is not None else stop.rounds
    level = f"{CONFIDENCE:.0%}"
    false_word = (
        "looking after every round and stopping on a decided word raises the chance of a false "
        f"higher or lower in those verdicts above the {level} level stated"
    )
    if rounds is None:
        added = (
            "This page does not store how many rounds the race measured: it measures "
            f"{MIN_RACE_ROUNDS}, then adds one at a time while a verdict is undecided, and where "
            f"it added any, {false_word}."
        )
    elif rounds > MIN_RACE_ROUNDS:
        added = (
            f"The race's verdicts were measured over {rounds} rounds, one more at a time after "
            f"the first {MIN_RACE_ROUNDS} while one was undecided: {false_word}."
        )
    else:
        added = f"The race measured its first {rounds} rounds and added none."
    if trust is None:
        control = (
            "No record of an A/A control in the tune is stored here, so nothing on this page "
            "shows whether one was measured."
        )
    elif not trust.get("controls"):
        control = "No A/A control was measured in the tune" + (
            ": the interference monitor alone checked its noise."
            if trust.get("cells_monitored")
            else ", and no interference monitor looked at it: nothing checked its noise."
        )
    else:
        control = (
            f"The tune measured {trust['controls']} A/A control(s); its trust: "
            f"{trust.get('state', 'not stated')}."
        )
    return f"{added} {control}"


def pick_stop_note(
    name: str, reason: str, pick: str | None, race_rounds: int | None, trust: dict | None
) -> str:
    """``name``'s pick (``pick``: its point in the stop reason's words, or None) quoted with
    its stored stop reason; where the race left verdicts undecided, the contenders it did not
    separate from the pick, with their stored verdicts, and the race's caveats."""
    stop = read_stop(reason)
    text = f'{name}, its stored stop reason: "{reason}".'
    if not stop.race:
        return text
    open_ = stop.unseparated()
    if open_:
        if stop.leader is not None and stop.leader == pick:
            whom, read = "its pick", "the pick"
        else:
            whom = f"its leader, {stop.leader} (its pick: {pick or 'not stored'}),"
            read = "the leader"
        count = "1 contender, read" if len(open_) == 1 else f"{len(open_)} contenders, each read"
        against = "; ".join(f"{who}: {phrase}" for who, phrase in open_)
        text += (
            f" The race {'was decided' if stop.decided else 'ended'} without separating {whom} "
            f"from {count} against {read}: {against}. The pick is not shown to be "
            "ahead of " + ("it." if len(open_) == 1 else "them.")
        )
        text += operating_points_note(stop.leader, [who for who, _ in open_])
    return f"{text} {race_caveats(stop, race_rounds, trust)}"


def _concurrency(point: str | None) -> int | None:
    found = re.search(r"at concurrency (\d+)$", point or "")
    return int(found.group(1)) if found else None


def operating_points_note(leader: str | None, contenders: list[str]) -> str:
    """' Of these, CONTENDER ran at concurrency 32, the leader at 128: ...' where a contender
    ran at another client load than the leader, so its verdict compares two operating points,
    not two configurations at one load (issue 36 audit: a c32 contender beside a c128 pick
    listed without it); '' where all ran at the leader's load."""
    at = _concurrency(leader)
    if at is None:
        return ""
    apart = [(c, n) for c in contenders if (n := _concurrency(c)) is not None and n != at]
    if not apart:
        return ""
    which = " and ".join(apart_ for apart_, _ in apart)
    return (
        f" Of these, {which} ran at another client load than the leader (concurrency {at}): "
        + ("that verdict compares" if len(apart) == 1 else "those verdicts compare")
        + " operating points, each configuration at its own load, not configurations at one "
        "load."
    )


def quoted_race_caveats(tune: dict[str, Any]) -> str:
    """The caveats of the race verdicts ``tune``'s stored stop reason quotes (a tune record
    of ``pipeline_compare.py``: ``stop_reason`` and, where stored, ``race_rounds`` and
    ``trust``); '' where it quotes none."""
    stop = read_stop(tune.get("stop_reason") or "")
    if not stop.verdicts:
        return ""
    return race_caveats(stop, tune.get("race_rounds"), tune.get("trust"))


def tune_pick_notes(data: dict[str, Any]) -> list[str]:
    """One note per tune search of ``compare.py``'s JSON that stored a stop reason."""
    picks = {f"{p['tool']} ({p['goals'][0]})": p for p in data["picks"]}
    notes = []
    for search in data["searches"]:
        if not search.get("stop_reason"):
            continue
        pick = picks.get(search["name"])
        point = (
            None
            if pick is None
            else point_text(pick["serving"], pick.get("protocol", "grpc"), pick["concurrency"])
        )
        notes.append(
            pick_stop_note(
                search["name"],
                search["stop_reason"],
                point,
                search.get("race_rounds"),
                search.get("trust"),
            )
        )
    return notes


def pair_verdicts(data: dict[str, Any], reference: str, subject: str, load: int) -> str:
    """``subject``'s rows against ``reference``'s at ``load``, paired by round, from the
    stored rounds: 'throughput no clear difference (...), p99 no clear difference (...)'."""
    from tritonlab.stats.summary import Summary
    from tritonlab.stats.verdicts import compare

    rows = {(r["pick"], r["concurrency"]): r for r in data["remeasured"]}
    a, b = rows[(reference, load)], rows[(subject, load)]
    parts = []
    for figure, key, word in (
        ("throughput", "throughput_infer_per_s", "throughput"),
        ("p99 latency", "p99_us", "p99"),
    ):
        verdict = compare(figure, Summary.of(a[key]), Summary.of(b[key]))
        parts.append(f"{word} {verdict.phrase()}")
    return ", ".join(parts)


def noise_check_note(data: dict[str, Any], twins: list[tuple[str, str, str]]) -> str:
    """What checked the re-measurement's noise: where its JSON stores no A/A control and no
    interference record, the identical pairs (``twins``: (pick, pick, 'c16')) are the only
    check, with their verdicts from the stored rounds; '' where a record is stored."""
    if any(key in data for key in NOISE_RECORDS):
        return ""
    stored = (
        "The re-measurement stored no A/A control and no interference record in this page's JSON"
    )
    if not twins:
        return f"{stored}: nothing on this page checks its noise."
    checks = "; ".join(
        f"{b} against {a} at {load}, paired by round: "
        f"{pair_verdicts(data, a, b, int(load.lstrip('c')))}"
        for a, b, load in twins
    )
    pair = "this pair of identical picks is" if len(twins) == 1 else "these identical pairs are"
    return f"{stored}: {pair} its only noise check ({checks})."


def race_rounds(steps: list[dict[str, Any]]) -> int:
    """The rounds a tune's race measured, from its stored steps (``tune.json``)."""
    return len({s.get("repeat") for s in steps if s.get("phase") == "race"})


def tune_trust(run_dir: Path) -> dict[str, Any] | None:
    """A tune run folder's trust record (``summary.json``'s, as its log states it), or None
    where the folder cannot be read."""
    from tritonlab.report.run_data import load_run

    try:
        return dict(load_run(run_dir).trust.to_dict())
    except Exception:  # a run from another tritonlab: the page says no record is stored
        return None
