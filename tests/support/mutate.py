"""Hypothesis strategies that break well-formed documents the way clients and admins do.

`mutated(bases)` takes a valid document (an AdmissionReview, a policy) and applies one to
four structural mutations anywhere in its tree: delete a member, replace it with an odd
value, add a member under an odd key, wrap it in a list or map, duplicate a list item.
Odd values are nulls, wrong types, huge and non-finite numbers, unicode, 100 KB strings,
deep nesting and keys containing `/` and `~`. `corrupted(data)` mutates serialized bytes
(truncation, inserted and overwritten bytes) for the wire and for YAML text.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

Path = tuple[str | int, ...]

# Fuzz tests run the same examples every time (CI must not find a new failure by chance)
# and generate big values on purpose.
FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

# Keys the decision and the loader look up, and keys that need escaping in a JSON pointer.
KEY_NAMES = (
    "aliyun.com/gpu-mem",
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "lwgpu.io/gpu-memory",
    "lwgpu.io/container",
    "lwgpu.io/skip",
    "lwgpu.io/profile",
    "restartPolicy",
    "resources",
    "limits",
    "requests",
    "nodeSelector",
    "annotations",
    "name",
    "spec",
    "a/b",
    "a~1b",
    "~0",
    "~",
    "/",
    "",
    "aliyun.accelerator/nvidia_mem",
)
QUANTITY_TEXT = (
    "1",
    "2",
    "0",
    "-1",
    "1.5Gi",
    "500M",
    "2e3",
    "1e999999999",
    "9" * 40,
    "0x10",
    "2Gi ",
    "NaN",
    "Infinity",
    "١٢",
    "true",
    "2048MiB",
    "1Ei",
    ".5",
    "+1",
)
KEYS = st.one_of(st.sampled_from(KEY_NAMES), st.text(max_size=12))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**30, -(10**40)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=16),
    st.sampled_from(QUANTITY_TEXT),
    st.sampled_from(KEY_NAMES),
)


def long_strings(*sizes: int) -> st.SearchStrategy[str]:
    """One character (ASCII, accented, astral, `/`, `~1`, a bidi override) repeated."""
    return st.builds(
        operator.mul,
        st.sampled_from(["x", "é", "🎮", "/", "~1", "\\", "\u202e"]),
        st.sampled_from(sizes),
    )


NESTED = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


def nest(depth: int, leaf: Any) -> Any:
    """`leaf` inside `depth` alternating single-member lists and maps."""
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"x": leaf}
    return leaf


# Depths stay below what a recursive Python walk (deepcopy, json.dumps) of the tree survives.
DEEP = st.builds(nest, st.sampled_from([50, 120, 240]), SCALARS)
VALUES = st.one_of(SCALARS, long_strings(4096, 100 * 1024), NESTED, DEEP)
# For YAML: the pure-Python parser takes a tenth of a second per 100 KB string.
SMALL_VALUES = st.one_of(SCALARS, long_strings(4096), NESTED, DEEP)
OPERATION = st.sampled_from(("delete", "replace", "add", "wrap-list", "wrap-map", "duplicate"))


def walk(root: Any) -> list[Path]:
    """Every path in the tree, the root first (map keys and list indexes)."""
    # Iterative: recursive generators cost depth-squared on the deeply nested values.
    paths: list[Path] = []
    todo: list[tuple[Path, Any]] = [((), root)]
    while todo:
        path, node = todo.pop()
        paths.append(path)
        if isinstance(node, dict):
            todo.extend(((*path, key), value) for key, value in node.items())
        elif isinstance(node, list):
            todo.extend(((*path, index), value) for index, value in enumerate(node))
    return paths


def _at(root: Any, path: Path) -> Any:
    for key in path:
        root = root[key]
    return root


def _apply(root: Any, path: Path, operation: str, key: str, value: Any) -> Any:
    """Mutate `root` in place at `path`; returns the (possibly new) root."""
    if not path:
        return value if operation == "replace" else [root] if operation == "wrap-list" else root
    parent, last = _at(root, path[:-1]), path[-1]
    current = parent[last]
    if operation == "delete":
        del parent[last]
    elif operation == "replace":
        parent[last] = value
    elif operation == "add" and isinstance(current, dict):
        current[key] = value
    elif operation == "add" and isinstance(current, list):
        current.append(value)
    elif operation == "wrap-list":
        parent[last] = [current]
    elif operation == "wrap-map":
        parent[last] = {key: current}
    elif operation == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(current))
    else:
        parent[last] = value
    return root


@st.composite
def mutated(
    draw: st.DrawFn, bases: list[Any], most: int = 4, values: st.SearchStrategy = VALUES
) -> Any:
    """One of `bases` (copied) after one to `most` mutations at drawn places, with `values`."""
    root = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, most))):
        paths = walk(root)
        # One time in four near the root, so envelope fields (uid, kind, operation) break too.
        if draw(st.integers(0, 3)) == 0:
            paths = [p for p in paths if len(p) <= 3]
        # An index, not sampled_from(paths): hypothesis caches integers(), and building a new
        # strategy per draw would cost more than the review under test.
        path = paths[draw(st.integers(0, len(paths) - 1))]
        root = _apply(root, path, draw(OPERATION), draw(KEYS), draw(values))
    return root


@st.composite
def corrupted(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` truncated, or with a few bytes inserted or overwritten at drawn offsets."""
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["truncate", "insert", "overwrite"]))
        if kind == "truncate":
            data = data[:at]
        else:
            chunk = draw(
                st.binary(min_size=1, max_size=6)
                | st.sampled_from(
                    [
                        b"{",
                        b"}",
                        b"[",
                        b'"',
                        b":",
                        b"\\",
                        b"\xff",
                        b"\x00",
                        b"\n- ",
                        b"&a ",
                        b"*a",
                        b"!!python/object ",
                        b"\t",
                    ]
                )
            )
            data = data[:at] + chunk + data[at + (len(chunk) if kind == "overwrite" else 0) :]
    return data


def print_counts(capsys: pytest.CaptureFixture[str], what: str, counts: Mapping[str, int]) -> None:
    """Print one summary line of a fuzz run's outcomes, past pytest's output capture."""
    with capsys.disabled():
        print(
            f"\n{what}: {sum(counts.values())} inputs: "
            + ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        )
