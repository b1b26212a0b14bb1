"""Every `review --output` format on one mixed input set, and what real tools make of them.

The set is what a CI job meets: a manifest file, a directory holding a Helm template that
is not YAML beside a manifest, an AdmissionReview, a `kind: List` and standard input. The
complete outputs are golden files (`tests/golden/review/mixed-FORMAT.txt`). Real `kubectl`
reads `-o yaml` back and applies it (a client dry run against the session's real
kube-apiserver, `control_plane`), and real `patch` applies `-o diff` to reproduce `-o yaml`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile

import pytest
import yaml

from tests.offline.junit_schema import check_junit
from tests.support.builders import admission_review, container, pod, workload
from tests.support.cli import run_cli
from tests.support.golden import check_golden
from tests.support.kubectl import KUBECTL, requires_kubectl
from tests.support.manifests import corpus_files, documents
from tests.support.paths import EXAMPLES, GOLDEN
from webhook.api.decoding import as_decoded
from webhook.offline.yaml_output import dump_manifest

TWO_GPUS = pod(
    container(limits={"nvidia.com/gpu": 2}),
    name="two-gpus",
    node_selector={"aliyun.accelerator/nvidia_mem": "2048MiB"},
)
HAMI = pod(container(limits={"nvidia.com/gpumem": 3000}), name="hami")
PLAIN = pod(container(limits={"cpu": 1}), name="plain")
CRONJOB = workload("batch/v1", "CronJob", pod(), name="nightly")
UID = "b9a1c0de-0000-4000-8000-000000000002"
PATCH = shutil.which("patch")


def mixed_inputs(root) -> tuple[list[str], str]:
    """(arguments, stdin) of the mixed set, written under `root` with relative names."""
    shutil.copy(EXAMPLES / "cuda-sample-gpu-mem.yaml", root / "deploy.yaml")
    (root / "chart").mkdir()
    (root / "chart" / "a-template.yaml").write_text("{{ .Values.pod }}: [\n", encoding="utf-8")
    (root / "chart" / "b-pod.yaml").write_text(yaml.safe_dump(TWO_GPUS), encoding="utf-8")
    (root / "review.json").write_text(json.dumps(admission_review(HAMI, uid=UID)), encoding="utf-8")
    listed = {"apiVersion": "v1", "kind": "List", "items": [CRONJOB, PLAIN]}
    (root / "list.yaml").write_text(yaml.safe_dump(listed), encoding="utf-8")
    stdin = yaml.safe_dump(HAMI)
    return ["deploy.yaml", "chart", "review.json", "list.yaml", "-"], stdin


@pytest.mark.parametrize("fmt", ["json", "yaml", "patch", "diff", "junit"])
def test_mixed_inputs_golden(fmt, tmp_path, monkeypatch):
    """Each format on the mixed set: every readable document reviewed and printed, the
    unreadable template reported on stderr, exit 2; stdout and stderr equal the golden file."""
    monkeypatch.chdir(tmp_path)
    argv, stdin = mixed_inputs(tmp_path)
    code, out, err = run_cli("review", *argv, "-o", fmt, stdin=stdin)
    assert code == 2
    assert "error: chart/a-template.yaml: line 2: not valid YAML" in err
    if fmt == "junit":
        check_junit(out)
    text = (
        f"$ python -m webhook review {' '.join(argv)} -o {fmt}\nexit {code}\n"
        f"--- stdout\n{out}--- stderr\n{err}"
    )
    check_golden(GOLDEN / "review" / f"mixed-{fmt}.txt", text)


def test_json_has_one_verdict_shape_for_every_input(tmp_path, monkeypatch):
    """One verdict per object with the same keys whatever the input; an AdmissionReview's
    verdict also holds the server's response."""
    monkeypatch.chdir(tmp_path)
    argv, stdin = mixed_inputs(tmp_path)
    found = json.loads(run_cli("review", *argv, "-o", "json", stdin=stdin)[1])
    assert [v["where"] for v in found] == [
        "deploy.yaml#0",
        "chart/b-pod.yaml#0",
        "review.json#0",
        "list.yaml#0.items[0]",
        "list.yaml#0.items[1]",
        "<stdin>#0",
    ]
    assert {frozenset(v) - {"response"} for v in found} == {frozenset(found[0])}
    assert [v for v in found if "response" in v] == [found[2]]
    assert found[2]["response"]["response"]["uid"] == UID


