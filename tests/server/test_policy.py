"""Policy hot reload: the store's rules in process, then a real server edited while it runs.

Policies change the two ways they do in practice: a ConfigMap volume, updated by kubelet's own
AtomicWriter (a new hidden directory, then the ``..data`` symlink swapped; these cases skip
where it is not built, see tests/support/volumes.py), and a file edited in place.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.builders import admission_review, gpu_pod
from tests.support.volumes import ConfigMapVolume
from tools.loopback.server import serving
from tools.waiting import wait_for
from webhook.files import load_policies
from webhook.server.state.policy_store import PolicyStore

BROKEN = "apiVersion: lwgpu.io/v1alpha1\nkind: LightweightGPUPolicy\nspec: [unclosed\n"
REVIEW = admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="policy-review")


def policy_yaml(*profiles: tuple[str, int]) -> str:
    """A one-policy file governing every namespace with the given (name, MiB) profiles."""
    lines = [
        "apiVersion: lwgpu.io/v1alpha1",
        "kind: LightweightGPUPolicy",
        "metadata: {name: test}",
        "spec:",
        "  profiles:",
    ]
    lines += [f"  - {{name: {name}, memory: {mib}Mi}}" for name, mib in profiles]
    return "\n".join(lines) + "\n"


TWO_Q = policy_yaml(("GRID-P4-2Q", 2048), ("GRID-P4-4Q", 4096))
FOUR_Q = policy_yaml(("GRID-P4-4Q", 4096))


class EditedFile:
    """A single policy file rewritten in place, as an editor or `kubectl cp` would."""

    def __init__(self, root: Path, text: str):
        root.mkdir()
        self.path = root / "policy.yaml"
        self.write(text)

    def write(self, text: str) -> None:
        with open(self.path, "w") as handle:
            handle.write(text)


class CountingLoader:
    def __init__(self):
        self.calls = 0

    def __call__(self, path):
        self.calls += 1
        return load_policies(path)


@pytest.mark.parametrize("volume_type", [ConfigMapVolume, EditedFile])
def test_store_reloads_on_change_and_keeps_the_last_good_policy(tmp_path, volume_type):
    volume = volume_type(tmp_path / "policies", TWO_Q)
    loader, loaded, failed = CountingLoader(), [], []
    store = PolicyStore(
        volume.path, loader=loader, on_loaded=loaded.append, on_failed=failed.append
    )
    assert store.poll() and store.generation == 1
    good = store.current
    assert not store.poll() and loader.calls == 1  # unchanged files are not parsed again
    volume.write(BROKEN)
    assert not store.poll() and not store.poll()
    assert store.current is good and "not valid YAML" in store.error and len(failed) == 1
    volume.write(FOUR_Q)
    assert store.poll() and store.error is None
    assert [p.name for p in store.current.policies[0].profiles] == ["GRID-P4-4Q"]
    assert loaded == [1, 2]


def test_store_without_a_policy_reports_why(tmp_path):
    store = PolicyStore(tmp_path / "missing.yaml")
    assert not store.poll()
    assert store.current is None and store.generation == 0 and "no such file" in store.error
    (tmp_path / "missing.yaml").write_text(TWO_Q)
    assert store.poll() and store.current is not None


def test_store_survives_a_crashing_loader(tmp_path):
    volume = EditedFile(tmp_path / "policies", TWO_Q)
    crashes = iter([None, RuntimeError("boom")])

    def loader(path):
        if (error := next(crashes)) is not None:
            raise error
        return load_policies(path)

    store = PolicyStore(volume.path, loader=loader)
    store.poll()
    volume.write(FOUR_Q)
    assert not store.poll() and store.error == "RuntimeError: boom" and store.generation == 1


def test_store_thread_polls_until_stopped(tmp_path):
    volume = EditedFile(tmp_path / "policies", TWO_Q)
    store = PolicyStore(volume.path)
    thread = store.start(interval=0.05)
    assert store.generation == 1  # the first load happens before start() returns
    volume.write(FOUR_Q)
    wait_for(lambda: store.generation == 2, what="the poller to load the new policy")
    store.stop()
    thread.join(5)
    assert not thread.is_alive()


def profile_of(server) -> str:
    status, body = server.review("mutate", REVIEW)
    assert status == 200, body
    return (
        next(w for w in body["response"]["warnings"] if " on GRID-" in w)
        .split(" on ")[1]
        .split()[0]
    )


def metric(server, name: str) -> float:
    return server.metrics().get((name, frozenset()), 0.0)


@pytest.mark.parametrize("volume_type", [ConfigMapVolume, EditedFile])
def test_server_reloads_a_fixed_policy_and_keeps_the_last_good_one(tmp_path, volume_type):
    volume = volume_type(tmp_path / "policies", TWO_Q)
    with serving(tmp_path, volume.path, workers=2) as server:
        assert profile_of(server) == "GRID-P4-2Q"
        wait_for(
            lambda: metric(server, "lwgpu_policy_reloads_total") == 2, what="one load per worker"
        )

        volume.write(BROKEN)
        wait_for(
            lambda: metric(server, "lwgpu_policy_reload_failures_total") == 2,
            what="both workers failing",
        )
        assert {profile_of(server) for _ in range(6)} == {"GRID-P4-2Q"}
        assert server.get("/readyz")[0] == 200

        fixed_at = time.monotonic()
        volume.write(FOUR_Q)
        wait_for(lambda: profile_of(server) == "GRID-P4-4Q", what="the fixed policy in use")
        first_use = time.monotonic() - fixed_at
        wait_for(
            lambda: metric(server, "lwgpu_policy_reloads_total") == 4, what="both workers reloaded"
        )
        all_workers = time.monotonic() - fixed_at
        assert {profile_of(server) for _ in range(6)} == {"GRID-P4-4Q"}
        assert metric(server, "lwgpu_policy_generation") == 2
    print(
        f"\n{volume_type.__name__}: fixed policy first used after {first_use:.3f}s, "
        f"in every worker after {all_workers:.3f}s"
    )
    assert all_workers < 5


def test_readyz_waits_for_the_first_policy(tmp_path):
    policy = tmp_path / "later.yaml"
    with serving(tmp_path, policy) as server:
        assert server.get("/readyz")[0] == 503
        assert server.review("mutate", REVIEW)[0] == 503
        policy.write_text(TWO_Q)
        wait_for(lambda: server.get("/readyz")[0] == 200, what="/readyz after the policy appeared")
        # /readyz spoke for one worker; with SO_REUSEPORT the next connection may reach the
        # other, which loads on its own poll. The fleet's oldest generation says both loaded.
        wait_for(lambda: metric(server, "lwgpu_policy_generation") == 1, what="both workers")
        assert profile_of(server) == "GRID-P4-2Q"
