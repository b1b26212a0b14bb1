"""Profile discovery in the install on the real control plane: the base grants the webhook's
ServiceAccount nothing on Nodes (deploy/base/webhook.yaml), so once a policy that discovers
is rolled out, both containers of each webhook pod say, as an error, which permission is
missing and how to grant it; the discovery option's objects (deploy/components/discovery)
grant it, and both then find the fleet's classes without a restart.

The refusal is kube-apiserver's own: RBAC's "cannot list resource" (staging/src/k8s.io/
apiserver/pkg/endpoints/handlers/responsewriters/errors.go, ForbiddenStatusError) answered to
the inventory's list (webhook/kube/inventory.py), which logs it with the fix
(`FORBIDDEN_FIX`) and retries until RBAC allows. Meanwhile the inventory's age, which the
monitoring option's LwgpuDiscoveryStale alert watches, stays above the alert's threshold, and
falls below it once the grant lets the list through.
"""

from __future__ import annotations

import json
import re

import yaml

from tests.support.paths import DEPLOY, SHIPPED_POLICY
from tools.cluster.install import NAMESPACE
from tools.waiting import wait_for
from webhook.compile.final_state import NAME
from webhook.kube.inventory import FORBIDDEN_FIX

SHIPPED = SHIPPED_POLICY.read_text()
DISCOVERING = SHIPPED.replace("spec:\n", "spec:\n  discoverProfiles: true\n", 1)
GRANT = DEPLOY / "components" / "discovery" / "discovery.yaml"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:lwgpu-webhook"
AGE = "lwgpu_discovery_inventory_age_seconds"
STALE = yaml.safe_load((DEPLOY / "components" / "monitoring" / "prometheusrule.yaml").read_text())
[STALE_EXPR] = [
    r["expr"]
    for g in STALE["spec"]["groups"]
    for r in g["rules"]
    if r["alert"] == "LwgpuDiscoveryStale"
]
# The alert's expression is `max(AGE) > N`: the threshold it fires above.
STALE_AFTER_S = float(re.fullmatch(rf"max\({AGE}\) > (\d+)", STALE_EXPR.strip()).group(1))
REFUSED = f'User "{ACCOUNT}" cannot list resource "nodes" in API group "" at the cluster scope'


def lines(container, text: str) -> list[str]:
    """The lines of a container's log that contain `text`."""
    return [line for line in container.log.read_text().splitlines() if text in line]


def can_list_nodes(plane) -> str:
    """`kubectl auth can-i list nodes` as the webhook's ServiceAccount: yes or no."""
    done = plane.kubectl("auth", "can-i", "list", "nodes", f"--as={ACCOUNT}", check=False)
    return done.stdout.strip()


def stored_check(plane) -> dict:
    """The validations and variables of the final-state check as the apiserver stores it."""
    stored = json.loads(
        plane.kubectl("get", "validatingadmissionpolicy", NAME, "-o", "json").stdout
    )["spec"]
    return {key: stored.get(key) for key in ("validations", "variables")}


def test_a_discovering_policy_without_the_grant_names_it_and_the_grant_fixes_it(lwgpu):
    plane = lwgpu.plane
    assert DISCOVERING != SHIPPED
    assert can_list_nodes(plane) == "no"
    [shipped_check] = [
        doc
        for doc in yaml.safe_load_all((DEPLOY / "base" / "final-state.yaml").read_text())
        if doc and doc["kind"] == "ValidatingAdmissionPolicy"
    ]
    lwgpu.set_policies({"default.yaml": DISCOVERING})
    containers = [(pod.name, c) for pod in lwgpu.webhook for c in pod.containers]
    assert [c.name for _, c in containers] == ["webhook", "policy-sync"] * len(lwgpu.webhook)
    try:
        for pod, container in containers:
            wait_for(
                lambda c=container: lines(c, REFUSED),
                timeout=60,
                what=f"{pod}/{container.name} to name the missing permission",
            )
            said = lines(container, REFUSED)[0]
            assert "[ERROR]" in said and FORBIDDEN_FIX in said, said
        ages = [lwgpu.metric(pod, AGE) for pod in lwgpu.webhook]
        assert all(age > STALE_AFTER_S for age in ages), ages  # +Inf: never listed

        plane.kubectl("apply", "--server-side", "-f", str(GRANT))
        wait_for(lambda: can_list_nodes(plane) == "yes", timeout=60, what="the grant")
        for pod, container in containers:
            # Each inventory retries with backoff (at most 30 s apart) and says when it lists.
            wait_for(
                lambda c=container: lines(c, "answers again"),
                timeout=90,
                what=f"{pod}/{container.name} to list the Nodes once granted",
            )
        ages = [lwgpu.metric(pod, AGE) for pod in lwgpu.webhook]
        assert all(age < STALE_AFTER_S for age in ages), ages
    finally:
        plane.kubectl("delete", "--ignore-not-found", "-f", str(GRANT))
        lwgpu.set_policies({"default.yaml": SHIPPED})
        # The sidecars put the shipped policy's check back (other tests rely on it).
        wanted = {key: shipped_check["spec"].get(key) for key in ("validations", "variables")}
        wait_for(lambda: stored_check(plane) == wanted, timeout=60, what="the shipped check")
