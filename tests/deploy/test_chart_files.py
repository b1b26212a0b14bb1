"""The Helm chart ships real files, each a copy of its source in the kustomize tree
(tools/chart_files.py): no link that makes every `helm` run warn, and no copy that drifted
from what `kubectl apply -k deploy/` installs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import helm
from tools import chart_files


@pytest.mark.parametrize("name", sorted(chart_files.COPIES))
def test_each_copy_in_the_chart_is_its_deploy_source(name: str) -> None:
    copy, source = chart_files.FILES / name, chart_files.COPIES[name]
    assert not copy.is_symlink(), f"{copy} is a link: run `make chart-files`"
    assert copy.read_bytes() == source.read_bytes(), (
        f"{copy} differs from {source}: run `make chart-files` and commit both"
    )


def test_the_chart_holds_no_link_and_no_file_without_a_source() -> None:
    files = {p for p in helm.CHART.rglob("*") if p.is_file() or p.is_symlink()}
    assert [p for p in files if p.is_symlink()] == []
    shipped = {
        str(p.relative_to(chart_files.FILES)) for p in files if chart_files.FILES in p.parents
    }
    assert shipped == set(chart_files.COPIES)


def test_helm_renders_the_chart_without_a_warning(helm_bin: Path) -> None:
    args = ["--namespace", helm.NAMESPACE, *helm.REQUIRED]
    done = helm.helm("template", helm.RELEASE, str(helm.CHART), *args)
    assert done.stdout and done.stderr == ""


def test_the_refresh_tool_writes_stale_copies_and_check_reports_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(chart_files, "FILES", tmp_path / "files")
    assert chart_files.main(["--check"]) == 1
    assert "stale: " in capsys.readouterr().out
    assert chart_files.main([]) == 0
    assert chart_files.main(["--check"]) == 0
    assert capsys.readouterr().out.count("copied: ") == len(chart_files.COPIES)
