"""The server as a set of processes: metrics that add up across workers, and graceful SIGTERM."""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from tests.support.builders import admission_review, gpu_pod
from tests.support.paths import REPO
from tools.loopback.https_client import JSON, raw_request, read_response
from tools.loopback.server import serving
from tools.waiting import wait_for

POLICY = REPO / "policies" / "default.yaml"
SELECTOR = {"aliyun.accelerator/nvidia_mem": "2048MiB"}
# (endpoint, limits, selector) -> the decision the default policy makes
TRAFFIC = {
    ("mutate", "aliyun.com/gpu-mem", 2, None): "mutated",
    ("validate", "aliyun.com/gpu-mem", 2, None): "denied",
    ("mutate", "nvidia.com/gpu", "1", "seed"): "allowed",
    ("validate", "cpu", "1", None): "skipped",
}


def reviews_per_worker(metrics_dir: Path, scratch: Path) -> dict[str, float]:
    """Reviews counted in each worker's own counter file (pid -> count)."""
    counts = {}
    for db in metrics_dir.glob("counter_*.db"):
        alone = scratch / db.stem
        alone.mkdir()
        shutil.copy(db, alone)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(alone))
        counts[db.stem] = sum(
            s.value
            for m in registry.collect()
            if m.name == "lwgpu_admission_reviews"
            for s in m.samples
            if s.name.endswith("_total")
        )
    return counts


def test_metrics_count_every_review_across_two_workers(tmp_path):
    metrics_dir = tmp_path / "prometheus"
    plan = [key for key in TRAFFIC for _ in range(15)]
    with serving(
        tmp_path, POLICY, workers=2, env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    ) as server:

        def send(key):
            endpoint, resource, value, selector = key
            pod = gpu_pod({resource: value}, node_selector=SELECTOR if selector else None)
            return server.review(endpoint, admission_review(pod))[0]

        reloads = ("lwgpu_policy_reloads_total", frozenset())
        wait_for(lambda: server.metrics().get(reloads) == 2, what="both workers serving")
        # Concurrent fresh connections, so the kernel hands them to both workers.
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(send, plan)) == {200}
        assert server.get("/readyz")[0] == 200
        per_worker = reviews_per_worker(metrics_dir, tmp_path)

        # A worker that dies keeps its counts; its live gauges go (the master's child_exit hook).
        def live_pids() -> set[str]:
            return {p.stem.rsplit("_", 1)[1] for p in metrics_dir.glob("gauge_livemin_*.db")}

        before = wait_for(lambda: len(live_pids()) == 2 and live_pids(), what="two live workers")
        victim = min(before)
        os.kill(int(victim), signal.SIGKILL)
        after = wait_for(
            lambda: (pids := live_pids()) != before and len(pids) == 2 and pids, what="a new worker"
        )
        # Two workers loaded the policy, then the new one: counters of the dead worker stay.
        wait_for(
            lambda: server.metrics()[reloads] == 3,
            what="the new worker's policy load",
        )
        metrics = server.metrics()

    expected = collections.Counter((key[0], TRAFFIC[key]) for key in plan)
    for (endpoint, decision), count in expected.items():
        labels = frozenset({"endpoint": endpoint, "decision": decision}.items())
        assert metrics[("lwgpu_admission_reviews_total", labels)] == count
    for endpoint in ("mutate", "validate"):
        histogram = (
            "lwgpu_admission_review_duration_seconds_count",
            frozenset({"endpoint": endpoint}.items()),
        )
        assert metrics[histogram] == sum(n for (e, _), n in expected.items() if e == endpoint)
    assert victim not in after
    assert metrics[("lwgpu_policy_generation", frozenset())] == 1
    assert 364 * 86400 < metrics[("lwgpu_certificate_expiry_seconds", frozenset())] <= 365 * 86400
    assert (
        len(per_worker) == 2
        and sum(per_worker.values()) == len(plan)
        and min(per_worker.values()) > 0
    )
    print(f"\nreviews per worker: {sorted(per_worker.values())}")


def test_sigterm_lets_an_in_flight_review_finish(tmp_path):
    body = orjson.dumps(admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="in-flight"))
    head = raw_request("POST", "/mutate", [JSON, f"Content-Length: {len(body)}"])
    with serving(tmp_path, POLICY, workers=1) as server:
        with server.raw_socket() as sock:
            sock.sendall(head + body[:100])
            server.process.send_signal(signal.SIGTERM)
            wait_for(
                lambda: b"Handling signal: term" in server.stderr.read_bytes(),
                what="the master's SIGTERM",
            )
            sock.sendall(body[100:])
            response = read_response(sock)
        assert server.process.wait(30) == 0
    assert response.status == 200
    assert orjson.loads(response.data)["response"]["uid"] == "in-flight"


def test_after_sigterm_new_connections_are_answered_until_the_calls_stop(tmp_path):
    # A replica still listed after SIGTERM (endpoint removal slower than the preStop pause)
    # keeps answering: each answer closes its connection, so the caller dials again and
    # finds the endpoints of the moment. Once no request has come for LAME_DUCK_QUIET_SECONDS
    # the worker stops accepting and the server exits.
    body = orjson.dumps(admission_review(gpu_pod({"aliyun.com/gpu-mem": 2})))
    with serving(tmp_path, POLICY, workers=1) as server:
        server.process.send_signal(signal.SIGTERM)
        wait_for(
            lambda: b"Handling signal: term" in server.stderr.read_bytes(),
            what="the master's SIGTERM",
        )
        answers = []
        for _ in range(5):
            with contextlib.closing(server.connect()) as conn:
                status, headers, _ = conn.call(
                    "POST", "/mutate", body, {"Content-Type": "application/json"}
                )
                answers.append((status, headers.get("Connection")))
        assert server.process.wait(30) == 0
    assert [status for status, _ in answers] == [200] * 5
    assert answers[-1] == (200, "close")
    assert b"stops accepting: no request for 2 s" in server.stderr.read_bytes()
