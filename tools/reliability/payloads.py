"""The large and hostile review bodies of the attack suite (tools/reliability/attacks.py), each
within the server's 7 MiB body cap: what a real apiserver could send at worst, and what a
client on the pod network could send instead.
"""

from __future__ import annotations

from typing import Any

import orjson

from tools.bench import bodies


def update_review(obj: dict[str, Any]) -> bytes:
    """An UPDATE review of `obj` with itself as oldObject: twice the object in one body."""
    review = bodies.review(obj)
    review["request"].update(operation="UPDATE", oldObject=obj)
    return orjson.dumps(review)


def init_containers_pod(count: int = 40_000) -> dict[str, Any]:
    """The seed pod with `count` init containers that each ask GPU memory (~3 MiB at 40k)."""
    pod = bodies.seed_pod()
    pod["spec"]["initContainers"] = [
        {"name": f"i{n}", "image": "x", "resources": {"limits": {"aliyun.com/gpu-mem": 2}}}
        for n in range(count)
    ]
    return pod


def dense_review(size: int = 7 * 2**20 - 4096) -> bytes:
    """A review of `size` bytes that parses into the most Python objects per byte: a pod of
    millions of empty init containers (`{},` is 3 bytes of JSON and a 64-byte dict)."""
    pod = bodies.seed_pod()
    pod["spec"]["initContainers"] = []
    base = len(bodies.body(pod))
    pod["spec"]["initContainers"] = [{} for _ in range((size - base) // 3)]
    return bodies.body(pod)


def hostile_names() -> bytes:
    """A review whose namespace, uid and name are 2 MiB each (they reach the access log)."""
    review = bodies.review(bodies.seed_pod(), namespace="n" * (2 << 20))
    review["request"]["uid"] = "u" * (2 << 20)
    review["request"]["name"] = "p" * (2 << 20)
    return orjson.dumps(review)
