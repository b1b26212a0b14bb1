"""The chart's `policy` value. Not set (null), the webhook serves the shipped policy and nothing
checks it at install. Set but empty (an empty `--set-file`), the render fails instead of
installing the shipped policy unasked. Set, a pre-install,pre-upgrade hook runs the image's own
`python -m webhook policy check` on exactly what the webhook will serve, before anything is
installed or changed (tests/cluster/test_helm_policy_check.py runs `helm install` through it
on the real apiserver).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import helm
from tests.support.paths import EXAMPLE_POLICIES
from webhook.api.types import KubeObject

POLICY_FILE = EXAMPLE_POLICIES / "mixed-fleet.yaml"
HOOK = "helm.sh/hook"


def by_name(objects: list[KubeObject]) -> dict[tuple[str, str], KubeObject]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def hooks(objects: list[KubeObject]) -> dict[tuple[str, str], KubeObject]:
    """The render's hook objects, by (kind, name)."""
    return by_name([o for o in objects if HOOK in (o["metadata"].get("annotations") or {})])


@pytest.mark.parametrize("text", ["", "\n  \n"], ids=["empty", "blank"])
def test_a_policy_set_but_empty_fails_the_render(helm_bin: Path, tmp_path: Path, text: str) -> None:
    given = tmp_path / "policy.yaml"
    given.write_text(text)
    done = helm.helm(
        "template", helm.RELEASE, str(helm.CHART), *helm.REQUIRED, "--set-file", f"policy={given}",
        check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    assert (
        "policy is set but empty (an empty file given to --set-file policy=...?): give"
        " LightweightGPUPolicy YAML (docs/POLICY.md), or leave policy unset for the shipped"
        " policies/default.yaml"
    ) in done.stderr


def test_no_policy_renders_no_check(helm_bin: Path) -> None:
    assert hooks(helm.template()) == {}


def test_a_policy_is_checked_by_a_hook_before_install_and_upgrade(helm_bin: Path) -> None:
    objects = helm.template("--set-file", f"policy={POLICY_FILE}")
    found = hooks(objects)
    assert set(found) == {("ConfigMap", "lwgpu-policy-check"), ("Job", "lwgpu-policy-check")}
    policy, job = found["ConfigMap", "lwgpu-policy-check"], found["Job", "lwgpu-policy-check"]
    for obj in (policy, job):
        annotations = obj["metadata"]["annotations"]
        assert annotations[HOOK] == "pre-install,pre-upgrade"
        deleted = annotations["helm.sh/hook-delete-policy"]
        assert deleted == "before-hook-creation,hook-succeeded,hook-failed"
    weights = [int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in (policy, job)]
    assert weights[0] < weights[1]  # the ConfigMap exists before the Job mounts it
    assert job["metadata"]["annotations"]["helm.sh/hook-output-log-policy"] == "hook-failed"
    # What it checks is what the webhook will serve.
    served = by_name(objects)["ConfigMap", "lwgpu-policies"]["data"]
    assert policy["data"] == served == {"default.yaml": POLICY_FILE.read_text(encoding="utf-8")}
    assert job["spec"]["backoffLimit"] == 0


def test_the_check_runs_the_webhooks_image_and_loader_on_the_mounted_policy(
    helm_bin: Path,
) -> None:
    objects = helm.template("--set-file", f"policy={POLICY_FILE}")
    pod = hooks(objects)["Job", "lwgpu-policy-check"]["spec"]["template"]["spec"]
    webhook = by_name(objects)["Deployment", "lwgpu-webhook"]["spec"]["template"]["spec"]
    [check], served = pod["containers"], webhook["containers"][0]
    assert [*check["command"], *check["args"]] == [
        *("python", "-m", "webhook", "policy", "check", "/etc/lwgpu/policies"),
    ]
    assert served["args"][served["args"].index("--policies") + 1] == "/etc/lwgpu/policies"
    for key in ("image", "imagePullPolicy", "securityContext"):
        assert check[key] == served[key]
    assert check["volumeMounts"] == [
        {"name": "policies", "mountPath": "/etc/lwgpu/policies", "readOnly": True}
    ]
    assert pod["volumes"] == [{"name": "policies", "configMap": {"name": "lwgpu-policy-check"}}]
    assert {k: v for k, v in webhook["securityContext"].items() if k != "fsGroup"} == pod[
        "securityContext"
    ]
    assert (pod["restartPolicy"], pod["automountServiceAccountToken"]) == ("Never", False)


def test_no_hooks_leaves_the_check_out_and_the_policy_in(helm_bin: Path) -> None:
    objects = helm.template("--set-file", f"policy={POLICY_FILE}", "--no-hooks")
    assert hooks(objects) == {}
    assert ("ConfigMap", "lwgpu-policies") in by_name(objects)
