"""Rewritten objects are valid Kubernetes objects: they pass the strict OpenAPI schema.

`kubernetes-validate` checks each object against the published schema of a recent
Kubernetes release in strict mode (unknown fields are errors), which is what
`kubectl apply --validate=strict` would do before the object ever reaches the
webhook. Objects come from the corpus, the examples and small hand-built cases,
rewritten under the shipped policy and under a policy that adds tolerations.
"""

from __future__ import annotations

import kubernetes_validate
import pytest

from tests.support.builders import WORKLOAD_KINDS, container, pod, workload
from tests.support.manifests import corpus_files, named_documents
from tests.support.paths import EXAMPLES
from tests.support.policies import default_policy, tainted_policy
from webhook.api.workload import dig
from webhook.core.decision import decide

KUBERNETES_VERSION = "1.33"
POLICIES = {"default": default_policy(), "tainted": tainted_policy()}
BUILT = {
    "annotation": pod(
        container(limits={"cpu": "1"}), annotations={"lwgpu.io/gpu-memory": "1536Mi"}
    ),
    "requests-and-limits": pod(
        container(
            limits={"nvidia.com/gpumem": "3000"}, requests={"nvidia.com/gpumem": 3000, "cpu": "1"}
        )
    ),
    "sidecar": pod(
        container("app"),
        init=(container("gpu-proxy", limits={"aliyun.com/gpu-mem": 1}, restartPolicy="Always"),),
    ),
    "resources-null-annotation": pod(
        container(resources=None), annotations={"lwgpu.io/gpu-memory": "2Gi"}
    ),
    **{kind: workload(api, kind, pod()) for api, kind in WORKLOAD_KINDS},
}


def _sources() -> list[tuple[str, dict]]:
    found = named_documents(corpus_files() + sorted(EXAMPLES.glob("*.y*ml")))
    return found + [(f"built:{name}", obj) for name, obj in BUILT.items()]


REWRITTEN = [
    pytest.param(decision.obj, decision.path, id=f"{name}@{policy_name}")
    for name, obj in _sources()
    for policy_name, policy in POLICIES.items()
    if (decision := decide(obj, policy)).outcome == "mutated"
]


def test_there_are_rewrites_to_validate():
    """Corpus, examples and built cases give rewrites of every workload kind under both policies."""
    ids = [p.id for p in REWRITTEN]
    assert any(i.endswith("@tainted") for i in ids) and any(
        i.startswith("cuda-sample-gpu-mem") for i in ids
    )
    assert len(ids) >= 2 * len(WORKLOAD_KINDS) + 6


def _validate(obj: dict) -> None:
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        pytest.fail(f"{obj.get('kind')}: {'.'.join(map(str, err.path))}: {err.message}")


@pytest.mark.parametrize(("obj", "path"), REWRITTEN)
def test_rewritten_object_matches_the_kubernetes_schema(obj, path):
    """The rewritten object validates strictly against the Kubernetes OpenAPI schema.

    An API version the schema set no longer has (the corpus holds an
    `apps/v1beta1` StatefulSet) still gets its rewritten pod template checked,
    as the `template` of a core/v1 PodTemplate.
    """
    try:
        _validate(obj)
    except kubernetes_validate.SchemaNotFoundError:
        template = dig(obj, path)
        if not path or not isinstance(template, dict):
            pytest.skip(
                f"kubernetes-validate {KUBERNETES_VERSION} has no schema for "
                f"{obj.get('apiVersion')} {obj.get('kind')} (a custom resource)"
            )
        _validate(
            {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": "rewritten"},
                "template": template,
            }
        )
