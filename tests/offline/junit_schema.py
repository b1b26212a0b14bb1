"""The JUnit XML the common reporters accept, checked on a parsed document: no XML schema
library is installed here, so the rules of the schema are written out.

The schema is Jenkins' `junit-10.xsd` (jenkinsci/xunit-plugin,
src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd), which the
xunit plugin validates reports against, refusing an undeclared attribute; GitLab's "Unit
test reports" page (docs.gitlab.com/ci/testing/unit_test_reports, "JUnit XML format
specification") reads the same elements, shows a testcase's `classname` as its suite and
keeps only the first test of one classname and name. Ant's order of a suite's children
(properties, testcases, then system-out and system-err), which junit-10.xsd allows among
others, is required too: it is what every reader handles.
"""

from __future__ import annotations

from collections import Counter
from xml.etree import ElementTree as ET

# junit-10.xsd, element by element: (required attributes, allowed attributes, children).
ROOT = ({"tests", "failures", "errors"}, {"name", "time", "tests", "failures", "errors"})
SUITE_REQUIRED = {"name", "tests", "failures", "errors"}
SUITE_ALLOWED = SUITE_REQUIRED | {
    *("group", "time", "skipped", "timestamp", "hostname", "id", "package", "file", "log", "url"),
}
SUITE_ORDER = ("properties", "testcase", "system-out", "system-err")
CASE_ALLOWED = {"name", "time", "classname", "group"}
CASE_CHILDREN = {
    *("skipped", "error", "failure", "system-out", "system-err"),
    *("rerunFailure", "rerunError", "flakyFailure", "flakyError"),
}
OUTCOME_ALLOWED = {"type", "message"}
TEXT_ONLY = {"system-out", "system-err"}  # xs:string: no attributes, no child elements
COUNTED = {"failures": "failure", "errors": "error", "skipped": "skipped"}


def _attributes(element: ET.Element, required: set[str], allowed: set[str]) -> None:
    where = f"<{element.tag} {element.get('name', '')}>"
    assert required <= set(element.attrib), f"{where} lacks {required - set(element.attrib)}"
    assert set(element.attrib) <= allowed, f"{where} has {set(element.attrib) - allowed}"


def _count(element: ET.Element, key: str) -> int:
    value = element.get(key, "0")
    assert value.isdigit(), f"<{element.tag}> {key}={value!r} is no count"
    return int(value)


def _case(case: ET.Element, suite: ET.Element) -> None:
    _attributes(case, {"name"}, CASE_ALLOWED)
    assert case.get("classname") == suite.get("name"), "the classname is the suite's name"
    for child in case:
        assert child.tag in CASE_CHILDREN, f"<testcase> holds <{child.tag}>"
        if child.tag in TEXT_ONLY:
            assert not child.attrib and not len(child), f"<{child.tag}> holds more than text"
        else:
            _attributes(child, set(), OUTCOME_ALLOWED)
            assert not len(child), f"<{child.tag}> holds elements"


def _suite(suite: ET.Element) -> dict[str, int]:
    _attributes(suite, SUITE_REQUIRED, SUITE_ALLOWED)
    ranks = [SUITE_ORDER.index(child.tag) for child in suite if child.tag in SUITE_ORDER]
    assert len(ranks) == len(suite), f"suite {suite.get('name')} holds {[c.tag for c in suite]}"
    assert ranks == sorted(ranks), f"suite {suite.get('name')}: children out of Ant's order"
    cases = suite.findall("testcase")
    names = Counter(case.get("name") for case in cases)
    assert not [n for n, seen in names.items() if seen > 1], f"repeated tests: {names}"
    for case in cases:
        _case(case, suite)
    counts = {"tests": len(cases)}
    for key, tag in COUNTED.items():
        counts[key] = sum(case.find(tag) is not None for case in cases)
    for key, count in counts.items():
        assert _count(suite, key) == count, f"suite {suite.get('name')}: {key} is not {count}"
    return counts


def check_junit(text: str) -> ET.Element:
    """Parse a JUnit document and hold it to the schema and its own counts; the root."""
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    _attributes(root, *ROOT)
    totals: Counter[str] = Counter()
    for suite in root:
        assert suite.tag == "testsuite", f"<testsuites> holds <{suite.tag}>"
        totals.update(_suite(suite))
    for key in ("tests", "failures", "errors"):
        assert _count(root, key) == totals[key], f"the root's {key} is not {totals[key]}"
    return root
