"""`review -o junit`: JUnit XML for CI test reports, held to the schema the common reporters
accept (tests/offline/junit_schema.py) and to the review's own verdicts.

The complete output on the mixed input set is a golden file with the other formats
(tests/offline/test_review_outputs.py, `mixed-junit.txt`).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from tests.offline.junit_schema import check_junit
from tests.offline.test_review_outputs import HAMI, PLAIN, TWO_GPUS
from tests.support.builders import gpu_mem, node, pod
from tests.support.cli import run_cli
from tests.support.manifests import corpus_files, documents
from webhook.offline.review import left_out

SKIPPED = pod(gpu_mem(2), name="skipped", annotations={"lwgpu.io/skip": "true"})
# A class pinned on a label no node of NODES carries: admitted, placed on no node.
PINNED = pod(gpu_mem(2), name="pinned", nodeSelector={"zone": "mars"})
NODES = {"apiVersion": "v1", "kind": "List", "items": [node("n1", zone="earth")]}


def junit(*argv: str, files: dict[str, object], tmp_path, monkeypatch) -> tuple[int, dict]:
    """Write `files` (name -> objects), run `review NAMES -o junit ARGV`; the exit code and
    each testcase by (suite, name), after the whole document passed the schema."""
    monkeypatch.chdir(tmp_path)
    for name, objects in files.items():
        text = objects if isinstance(objects, str) else yaml.safe_dump_all(objects)
        (tmp_path / name).write_text(text, encoding="utf-8")
    code, out, _ = run_cli("review", *files, *argv, "-o", "junit")
    root = check_junit(out)
    cases = {
        (suite.get("name"), case.get("name")): case
        for suite in root
        for case in suite.findall("testcase")
    }
    return code, {"root": root, **cases}


def outcome(case) -> tuple[str, str | None] | None:
    """(tag, type) of a testcase's failure, error or skipped element; None when it passed."""
    for element in case:
        if element.tag in ("failure", "error", "skipped"):
            return element.tag, element.get("type")
    return None


@pytest.mark.parametrize(
    ("objects", "argv", "code", "expected"),
    [
        ([HAMI], [], 0, None),
        ([PLAIN], [], 0, ("skipped", None)),
        ([TWO_GPUS], [], 1, ("failure", "denied")),
        ([SKIPPED], [], 0, ("skipped", None)),
        ([HAMI], ["--exit-code"], 1, ("failure", "rewritten")),
        ([PINNED], ["--nodes", "nodes.yaml"], 1, ("failure", "unschedulable")),
    ],
    ids=["rewritten", "no-gpu", "denied", "out-of-scope", "exit-code", "unschedulable"],
)
def test_each_outcome_is_a_testcase_as_the_exit_code_counts_it(
    objects, argv, code, expected, tmp_path, monkeypatch
):
    """A testcase fails exactly for what makes the exit code 1; an object lwgpu leaves out of
    its scope (no GPU asked, `lwgpu.io/skip`) is skipped."""
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump(NODES), encoding="utf-8")
    files = {"pods.yaml": objects}
    found, cases = junit(*argv, files=files, tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert found == code
    name = f"Pod/default/{objects[0]['metadata']['name']}"
    assert outcome(cases[("pods.yaml", name)]) == expected


def test_failure_message_and_warnings_are_the_review_s(tmp_path, monkeypatch):
    """A failure's message is the reason `-o json` gives; lwgpu's warnings are the testcase's
    system-out, word for word."""
    files = {"pods.yaml": [TWO_GPUS, HAMI]}
    _, cases = junit(files=files, tmp_path=tmp_path, monkeypatch=monkeypatch)
    verdicts = json.loads(run_cli("review", "pods.yaml", "-o", "json")[1])
    denied, rewritten = (cases[("pods.yaml", v["ref"])] for v in verdicts)
    assert denied.find("failure").get("message") == verdicts[0]["reason"]
    assert rewritten.find("system-out").text == "\n".join(verdicts[1]["warnings"])


def test_unreadable_inputs_are_errors_and_left_out_documents_are_said(tmp_path, monkeypatch):
    """An unreadable file is a testcase with an `<error>` in a suite of its own; a document
    that is no object is left out, said in its file's system-out; the exit code is 2."""
    files = {
        "a-template.yaml": "{{ .Values.pod }}: [\n",
        "b-pods.yaml": [HAMI, {"replicas": 3}],
    }
    code, cases = junit(files=files, tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert code == 2
    error = cases[("a-template.yaml", "a-template.yaml")].find("error")
    assert error.get("message").startswith("a-template.yaml: line 2: not valid YAML")
    suite = cases["root"].find("testsuite[@name='b-pods.yaml']")
    assert suite.find("system-out").text.startswith("b-pods.yaml#1: left out: no apiVersion")
    assert (cases["root"].get("tests"), cases["root"].get("errors")) == ("2", "1")


def test_a_name_repeated_in_a_file_is_told_apart(tmp_path, monkeypatch):
    """GitLab keeps one test per classname and name: a repeated object is named with where
    it was found."""
    _, cases = junit(files={"pods.yaml": [HAMI, HAMI]}, tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert ("pods.yaml", "Pod/default/hami") in cases
    assert ("pods.yaml", "Pod/default/hami (pods.yaml#1)") in cases


def test_text_xml_cannot_hold_is_replaced_and_markup_escaped(tmp_path, monkeypatch):
    """A name with characters XML 1.0 cannot hold, and markup, still give a document every
    reader parses, holding the markup as text."""
    odd = dict(TWO_GPUS, metadata={"name": 'a<b>&"c"\x07'})
    _, cases = junit(files={"pods.yaml": [odd]}, tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert ("pods.yaml", 'Pod/default/a<b>&"c"\ufffd') in cases


def test_the_whole_corpus_is_one_report_with_a_testcase_per_document():
    """JUnit of every corpus file, parsed back: a suite per file, a testcase per document
    (but those left out, each said in its suite's system-out), the failures the denials of
    `-o json`."""
    files = corpus_files()
    code, out, err = run_cli("review", *map(str, files), "-o", "junit")
    assert code in (0, 1), err
    root = check_junit(out)
    verdicts = json.loads(run_cli("review", *map(str, files), "-o", "json")[1])
    suites = {suite.get("name"): suite for suite in root}
    assert set(suites) == {str(path) for path in files}
    for path in files:
        suite = suites[str(path)]
        docs = documents(path)
        left = [doc for doc in docs if left_out(doc)]
        assert len(suite.findall("testcase")) == len(docs) - len(left), path.name
        said = suite.findtext("system-out") or ""
        assert all(f"{doc.where}: left out" in said for doc in left)
    assert int(root.get("tests")) == len(verdicts)
    assert int(root.get("failures")) == sum(not v["allowed"] for v in verdicts) >= 1
    skipped = Counter(v["outcome"] for v in verdicts)["skipped"]
    assert sum(int(suite.get("skipped")) for suite in root) == skipped
