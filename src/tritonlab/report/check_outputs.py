"""``tritonlab check``'s outputs, one writer per format: markdown (a CI step summary), JUnit
XML (one test case per verdict) and JSON (``CheckReport.to_dict``)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter

from tritonlab.decisions.check import CheckReport
from tritonlab.decisions.gate import Outcome
from tritonlab.stats.verdicts import CONFIDENCE

_MARK = {
    Outcome.PASS: "pass",
    Outcome.REGRESSION: "**REGRESSION**",
    Outcome.UNDECIDED: "undecided",
    Outcome.NOT_COMPARABLE: "not comparable",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _median(value: float | None, figure: str) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f} infer/s" if figure == "throughput" else f"{value / 1000:,.2f} ms"


def markdown(report: CheckReport) -> str:
    """The report as markdown: the status line, the table of verdicts, the reasons and notes."""
    t = report.thresholds
    lines = [
        "## tritonlab check",
        "",
        f"**{report.headline}**",
        "",
        f"- baseline: `{report.baseline}`",
        f"- new: `{report.new}`",
        f"- thresholds: throughput may drop by {t.max_regression_pct:g}%, p99 may rise by "
        f"{t.max_p99_increase_pct:g}%, beyond the noise ({100 * CONFIDENCE:g}% intervals)",
        f"- rounds: {report.rounds}",
        "",
    ]
    if report.not_comparable:
        lines += ["### Not comparable", "", *(f"- {_cell(r)}" for r in report.not_comparable), ""]
    if report.results:
        lines += [
            "| configuration | load | figure | baseline | new | change (95% CI) | outcome | why |",
            "|---|---|---|---:|---:|---|---|---|",
        ]
        for r in report.results:
            v = r.verdict
            lines.append(
                f"| {_cell(r.config)} | {r.load_key} | {r.figure} | "
                f"{_median(v.reference_median, r.figure)} | {_median(v.variant_median, r.figure)} "
                f"| {_cell(v.phrase())} | {_MARK[r.outcome]} | {_cell(r.reason())} |"
            )
        lines.append("")
    if report.notes:
        lines += ["### Notes", "", *(f"- {_cell(n)}" for n in report.notes), ""]
    return "\n".join(lines)


def junit_xml(report: CheckReport) -> str:
    """The report as JUnit XML: one test case per verdict (a regression is a failure, an
    undecided figure is skipped, a figure not comparable is an error); runs that are not
    comparable at all are one erroring test case."""
    suite = ET.Element("testsuite", name="tritonlab check")
    for reason in report.not_comparable:
        case = ET.SubElement(suite, "testcase", classname="tritonlab.check", name="comparable")
        ET.SubElement(case, "error", message=reason, type="not comparable").text = reason
    for r in report.results:
        case = ET.SubElement(
            suite, "testcase", classname=f"tritonlab.check.{r.config}", name=r.name
        )
        reason = r.reason()
        if r.outcome is Outcome.REGRESSION:
            ET.SubElement(case, "failure", message=reason, type="regression").text = reason
        elif r.outcome is Outcome.UNDECIDED:
            ET.SubElement(case, "skipped", message=reason)
        elif r.outcome is Outcome.NOT_COMPARABLE:
            ET.SubElement(case, "error", message=reason, type="not comparable").text = reason
        else:
            ET.SubElement(case, "system-out").text = reason
    outcomes = Counter(r.outcome for r in report.results)
    suite.set("tests", str(len(report.results) + len(report.not_comparable)))
    suite.set("failures", str(outcomes[Outcome.REGRESSION]))
    suite.set("errors", str(outcomes[Outcome.NOT_COMPARABLE] + len(report.not_comparable)))
    suite.set("skipped", str(outcomes[Outcome.UNDECIDED]))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def json_text(report: CheckReport) -> str:
    """The report as JSON (``CheckReport.to_dict``)."""
    return json.dumps(report.to_dict(), indent=1, sort_keys=True) + "\n"


WRITERS = {"markdown": markdown, "junit": junit_xml, "json": json_text}
