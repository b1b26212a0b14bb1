"""The policies the tests decide with: the shipped `policies/default.yaml` (loaded once), a
policy whose one class sits on tainted nodes, and any policy written inline as YAML.
"""

from __future__ import annotations

import functools

from webhook import DEFAULT_POLICIES
from webhook.files import load_policies
from webhook.policy import Policy, PolicyError, PolicySet, load_documents

TAINTED_POLICY_YAML = """\
apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: tainted}
spec:
  profiles:
  - name: T4-4Q
    memory: 4Gi
    nodeSelector: {example.com/gpu-class: t4-4q, aliyun.accelerator/nvidia_mem: 4096MiB}
    tolerations:
    - {key: example.com/lightweight-gpu, operator: Exists, effect: NoSchedule}
    - {key: example.com/spot, operator: Equal, value: "true", effect: NoExecute,
       tolerationSeconds: 300}
"""


@functools.cache
def default_policies() -> PolicySet:
    """The shipped `policies/default.yaml`."""
    return load_policies(DEFAULT_POLICIES)


def default_policy() -> Policy:
    """The shipped policy as it governs namespace `default`."""
    policy = default_policies().for_namespace("default")
    assert policy is not None, "the shipped policy must govern namespace default"
    return policy


def policy_from_yaml(text: str) -> Policy:
    """One policy from YAML text; raise `PolicyError` when it is invalid."""
    errors: list[str] = []
    policies = load_documents(text, "<test>", errors)
    if errors:
        raise PolicyError(errors)
    return policies[0]


@functools.cache
def tainted_policy() -> Policy:
    """A policy whose one class sits on tainted nodes: rewritten pods get tolerations."""
    return policy_from_yaml(TAINTED_POLICY_YAML)
