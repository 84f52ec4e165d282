"""Statements about a run are computed from its verdicts and records (issue 22, items 3, 7-9).

Recorded runs: the committed examples (``examples/*``) and ``tests/fixtures/seed_run``, loaded
read-only; the logs are rendered in memory, never written.
"""

from __future__ import annotations

import re
import statistics
from functools import cache
from pathlib import Path

import pytest

from tritonlab.report.experiment_log import render_experiment_log
from tritonlab.report.method_section import count_verdicts
from tritonlab.report.run_data import RunData, load_run
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import (
    NO_CLEAR,
    NO_VERDICT,
    VerdictRecord,
    compare,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# "Judgement:", or "Judgement (against 'X', the row it is explained from):"
JUDGEMENT = r"Judgement(?: \(against '[^']*', the row it is explained from\))?"
SEED_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "seed_run"


@cache
def _run(path: Path) -> RunData:
    return load_run(path)


@cache
def _log(path: Path) -> str:
    return render_experiment_log(_run(path))


def _method(text: str) -> str:
    return text.split("## Method\n", 1)[1].split("\n## ", 1)[0]


def _multiplicity(text: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith("- Multiplicity:"))


# Item 7: medians are statistics.median, not the upper middle value of an even count.


def test_throughput_error_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    run = _run(EXAMPLES / "simple_mlp")
    errors = [abs(e) for p in run.predictions if (e := p.throughput_error_pct) is not None]
    assert len(errors) == 4  # even: the upper middle value (11%) is not the median (9.2%)
    assert f"Throughput error: median {statistics.median(errors):.0f}%," in _log(
        EXAMPLES / "simple_mlp"
    )
    assert "Throughput error: median 9%," in _log(EXAMPLES / "simple_mlp")


# Item 8: one repeat gives no word and no judgement.


def test_one_repeat_reads_no_verdict_and_is_never_decided() -> None:
    v = compare("throughput", Summary.of([10.0]), Summary.of([21.2]))
    assert v.word == NO_VERDICT and not v.decided and not v.clear and not v.has_interval
    assert v.phrase() == "no verdict (one repeat; medians +112%)"
    assert v.to_dict()["word"] == "no verdict"
    # With two paired rounds there is an interval, and the word is a verdict again.
    paired = compare(
        "throughput", Summary.of([10.0, 11.0], [1, 2]), Summary.of([20.0, 23.0], [1, 2])
    )
    assert paired.word != NO_VERDICT and paired.has_interval


def test_one_repeat_changes_in_a_tune_log_are_not_judged() -> None:
    run = _run(EXAMPLES / "resnet18_cnn_tune")
    one_repeat = [
        r
        for a in run.analyses
        for r in a.reports
        if r.reference_verdicts and r.reference_verdicts["throughput"].word == NO_VERDICT
    ]
    assert one_repeat, "the tune's ramp and moves measure each point once"
    for r in one_repeat:
        assert "no measurable effect" not in r.result
        assert re.search(
            JUDGEMENT + r": none: throughput has no verdict",
            r.result,
        )
        assert "no clear difference (" not in r.note  # the table's note: no word either
    text = _log(EXAMPLES / "resnet18_cnn_tune")
    assert "one repeat)" not in text.replace("(one repeat; medians", "")
    assert "tput no verdict (one repeat; medians +112%)" in text


def test_changes_with_an_interval_are_still_judged() -> None:
    text = _log(EXAMPLES / "simple_mlp_backends")
    assert "no clear difference (-6%, CI -27% to +20%)" in text
    assert re.search(
        JUDGEMENT + r": no clear change at this load, but the intervals still allow one "
        r"\(throughput CI -27% to \+20%",
        text,
    )


def test_stored_verdicts_from_before_no_verdict_read_as_no_verdict() -> None:
    old = {
        "figure": "throughput",
        "word": "no clear difference",
        "change_pct": 112.0,
        "ci95_change_pct": None,
        "pairs": 0,
        "p_value": None,
        "reference_median": 10.0,
        "variant_median": 21.2,
        "method": "one repeat: no interval, so no verdict",
        "decided": False,
    }
    record = VerdictRecord.from_dict(old)
    assert record.to_dict() == old  # the stored file dumps back unchanged
    assert record.reading == NO_VERDICT
    assert record.phrase() == "no verdict (one repeat; medians +112%)"
    with_interval = VerdictRecord.from_dict(old | {"ci95_change_pct": [-45.0, 37.0]})
    assert with_interval.reading == NO_CLEAR
    assert with_interval.phrase() == "no clear difference (+112%, 95% CI -45% to +37%)"


# Item 9: the multiplicity count and the stopping rule behind it.


def test_multiplicity_counts_only_verdicts_that_could_read_higher_or_lower() -> None:
    sweep = EXAMPLES / "simple_mlp_sweep"
    count = count_verdicts(_run(sweep).analyses)
    assert count.stated == 126 and count.not_comparable == 36 and count.open == 90
    line = _multiplicity(_log(sweep))
    assert (
        "90 of them have an interval and could read higher or lower (36 are not comparable)" in line
    )
    assert "about 4.5 of them would still read higher or lower by chance" in line
    tune = count_verdicts(_run(EXAMPLES / "resnet18_cnn_tune").analyses)
    assert tune.open == 0 and tune.no_verdict == tune.stated
    # Counter-example: every verdict of the seed run has an interval.
    seed = _multiplicity(_log(SEED_RUN))
    assert (
        "the rows of this log state 8 throughput and p99 verdicts against the baseline and "
        "against the row each is explained from, each at"
    ) in seed
    assert "about 0.4 of them" in seed


def test_multiplicity_states_rounds_a_stopping_rule_added() -> None:
    simple = _multiplicity(_log(EXAMPLES / "simple_mlp"))
    assert _run(EXAMPLES / "simple_mlp").adaptive_rounds
    assert "1 extra round was added after the planned ones while a verdict" in simple
    assert "so the count is approximate" in simple
    blocks = _multiplicity(_log(EXAMPLES / "simple_mlp_cache"))
    added = len({r.round for r in _run(EXAMPLES / "simple_mlp_cache").adaptive_rounds})
    assert added > 1
    # a sweep's rule watches its picks (issue 36 audit); a run's, its headline verdicts
    assert _run(EXAMPLES / "simple_mlp_cache").manifest.sweep is not None
    assert f"{added} extra rounds were added after the planned ones while a throughput " in blocks
    assert "interval behind a pick" in blocks
    demo = _multiplicity(_log(EXAMPLES / "simple_mlp_demo"))
    assert "added after the planned ones while a headline throughput interval" in demo
    race = _multiplicity(_log(EXAMPLES / "resnet18_cnn_tune"))
    assert "race verdicts (against its leader) were measured over up to 3 rounds (2 to 3" in race


def test_multiplicity_without_added_rounds_claims_no_stopping_effect() -> None:
    skipped = _multiplicity(_log(EXAMPLES / "bert_encoder_sweep"))
    assert not _run(EXAMPLES / "bert_encoder_sweep").adaptive_rounds
    assert "The adaptive rule added no round" in skipped
    assert "approximate" not in skipped and "raises the chance" not in skipped
    seed = _multiplicity(_log(SEED_RUN))  # no adaptive repeats planned at all
    assert seed.endswith("are not in this count and carry the same chance each.")


# Item 3: no sentence about the run from a file's presence or absence.


@pytest.mark.parametrize("name", ["bert_encoder_sweep", "simple_mlp_backends"])
def test_undecided_verdicts_without_an_adaptive_round_are_not_called_decided(name: str) -> None:
    run = _run(EXAMPLES / name)
    assert run.manifest.adaptive is not None and not run.adaptive_rounds
    undecided = [
        v
        for a in run.analyses
        for r in a.reports
        for v in (*r.verdicts.values(), *r.reference_verdicts.values())
        if not v.decided
    ]
    assert undecided, "the run has undecided verdicts (e.g. -27%, CI -57% to +23%)"
    text = _log(EXAMPLES / name)
    assert "was decided after the planned rounds" not in text
    assert "every verdict" not in text.lower()
    assert "No extra round was measured." in _method(text)


def test_an_interval_end_near_zero_keeps_its_sign_and_a_decimal() -> None:
    """An interval that excludes no change must not print an end as 0% (issue 22 audit)."""
    from tritonlab.stats.verdicts import endpoint_text

    assert endpoint_text(0.3) == "+0.3%" and endpoint_text(-0.4) == "-0.4%"
    assert endpoint_text(0.0) == "+0%" and endpoint_text(12.6) == "+13%"
    assert endpoint_text(0.03) == "+0.03%"


def test_an_interval_never_prints_as_one_number() -> None:
    """Issue 36 audit: a race verdict read "lower (-2%, CI -2% to -2%)" for -2.4% to -1.6%."""
    from tritonlab.stats.verdicts import Verdict, Word, interval_text

    assert interval_text(-2.4, -1.6) == "-2.4% to -1.6%"
    assert interval_text(-2.04, -1.96) == "-2.04% to -1.96%"
    assert interval_text(-6.1, -0.4) == "-6% to -0.4%"
    assert interval_text(3.0, 3.0) == "+3% to +3%"  # a constant ratio: one number it is
    v = Verdict("throughput", Word.LOWER, -2.0, 100.0, 98.0, "paired", -2.4, -1.6, 4)
    assert v.phrase() == "lower (-2%, CI -2.4% to -1.6%)"


def test_a_run_without_a_stopping_record_says_why_is_not_recorded() -> None:
    """No extra round and no stopping.json: the log says the reason was not stored, and does not
    claim one (issue 22 audit)."""
    log = (EXAMPLES / "simple_mlp_backends" / "docs" / "experiment_log.md").read_text()
    assert "No extra round was measured. Why is not recorded in this run folder" in log
    cache = (EXAMPLES / "simple_mlp_cache" / "docs" / "experiment_log.md").read_text()
    assert "Why is not recorded" not in cache


def test_extra_rounds_without_a_stopping_record_say_why_is_not_recorded() -> None:
    """Extra rounds measured, no stopping.json: the log says why they stopped is not stored
    (issue 22, second audit); a run with the record states its reason instead."""
    log = (EXAMPLES / "simple_mlp" / "docs" / "experiment_log.md").read_text()
    assert "Why the extra rounds stopped is not recorded in this run folder" in log
    blocks = (EXAMPLES / "simple_mlp_sweep_blocks" / "docs" / "experiment_log.md").read_text()
    assert "Why the extra rounds stopped is not recorded" not in blocks
    assert "it stopped because" in blocks
