"""The apply doubles: client-side `kubectl apply` (tests/fakes/kubectl_apply.py: k8s.io/kubectl
pkg/cmd/apply and strategicpatch `CreateThreeWayMergePatch`, applied by kubectl's own strategic
merge engine) and server-side apply (tests/fakes/apiserver_fieldmanager.py: the field manager's
ownership, modelled simply). Cases follow kubectl's documented merge rules ("Merging changes to
primitive fields", "... map fields", "... fields of type list" in the `kubectl apply`
declarative-config docs) and the field manager's (`Apply` conflicts).
"""

from __future__ import annotations

import copy
import json

import pytest

from tests.fakes.apiserver_fieldmanager import (
    Conflict,
    ServerSideApply,
    fields,
    merge_apply,
)
from tests.fakes.apiserver_store import Store
from tests.fakes.kubectl_apply import (
    LAST_APPLIED,
    apply,
    modified_configuration,
    strategic_merge,
    three_way_patch,
)
from tests.support.builders import container, gpu_mem, pod, workload
from tests.support.kubectl import requires_kubectl

MEM, GPU, SELECTOR = "aliyun.com/gpu-mem", "nvidia.com/gpu", "aliyun.accelerator/nvidia_mem"
KEY = ("apps", "Deployment", "default", "gpu")


def deployment(*containers: dict, **spec) -> dict:
    return workload("apps/v1", "Deployment", pod(*containers, **spec))


def template_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def rewritten(obj: dict) -> dict:
    """`obj` as the webhook leaves it: the ask replaced, its selector and a toleration added."""
    obj = copy.deepcopy(obj)
    spec = template_spec(obj)
    spec["containers"][0]["resources"]["limits"] = {GPU: "1"}
    spec["nodeSelector"] = {**spec.get("nodeSelector", {}), SELECTOR: "2048MiB"}
    spec["tolerations"] = [*spec.get("tolerations", []), {"key": "gpu", "operator": "Exists"}]
    return obj


def test_the_last_applied_annotation_holds_the_manifest_itself():
    manifest = deployment(gpu_mem(2))
    modified = modified_configuration(manifest)
    text = modified["metadata"]["annotations"][LAST_APPLIED]
    assert json.loads(text) == manifest and text.endswith("}\n")
    assert modified_configuration(modified) == modified  # the annotation never nests


ORIGINAL = deployment(gpu_mem(2), container("sidecar"), tolerations=[{"operator": "Exists"}])


def edit(change) -> dict:
    obj = copy.deepcopy(ORIGINAL)
    change(obj)
    return obj


# (case, new manifest, what the live (rewritten) object becomes, checked on its template spec)
MERGES = [
    (
        "a changed ask is set, fields neither wrote are kept",
        edit(lambda o: template_spec(o)["containers"][0].update(gpu_mem(4))),
        lambda spec: (
            spec["containers"][0]["resources"]["limits"] == {GPU: "1", MEM: 4}
            and spec["nodeSelector"] == {SELECTOR: "2048MiB"}
        ),
    ),
    (
        "a container the manifest drops is deleted",
        edit(lambda o: template_spec(o)["containers"].pop()),
        lambda spec: [c["name"] for c in spec["containers"]] == ["cuda"],
    ),
    (
        "a field the manifest drops is deleted",
        edit(lambda o: template_spec(o)["containers"][0].pop("image")),
        lambda spec: "image" not in spec["containers"][0],
    ),
    (
        "tolerations are atomic: the manifest's replace the live list",
        edit(lambda o: template_spec(o).update(tolerations=[{"key": "a", "operator": "Exists"}])),
        lambda spec: spec["tolerations"] == [{"key": "a", "operator": "Exists"}],
    ),
    (
        "an added selector key merges with the webhook's",
        edit(lambda o: template_spec(o).update(nodeSelector={"zone": "a"})),
        lambda spec: spec["nodeSelector"] == {"zone": "a", SELECTOR: "2048MiB"},
    ),
]


