"""Client-side `kubectl apply`; a test double of what it sends.

`k8s.io/kubectl/pkg/cmd/apply` (apply.go `applyOneObject`, patcher.go `Patcher.Patch` ->
`patchSimple`): an object that does not exist is created with its manifest plus the annotation
`kubectl.kubernetes.io/last-applied-configuration` (`util.GetModifiedConfiguration`: the
manifest's JSON, without that annotation, as the annotation's value). One that exists is
patched with the strategic merge patch that
`apimachinery/pkg/util/strategicpatch/patch.go` `CreateThreeWayMergePatch(original, modified,
current)` computes from the last-applied configuration (original), the new manifest with its new
annotation (modified) and the live object (current):

- changes and additions: what differs from current to modified, deletions ignored;
- deletions: what original had and modified has not (a `null`, or `$patch: delete` for an item
  of a merged list), changes and additions ignored;

so a field the last apply wrote and this manifest drops is deleted, a changed field is set,
and a field neither wrote (the webhook's nodeSelector, annotations, nvidia.com/gpu) is kept.
Lists merge item by item on the Go types' `patchMergeKey` (`MERGE_KEYS`: containers by name,
...); any other list (tolerations among them) is atomic and replaced whole. An empty patch sends
nothing. The patch is applied by Kubernetes' own engine (`kubectl patch --local --type
strategic`), then written as the PATCH's UPDATE.

Left out: `$setElementOrder` (new items go last), `$retainKeys`, primitive lists merged by
value (finalizers), pruning, and `--overwrite=false` conflicts.
"""

from __future__ import annotations

import copy
import json
import subprocess

from tests.fakes.apiserver_harness import Result
from tests.fakes.apiserver_store import Store, key_of

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
STRATEGIC_PATCH = ("kubectl", "patch", "--local", "--type", "strategic", "-f", "-", "-p")
# field name -> patchMergeKey, from the `patchStrategy:"merge"` tags of k8s.io/api/core/v1.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
}


def modified_configuration(manifest: dict) -> dict:
    """`GetModifiedConfiguration(obj, annotate=true)`: the manifest with its own JSON as the
    last-applied annotation (Go's encoder: sorted keys, compact, a newline)."""
    manifest = copy.deepcopy(manifest)
    annotations = manifest.setdefault("metadata", {}).get("annotations") or {}
    annotations.pop(LAST_APPLIED, None)
    if annotations:
        manifest["metadata"]["annotations"] = annotations
    else:
        manifest["metadata"].pop("annotations", None)
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":")) + "\n"
    manifest["metadata"]["annotations"] = {**annotations, LAST_APPLIED: text}
    return manifest


def _merge_key(name: str, *lists: object) -> str | None:
    key = MERGE_KEYS.get(name)
    items = [i for each in lists if isinstance(each, list) for i in each]
    return key if key and all(isinstance(i, dict) and key in i for i in items) else None


def _find(items: list, key: str, value: object) -> dict | None:
    return next((i for i in items if i.get(key) == value), None)


def changes(current: dict, modified: dict) -> dict:
    """What goes from `current` to `modified`, deletions ignored (`IgnoreDeletions`)."""
    patch: dict = {}
    for name, value in modified.items():
        if name not in current:
            patch[name] = value
            continue
        now = current[name]
        if isinstance(now, dict) and isinstance(value, dict):
            if sub := changes(now, value):
                patch[name] = sub
        elif key := _merge_key(name, now, value):
            items = []
            for item in value:
                match = _find(now, key, item[key])
                if match is None:
                    items.append(item)
                elif sub := changes(match, item):
                    items.append({key: item[key], **sub})
            if items:
                patch[name] = items
        elif now != value:
            patch[name] = value
    return patch


def deletions(original: dict, modified: dict) -> dict:
    """What `original` has and `modified` has not (`IgnoreChangesAndAdditions`)."""
    patch: dict = {}
    for name, value in original.items():
        if name not in modified:
            patch[name] = None
            continue
        then = modified[name]
        if isinstance(value, dict) and isinstance(then, dict):
            if sub := deletions(value, then):
                patch[name] = sub
        elif key := _merge_key(name, value, then):
            items = []
            for item in value:
                match = _find(then, key, item[key])
                if match is None:
                    items.append({"$patch": "delete", key: item[key]})
                elif sub := deletions(item, match):
                    items.append({key: item[key], **sub})
            if items:
                patch[name] = items
    return patch


def _union(one: dict, other: dict) -> dict:
    """`mergeMaps` of two patches: maps deeply, merged lists item by item."""
    merged = copy.deepcopy(one)
    for name, value in other.items():
        mine = merged.get(name)
        if isinstance(mine, dict) and isinstance(value, dict):
            merged[name] = _union(mine, value)
        elif isinstance(mine, list) and (key := MERGE_KEYS.get(name)):
            for item in value:
                match = _find(mine, key, item[key])
                if match is None:
                    mine.append(item)
                else:
                    mine[mine.index(match)] = _union(match, item)
        else:
            merged[name] = value
    return merged


def three_way_patch(original: dict, modified: dict, current: dict) -> dict:
    """`CreateThreeWayMergePatch(original, modified, current)`."""
    return _union(deletions(original, modified), changes(current, modified))


def strategic_merge(obj: dict, patch: dict) -> dict:
    """`obj` with a strategic merge patch applied by `kubectl patch --local --type strategic`."""
    done = subprocess.run(
        [*STRATEGIC_PATCH, json.dumps(patch), "-o", "json"],
        input=json.dumps(obj),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(done.stdout)


def apply(store: Store, manifest: dict, namespace: str = "default") -> Result | None:
    """`kubectl apply -f manifest`: the create or patch it sends; None when nothing was sent."""
    manifest = copy.deepcopy(manifest)
    manifest.setdefault("metadata", {})["namespace"] = namespace
    modified = modified_configuration(manifest)
    live = store.get(key_of(modified))
    if live is None:
        return store.create(modified, namespace)
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    patch = three_way_patch(json.loads(text) if text else {}, modified, live)
    if not patch:
        return None
    return store.update(strategic_merge(live, patch))
