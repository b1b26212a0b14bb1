"""checkov and `trivy config` over both default installs (the chart's render and kustomize's).

The install must pass both scanners: any failed check fails the test. The findings that are
choices are skipped where they arise, each with its reason: checkov's as `checkov.io/skipN:
CHECK=reason` annotations on the object, trivy's in deploy/base/trivy-ignore.rego (trivy reads
no annotation of a manifest). A skip without a reason fails too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy import scanners

RENDERS = ["chart", "kustomize"]
# checkov's inline skip: "CKV_K8S_43=the reason" (a bare id would be a skip without a reason)
SKIP = re.compile(r"^(CKV\w+)=(.*)$")


@pytest.mark.parametrize("render", RENDERS)
def test_no_scanner_finding(render: str, scanner: str, render_files: dict[str, Path]) -> None:
    """The scanner, offline, finds nothing that is not skipped with a reason."""
    path = render_files[render]
    if scanner == "checkov":
        failed, skipped = scanners.checkov(path)
        print(f"{render}: checkov {len(failed)} failed, {len(skipped)} skipped")
        assert skipped, "the install's reasoned skips were not read"
    else:
        failed = scanners.trivy(path)
        ignored = len(scanners.trivy(path, ignore=False)) - len(failed)
        print(f"{render}: trivy {len(failed)} failed, {ignored} ignored by trivy-ignore.rego")
        assert ignored > 0, "trivy-ignore.rego was not applied"
    assert failed == []


@pytest.mark.parametrize("render", RENDERS)
def test_every_checkov_skip_gives_its_reason(render: str, render_files: dict[str, Path]) -> None:
    """Each `checkov.io/skip` annotation reads CHECK=reason, with a reason of some words."""
    skips = [
        (obj["kind"], obj["metadata"]["name"], value)
        for obj in yaml.safe_load_all(render_files[render].read_text())
        if obj
        for key, value in (obj["metadata"].get("annotations") or {}).items()
        if key.startswith("checkov.io/skip")
    ]
    assert skips
    bad = [s for s in skips if not (m := SKIP.match(s[2])) or len(m[2].split()) < 3]
    assert bad == []
