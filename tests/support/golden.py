"""Golden files: what a test produced compared with the file under `tests/golden/`, or, with
`LWGPU_UPDATE_GOLDEN=1`, written there instead (review the diff before committing it).

`check_golden` compares text exactly and shows a diff; `check_golden_json` compares a JSON body
by value, so the file may be indented for people to read.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import orjson

UPDATE_GOLDEN = "LWGPU_UPDATE_GOLDEN"


def updating() -> bool:
    """Whether this run rewrites the golden files instead of checking them."""
    return os.environ.get(UPDATE_GOLDEN) == "1"


def _missing(path: Path) -> str:
    return f"{path} is missing; run with {UPDATE_GOLDEN}=1 to create it"


def check_golden(path: Path, actual: str) -> None:
    """Compare `actual` with the golden file; rewrite it instead when LWGPU_UPDATE_GOLDEN=1."""
    if updating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), _missing(path)
    expected = path.read_text(encoding="utf-8")
    # This is not a test module, so pytest does not rewrite this assert: show the diff here.
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(True), actual.splitlines(True), str(path.name), "actual", n=1
        )
    )
    assert actual == expected, (
        f"{path.name} differs; review the change, then run with {UPDATE_GOLDEN}=1 to accept "
        f"it:\n{diff[:6000]}"
    )


def check_golden_json(path: Path, data: bytes) -> None:
    """Compare the JSON body `data` by value with the golden file; with LWGPU_UPDATE_GOLDEN=1
    write it there instead, indented."""
    body = orjson.loads(data)
    if updating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        return
    assert path.exists(), _missing(path)
    expected = orjson.loads(path.read_bytes())
    assert body == expected, f"{path.name} differs: {body!r} != {expected!r}"