def test_yaml_of_an_admission_review_is_the_admitted_object():
    """`-o yaml` of an AdmissionReview prints its request.object as admitted, as --help says."""
    body = admission_review(HAMI, uid=UID)
    code, out, _ = run_cli("review", "-", "-o", "yaml", stdin=json.dumps(body))
    assert code == 0
    admitted = yaml.safe_load(out)
    assert admitted["kind"] == "Pod"
    assert admitted["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def corpus_outputs(fmt: str) -> str:
    """`review -o FMT` of the whole shared corpus (stdout)."""
    files = [str(p) for p in corpus_files()]
    code, out, err = run_cli("review", *files, "-o", fmt)
    assert code in (0, 1), err
    return out


@pytest.mark.skipif(PATCH is None, reason="patch(1) is not installed")
def test_diff_applied_with_patch_reproduces_yaml(tmp_path):
    """For every rewritten corpus object, `patch` applies its `-o diff` to the object as the
    apiserver hands it to the webhook (decoded, written as `-o yaml` writes objects) and yields
    exactly its `-o yaml` document."""
    files = corpus_files()
    verdicts = json.loads(run_cli("review", *map(str, files), "-o", "json")[1])
    shown = corpus_outputs("yaml").split("\n---\n")
    sources = {doc.where: doc.body for path in files for doc in documents(path)}
    diffs = corpus_outputs("diff").split("diff -u -N ")[1:]
    mutated = [(i, v) for i, v in enumerate(verdicts) if v["outcome"] == "mutated"]
    assert len(diffs) == len(mutated) >= 5
    for (index, verdict), diff in zip(mutated, diffs, strict=True):
        where = verdict["where"]
        before = tmp_path / "before.yaml"
        before.write_text(dump_manifest(as_decoded(sources[where])), encoding="utf-8")
        done = subprocess.run(
            [PATCH, "-s", "-o", str(tmp_path / "after.yaml"), str(before)],
            input="diff -u -N " + re.split("^# lwgpu: denied", diff, flags=re.MULTILINE)[0],
            text=True,
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, (where, done.stdout, done.stderr)
        shown_doc = shown[index].removeprefix("---\n")
        assert (tmp_path / "after.yaml").read_text(encoding="utf-8").strip() == shown_doc.strip()


def kubectl(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """The real kubectl with `args`, reading `stdin`, never a real cluster's config."""
    assert KUBECTL is not None
    # kubectl caches discovery under $HOME/.kube/cache: with no HOME that is ./.kube in the
    # checkout, so each call gets a home of its own that is removed after it.
    with tempfile.TemporaryDirectory() as home:
        return subprocess.run(
            [KUBECTL, *args],
            input=stdin,
            text=True,
            capture_output=True,
            timeout=60,
            check=False,
            env={"PATH": "/usr/bin:/bin", "KUBECONFIG": "/dev/null", "HOME": home},
        )


@requires_kubectl
def test_kubectl_reads_every_yaml_object():
    """kubectl's own decoder (`kubectl patch --local`, no server) reads every document of the
    corpus's `-o yaml` back as the object it was; denial comments are skipped."""
    out = corpus_outputs("yaml")
    expected = [d for d in yaml.safe_load_all(out) if d is not None]
    done = kubectl(
        "patch", "--local", "-f", "-", "--type", "merge", "-p", "{}", "-o", "json", stdin=out
    )
    assert done.returncode == 0, done.stderr
    decoded = json.loads("[" + done.stdout.replace("}\n{", "},\n{") + "]")
    assert len(decoded) == len(expected)


# The corpus's kinds that kubectl cannot map on a current apiserver, and why: the first three
# API versions are no longer served (https://kubernetes.io/docs/reference/using-api/
# deprecation-guide/: apps/v1beta1 since v1.16, policy/v1beta1 and batch/v1beta1 since v1.25),
# the last is a Volcano custom resource whose CRD is not installed. kubectl refuses each with
# the RESTMapper's `NoKindMatchError` (k8s.io/apimachinery, pkg/api/meta/errors.go).
UNSERVED = {
    ("apps/v1beta1", "StatefulSet"): "removed in Kubernetes 1.16",
    ("policy/v1beta1", "PodDisruptionBudget"): "removed in Kubernetes 1.25",
    ("batch/v1beta1", "CronJob"): "removed in Kubernetes 1.25",
    ("batch.volcano.sh/v1alpha1", "Job"): "custom resource without its CRD",
}
NO_MATCH = re.compile(r'no matches for kind "([^"]+)" in version "([^"]+)"')
CREATED = re.compile(r"^[a-z.]+/(\S*) created \(dry run\)$", re.MULTILINE)


def test_kubectl_apply_dry_run_accepts_every_yaml_object(control_plane):
    """`-o yaml | kubectl apply --dry-run=client -f -` against the real kube-apiserver: kubectl
    maps every object's kind through the server's discovery, GETs the live object (there is
    none, so each is "created") and sends nothing else; every object of a kind the server
    serves is accepted, and only the kinds of `UNSERVED` are refused, for that reason."""
    # The documents exactly as printed (the denial comments are empty documents to kubectl).
    texts = [t for t in corpus_outputs("yaml").split("\n---\n") if yaml.safe_load(t) is not None]
    objects = [yaml.safe_load(t) for t in texts]
    assert {(o["apiVersion"], o["kind"]) for o in objects} >= set(UNSERVED)
    # kubectl apply refuses an object without metadata.name by design ("cannot use generate
    # name with apply": k8s.io/kubectl, pkg/cmd/apply/apply.go, `applyOneObject`): such corpus
    # objects are meant for `kubectl create`, so they go there.
    named = [(t, o) for t, o in zip(texts, objects, strict=True) if o["metadata"].get("name")]
    unnamed = [(t, o) for t, o in zip(texts, objects, strict=True) if (t, o) not in named]
    assert named and unnamed
    for verb, batch in (("apply", named), ("create", unnamed)):
        served = [o for _, o in batch if (o["apiVersion"], o["kind"]) not in UNSERVED]
        refused = {
            (o["kind"], o["apiVersion"])
            for _, o in batch
            if (o["apiVersion"], o["kind"]) in UNSERVED
        }
        done = control_plane.kubectl(
            verb,
            "--dry-run=client",
            "-f",
            "-",
            input="\n---\n".join(t for t, _ in batch),
            check=False,
        )
        assert done.returncode == (1 if refused else 0), (verb, done.stderr)
        # (kubectl names an object without a name `<unknown>` in its message)
        assert sorted(CREATED.findall(done.stdout)) == sorted(
            o["metadata"].get("name") or "<unknown>" for o in served
        ), (verb, done.stdout)
        assert set(NO_MATCH.findall(done.stderr)) == refused, (verb, done.stderr)
