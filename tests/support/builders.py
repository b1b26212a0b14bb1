"""Small helpers shared by the decision, patch, corpus, schema and CLI tests.

- the real manifests of `../shared/corpus/` and of `examples/`,
- the shipped policy and small in-memory policies,
- builders for pods, workloads and AdmissionReview envelopes,
- running `python -m webhook ...` in-process, and golden-file comparison.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import io
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from webhook import DEFAULT_POLICIES, cli
from webhook.api.workload import TEMPLATE_PATHS
from webhook.offline.manifests import Document, read_documents
from webhook.policy import Policy, PolicyError, PolicySet, load_documents, load_policies

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus"
EXAMPLES = REPO / "examples"
GOLDEN = REPO / "tests" / "golden"
UPDATE_GOLDEN = "LWGPU_UPDATE_GOLDEN"

# (apiVersion, kind) of every kind that carries a pod template, from the decision's own table.
WORKLOAD_KINDS = tuple((f"{group}/v1" if group else "v1", kind) for group, kind in TEMPLATE_PATHS)


def corpus_files() -> list[Path]:
    """Every manifest file of the shared corpus (its SOURCES.md is prose, not a manifest)."""
    return sorted(p for p in CORPUS.iterdir() if p.is_file() and p.name != "SOURCES.md")


def documents(path: Path) -> list[Document]:
    """The documents of one file, read exactly as `webhook review` reads them."""
    return read_documents([str(path)])


def named_documents(paths: list[Path]) -> list[tuple[str, Any]]:
    """(`file#index`, body) of every document of `paths`, for test ids."""
    return [(doc.where.rsplit("/", 1)[-1], doc.body) for path in paths for doc in documents(path)]


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
def tainted_policy() -> Policy:
    """A policy whose one class sits on tainted nodes: rewritten pods get tolerations."""
    return policy_from_yaml(TAINTED_POLICY_YAML)


def container(
    name: str = "cuda", limits: dict | None = None, requests: dict | None = None, **extra: Any
) -> dict:
    """A container; `limits`/`requests` go under `resources` only when given."""
    resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v is not None}
    return {
        "name": name,
        "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
        **({"resources": resources} if resources else {}),
        **extra,
    }


def pod(
    *containers: dict,
    init: tuple[dict, ...] = (),
    annotations: dict | None = None,
    node_selector: dict | None = None,
    name: str = "gpu",
    **spec: Any,
) -> dict:
    """A Pod manifest; with no containers it gets one asking `aliyun.com/gpu-mem: 2`."""
    body: dict[str, Any] = {
        "containers": list(containers) or [container(limits={"aliyun.com/gpu-mem": 2})]
    }
    if init:
        body["initContainers"] = list(init)
    if node_selector is not None:
        body["nodeSelector"] = node_selector
    body.update(spec)
    metadata: dict[str, Any] = {"name": name}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def workload(api_version: str, kind: str, template_pod: dict, name: str = "gpu") -> dict:
    """`template_pod`'s metadata and spec as the pod template of a workload of `kind`."""
    if kind == "Pod":
        return template_pod
    template = {k: v for k, v in template_pod.items() if k in ("metadata", "spec")}
    template["metadata"] = {k: v for k, v in template.get("metadata", {}).items() if k != "name"}
    selector = {"matchLabels": {"app": name}}
    if kind == "CronJob":
        spec: dict[str, Any] = {
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": template}},
        }
    elif kind == "ReplicationController":
        spec = {"selector": {"app": name}, "template": template}
    elif kind == "Job":
        spec = {"template": template}
    else:
        spec = {"selector": selector, "template": template}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


def admission_review(
    obj: Any,
    *,
    operation: str = "CREATE",
    namespace: str = "default",
    uid: str | None = None,
    dry_run: bool = False,
) -> dict:
    """An `admission.k8s.io/v1` AdmissionReview request for `obj`, as the apiserver sends it."""
    api_version = obj.get("apiVersion", "v1") if isinstance(obj, dict) else "v1"
    kind = obj.get("kind", "Pod") if isinstance(obj, dict) else "Pod"
    group, _, version = str(api_version).rpartition("/")
    request = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": str(kind).lower() + "s"},
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin"},
        "object": obj,
        "oldObject": obj if operation == "UPDATE" else None,
        "dryRun": dry_run,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def run_cli(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    """Run `python -m webhook *argv` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(argv))
            except SystemExit as stop:  # argparse reports usage errors this way
                code = stop.code if isinstance(stop.code, int) else 2
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def check_golden(path: Path, actual: str) -> None:
    """Compare `actual` with the golden file; rewrite it instead when LWGPU_UPDATE_GOLDEN=1."""
    if os.environ.get(UPDATE_GOLDEN) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing; run with {UPDATE_GOLDEN}=1 to create it"
    expected = path.read_text(encoding="utf-8")
    # helpers is not a test module, so pytest does not rewrite this assert: show the diff here.
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(True), actual.splitlines(True), str(path.name), "actual", n=1
        )
    )
    assert actual == expected, (
        f"{path.name} differs; review the change, then run with {UPDATE_GOLDEN}=1 to accept "
        f"it:\n{diff[:6000]}"
    )
