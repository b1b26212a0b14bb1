"""Waiting for an event instead of sleeping: poll a check until it holds, with a deadline.

For tests and tools that await a background effect (a log line, a reload, a watch event, a
retry).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    check: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.05, what: str = ""
) -> T:
    """Poll ``check`` until it returns something truthy and return that; raise TimeoutError
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout}s waiting for {what or check}")
        time.sleep(interval)
