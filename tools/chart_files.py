"""`python -m tools.chart_files`: copy the deploy/ files the Helm chart reads into the chart.

The kustomize tree is the source of the policy, the webhook scope, the admission policies and
the monitoring objects; the chart renders the same objects from copies of those files in
deploy/helm/lwgpu/files/. Copies, not links: Helm reads files only from inside the chart, and
follows a link with a warning on every run ("found symbolic link in path"), which a packaged
chart would not even carry. tests/deploy/test_chart_files.py fails, naming this command,
when a copy differs from its source; run it after changing a source and commit both.
`--check` prints the stale copies and exits 1 instead of writing.
"""

from __future__ import annotations

import argparse
import os
import sys

from tools.paths import REPO

DEPLOY = REPO / "deploy"
FILES = DEPLOY / "helm" / "lwgpu" / "files"
COPIES = {  # path under the chart's files/ -> the file it copies
    "default.yaml": REPO / "policies" / "default.yaml",
    "webhook-scope.yaml": DEPLOY / "base" / "webhook-scope.yaml",
    "final-state.yaml": DEPLOY / "base" / "final-state.yaml",
    "certs-policy.yaml": DEPLOY / "base" / "certs-policy.yaml",
    "labeller-confinement.yaml": DEPLOY / "base" / "labeller-confinement.yaml",
    **{
        f"monitoring/{name}": DEPLOY / "components" / "monitoring" / name
        for name in ("servicemonitor.yaml", "prometheusrule.yaml", "lwgpu-dashboard.json")
    },
}


def stale() -> list[str]:
    """The copies (paths under files/) that differ from their source or are missing."""
    return [
        name
        for name, source in COPIES.items()
        if not (FILES / name).is_file() or (FILES / name).read_bytes() != source.read_bytes()
    ]


def refresh() -> list[str]:
    """Write every stale copy from its source; the paths written."""
    written = stale()
    for name in written:
        copy = FILES / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(COPIES[name].read_bytes())
    return written


def main(argv: list[str] | None = None) -> int:
    """Refresh the copies (or, with --check, report the stale ones); 1 when --check finds any."""
    parser = argparse.ArgumentParser(prog="python -m tools.chart_files", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    names = stale() if args.check else refresh()
    for name in names:
        verb = "stale" if args.check else "copied"
        copy, source = (os.path.relpath(path, REPO) for path in (FILES / name, COPIES[name]))
        print(f"{verb}: {copy} <- {source}")
    return 1 if args.check and names else 0


if __name__ == "__main__":
    sys.exit(main())