@requires_kubectl
@pytest.mark.parametrize(("manifest", "holds"), [c[1:] for c in MERGES], ids=[c[0] for c in MERGES])
def test_three_way_merge(manifest, holds):
    original = modified_configuration(ORIGINAL)
    live = rewritten(original)
    patch = three_way_patch(ORIGINAL, modified_configuration(manifest), live)
    assert holds(template_spec(strategic_merge(live, patch)))


def test_the_patch_of_an_unchanged_manifest_touches_only_what_the_manifest_wrote():
    live = rewritten(modified_configuration(ORIGINAL))
    patch = three_way_patch(ORIGINAL, modified_configuration(ORIGINAL), live)
    assert patch == {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "cuda", "resources": {"limits": {MEM: 2}}}],
                    "tolerations": [{"operator": "Exists"}],
                }
            }
        }
    }
    annotation = modified_configuration(ORIGINAL)["metadata"]["annotations"]
    assert three_way_patch(ORIGINAL, modified_configuration(ORIGINAL), ORIGINAL) == {
        "metadata": {"annotations": annotation}
    }


@requires_kubectl
def test_apply_creates_then_patches_and_sends_nothing_when_nothing_changed():
    store = Store()
    created = apply(store, ORIGINAL)
    assert created.allowed and store.requests[-1].operation == "CREATE"
    assert apply(store, ORIGINAL) is None and len(store.requests) == 1
    changed = apply(store, edit(lambda o: o["spec"].update(replicas=3)))
    assert changed.allowed and store.requests[-1].operation == "UPDATE"
    stored = store.get(KEY)
    assert stored["spec"]["replicas"] == 3
    assert json.loads(stored["metadata"]["annotations"][LAST_APPLIED])["spec"]["replicas"] == 3


def test_server_side_fields_are_leaves_and_list_items():
    found = fields(deployment(gpu_mem(2)))
    containers = ("spec", "template", "spec", "containers", ("name", "cuda"))
    assert containers in found
    assert (*containers, "resources", "limits", MEM) in found
    assert ("spec", "template", "spec", "containers") not in found


APPLIED = deployment(gpu_mem(2), container("sidecar"))


def test_server_side_apply_removes_only_what_the_manager_owned():
    live = rewritten(APPLIED)
    config = copy.deepcopy(APPLIED)
    template_spec(config)["containers"] = [gpu_mem(4)]
    spec = template_spec(merge_apply(live, config, fields(APPLIED), {}))
    assert [c["name"] for c in spec["containers"]] == ["cuda"]  # owned and dropped: removed
    assert spec["containers"][0]["resources"]["limits"] == {GPU: "1", MEM: 4}
    assert spec["nodeSelector"] == {SELECTOR: "2048MiB"}  # owned by no manager: kept


def test_server_side_apply_keeps_a_field_another_manager_owns_and_conflicts_on_changing_it():
    live = copy.deepcopy(APPLIED)
    live["spec"]["replicas"] = 5
    owned = fields(APPLIED) | {("spec", "replicas")}
    kept = merge_apply(live, APPLIED, owned, {"hpa": {("spec", "replicas")}})
    assert kept["spec"]["replicas"] == 5
    config = copy.deepcopy(APPLIED)
    config["spec"]["replicas"] = 2
    with pytest.raises(Conflict, match=r'1 conflict.*"hpa": \.spec\.replicas'):
        merge_apply(live, config, owned, {"hpa": {("spec", "replicas")}})
    forced = merge_apply(live, config, owned, {"hpa": {("spec", "replicas")}}, force=True)
    assert forced["spec"]["replicas"] == 2


def test_server_side_apply_creates_then_updates_through_the_store():
    store = Store()
    ssa = ServerSideApply(store)
    assert ssa.apply(APPLIED).allowed and store.requests[-1].operation == "CREATE"
    config = copy.deepcopy(APPLIED)
    template_spec(config)["containers"][0] = gpu_mem(4)
    assert ssa.apply(config).allowed and store.requests[-1].operation == "UPDATE"
    limits = template_spec(store.get(KEY))["containers"][0]["resources"]["limits"]
    assert limits == {MEM: 4}
    cuda = ("spec", "template", "spec", "containers", ("name", "cuda"))
    assert cuda in ssa.managers[KEY]["kubectl"]
