"""`make image-test`: build deploy/Dockerfile here and check the running image.

Prints a PASS or FAIL line per check, the image size and how long each step took; exits 1
when a check fails or a step cannot be done, and 0 with a SKIP line only when the tools cannot
be had (not installed, and not root to install them).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tools.image.base import base_image
from tools.image.build import IMAGE, build
from tools.image.checks import check_all
from tools.image.programs import StepFailed, ensure, podman_ok
from tools.paths import REPO

CACHE = REPO / "build" / "image"
T = TypeVar("T")


def say(line: str) -> None:
    """One line of the report, shown at once (make buffers nothing, a pipe would)."""
    print(line, flush=True)


def timed(timings: dict[str, float], step: str, work: Callable[[], T]) -> T:
    """``work()``, its duration recorded under ``step``."""
    began = time.monotonic()
    try:
        return work()
    finally:
        timings[step] = time.monotonic() - began


def main() -> int:
    """Run the steps and the checks; the process exit status."""
    began = time.monotonic()
    timings: dict[str, float] = {}
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        skip, tools = timed(timings, "tools", lambda: ensure(CACHE / "apt.log"))
        if skip is not None:
            say(f"SKIP  image-test: {skip}")
            return 0
        version = podman_ok("--version")
        say(f"image-test: tools: {version}, runc, mmdebstrap, nsenter ({tools})")
        base, cached = timed(timings, "base", lambda: base_image(CACHE, CACHE / "mmdebstrap.log"))
        say(f"image-test: base {base} ({'cached in build/image' if cached else 'made'})")
        timed(timings, "build", lambda: build(base, CACHE / "build.log"))
        say(f"image-test: built {IMAGE} from deploy/Dockerfile (log: build/image/build.log)")
    except StepFailed as failure:
        say(f"FAIL  image-test: {failure}")
        return 1
    failed = 0
    checks_began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lwgpu-image-test-") as workdir:
        try:
            for result in check_all(IMAGE, base, Path(workdir)):
                failed += not result.ok
                say(f"{'PASS' if result.ok else 'FAIL'}  {result.name}: {result.detail}")
        except Exception as error:  # a check that broke is a failure to report, not a crash
            failed += 1
            say(f"FAIL  image-test stopped: {type(error).__name__}: {error}")
    timings["checks"] = time.monotonic() - checks_began
    timings["total"] = time.monotonic() - began
    say("image-test: " + ", ".join(f"{step} {took:.1f} s" for step, took in timings.items()))
    say(f"image-test: {'FAILED' if failed else 'passed'} ({failed} failed)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
