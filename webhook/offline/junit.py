"""`review -o junit`: the verdicts as JUnit XML, the test report CI systems read (GitLab's
unit test reports, Jenkins' junit and xunit plugins, GitHub's test reporter actions).

The shape is the one Jenkins' xunit plugin validates against (`junit-10.xsd`) and GitLab
documents ("JUnit XML format specification"): `<testsuites>` holding a `<testsuite>` per
input file (per namespace for `--cluster`), a `<testcase>` per object named
`Kind/namespace/name` whose `classname` is its suite (GitLab shows the classname as the
suite and keeps one test of each classname and name: a name that repeats in a file is told
apart by where it was found). A denied object, a pod no node admits, and with `--exit-code`
a rewritten object is a `<failure>`; an object out of lwgpu's scope is `<skipped>`; an input
that cannot be read is a testcase with an `<error>`; lwgpu's warnings are the testcase's
`<system-out>`, the documents left out of a file its suite's, the findings about the nodes
those of a suite named after them. Every suite and the root carry their counts; the root
only those junit-10.xsd declares on it (tests, failures, errors), as a validating reader
refuses any other attribute there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.etree import ElementTree as ET

from .manifests import InputError
from .review import Verdict

# Characters XML 1.0 cannot hold, even escaped (its `Char` production); a YAML string may.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Report:
    """What a review found beside the verdicts, for the formats that report it."""

    errors: Sequence[InputError] = ()
    left_out: Sequence[tuple[str, str]] = ()  # (where, why) of each document left out
    unplaced: Sequence[Verdict] = ()  # admitted pods whose placement matches no node
    nodes: str = ""  # where the nodes came from (`--nodes FILE`, the cluster)
    findings: Sequence[str] = ()  # what the policies get wrong about those nodes
    rewrites_fail: bool = False  # `--exit-code`: a rewritten object is a failure
    by_namespace: bool = False  # a suite per namespace, not per file


def _text(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def _suite_of(where: str) -> str:
    """The input a `where` belongs to: `deploy.yaml#0.items[1]` -> `deploy.yaml`."""
    return where.rsplit("#", 1)[0]


class _Suites:
    """The `<testsuite>` elements in the order their inputs came, with their counts."""

    def __init__(self) -> None:
        self.suites: dict[str, ET.Element] = {}
        self.names: dict[str, set[str]] = {}

    def suite(self, name: str) -> ET.Element:
        if name not in self.suites:
            self.suites[name] = ET.Element("testsuite", name=_text(name))
        return self.suites[name]

    def case(self, suite: str, name: str, where: str) -> ET.Element:
        taken = self.names.setdefault(suite, set())
        if name in taken:
            name = f"{name} ({where})"
        taken.add(name)
        case = ET.SubElement(self.suite(suite), "testcase", name=_text(name))
        case.set("classname", _text(suite))
        return case


def _outcome(case: ET.Element, tag: str, kind: str, message: str, text: str = "") -> None:
    element = ET.SubElement(case, tag, type=kind, message=_text(message))
    element.text = _text(text or message)


def _verdict_case(suites: _Suites, suite: str, verdict: Verdict, report: Report) -> None:
    case = suites.case(suite, verdict["ref"], verdict["where"])
    said = f"{verdict['where']} {verdict['ref']}: {verdict['reason']}"
    if not verdict["allowed"]:
        _outcome(case, "failure", "denied", verdict["reason"], said)
    elif any(verdict is u for u in report.unplaced):
        message = f"its nodeSelector and required node affinity match no node of {report.nodes}"
        _outcome(case, "failure", "unschedulable", message)
    elif verdict["outcome"] == "mutated" and report.rewrites_fail:
        _outcome(case, "failure", "rewritten", verdict["reason"] or "rewritten by lwgpu", said)
    elif verdict["outcome"] == "skipped":
        ET.SubElement(case, "skipped", message=_text(verdict["reason"]))
    if verdict["warnings"]:
        ET.SubElement(case, "system-out").text = _text("\n".join(verdict["warnings"]))


def junit_xml(results: list[Verdict], report: Report) -> str:
    """The JUnit XML document of a review, with its XML declaration."""
    suites = _Suites()
    for verdict in results:
        suite = verdict["namespace"] if report.by_namespace else _suite_of(verdict["where"])
        _verdict_case(suites, suite, verdict, report)
    notes: dict[str, list[str]] = {}
    for where, why in report.left_out:
        notes.setdefault(_suite_of(where), []).append(f"{where}: left out: {why}")
    for error in report.errors:
        suite = _suite_of(error.where) if error.where else "lwgpu review"
        case = suites.case(suite, error.where or suite, error.where)
        _outcome(case, "error", "unreadable", str(error))
    if report.findings:
        notes.setdefault(report.nodes, []).extend(report.findings)
    for suite, lines in notes.items():
        ET.SubElement(suites.suite(suite), "system-out").text = _text("\n".join(lines))
    root = ET.Element("testsuites", name="lwgpu review")
    totals = dict.fromkeys(("tests", "failures", "errors"), 0)
    for element in suites.suites.values():
        cases = element.findall("testcase")
        counts = {
            "tests": len(cases),
            "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
            "skipped": sum(c.find("skipped") is not None for c in cases),
        }
        # junit-10.xsd: name, tests, failures and errors are required on every testsuite.
        for key, count in counts.items():
            element.set(key, str(count))
            if key in totals:
                totals[key] += count
        root.append(element)
    for key, count in totals.items():
        root.set(key, str(count))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
