"""Connections kept alive between requests hold no thread (1 worker x 2 threads).

The apiserver pools its connections to a webhook and keeps them open between calls (Go's
net/http Transport, IdleConnTimeout 90 s). In gunicorn's gthread worker an idle kept-alive
connection waits in the event loop's poller, not in a thread (gunicorn/workers/gthread.py,
ThreadWorker.finish_request puts it back with ``poller.register``); the webhook's own worker
keeps that (webhook/server/transport/worker.py). So more idle pooled connections than threads must
never keep a new connection, or a new request on one of them, from being answered.
"""

from __future__ import annotations

import contextlib

import pytest

from tests.support.builders import admission_review, gpu_pod

REVIEW = admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="keepalive-uid")
IDLE = 12  # kept-alive connections left idle: six times the worker's threads


@pytest.fixture(scope="module")
def server_options() -> dict:
    return {"workers": 1, "threads": 2}


def test_idle_kept_alive_connections_leave_threads_for_new_ones(server):
    with contextlib.ExitStack() as stack:
        pooled = [stack.enter_context(contextlib.closing(server.connect())) for _ in range(IDLE)]
        first = [conn.review("/mutate", REVIEW) for conn in pooled]  # each opened, now idle
        fresh = server.review("/mutate", REVIEW)
        again = pooled[0].review("/mutate", REVIEW)  # an idle one is served again on its turn
        status, _ = server.get("/healthz")
    assert [code for code, _ in first] == [200] * IDLE
    assert fresh[0] == again[0] == status == 200
    assert fresh[1]["response"]["uid"] == again[1]["response"]["uid"] == "keepalive-uid"
