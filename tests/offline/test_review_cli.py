"""`python -m webhook review`: inputs, output formats and exit codes (SPEC §5).

Exit 0 when every object is allowed, 1 when any is denied, 2 for unreadable input
or a usage error, with the message on stderr. A few complete outputs are kept in
`tests/golden/review/` (regenerate with LWGPU_UPDATE_GOLDEN=1 and review the diff).
"""

from __future__ import annotations

import base64
import io
import json

import pytest
import yaml

from tests.support.builders import admission_review, container, pod, workload
from tests.support.cli import run_cli
from tests.support.golden import check_golden
from tests.support.paths import EXAMPLES, GOLDEN, REPO
from tests.support.policies import default_policies, default_policy
from webhook.admission import parse_request, review
from webhook.api.decoding import as_decoded
from webhook.cli import main
from webhook.core.decision import decide

SEED = EXAMPLES / "cuda-sample.yaml"
GPU_MEM = EXAMPLES / "cuda-sample-gpu-mem.yaml"
TWO_GPUS = pod(
    container(limits={"nvidia.com/gpu": 2}),
    name="two-gpus",
    node_selector={"aliyun.accelerator/nvidia_mem": "2048MiB"},
)
HAMI = pod(container(limits={"nvidia.com/gpumem": 3000}), name="hami")
# HAMI as the apiserver stores it: it reached the webhook as `3k`, in limits and (defaulted)
# requests; the webhook rewrote both.
HAMI_STORED = pod(
    container(limits={"nvidia.com/gpu": "1"}, requests={"nvidia.com/gpu": "1"}),
    name="hami",
    annotations={
        "lwgpu.io/profile": "GRID-P4-4Q",
        "lwgpu.io/rewritten-from": "nvidia.com/gpumem=3000",
    },
    nodeSelector={"aliyun.accelerator/nvidia_mem": "4096MiB"},
)
CRONJOB = workload("batch/v1", "CronJob", pod(), name="nightly")
UID = "b9a1c0de-0000-4000-8000-000000000001"


def dump_all(*objects: object) -> str:
    """Objects as one multi-document YAML text."""
    return yaml.safe_dump_all(objects, sort_keys=False)


def test_seed_is_allowed_unchanged():
    """The seed Deployment: exit 0, printed back unchanged."""
    code, out, err = run_cli("review", str(SEED))
    assert (code, err) == (0, "")
    assert yaml.safe_load(out) == yaml.safe_load(SEED.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("stdin", "code"),
    [
        (dump_all(HAMI), 0),
        (dump_all(TWO_GPUS), 1),
        (dump_all(HAMI, TWO_GPUS), 1),
        (json.dumps(admission_review(TWO_GPUS, uid=UID)), 1),
        (json.dumps(admission_review(HAMI, uid=UID)), 0),
    ],
    ids=["mutated", "denied", "mutated-and-denied", "review-denied", "review-mutated"],
)
def test_exit_code_follows_the_verdicts(stdin, code):
    """0 when everything is allowed (rewritten or not), 1 as soon as one object is denied."""
    assert run_cli("review", "-", stdin=stdin)[0] == code


@pytest.mark.parametrize(
    ("argv", "stdin", "message"),
    [
        # The reason in words, without Python's "[Errno 2] ...: 'missing.yaml'".
        (
            ["review", "missing.yaml"],
            "",
            "error: missing.yaml: cannot read: no such file or directory\n",
        ),
        (["review", "-"], "kind: Pod\nmetadata: x\n  name: y\n", "<stdin>: line 3: not valid YAML"),
        (["review", "-"], "just a string\n", "not an object"),
        (
            ["review", "-"],
            '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
            "AdmissionReview.request must be an object",
        ),
        (["review", str(SEED), "--policies", "no-such-policy.yaml"], "", "cannot load policies"),
        (["review", str(SEED), "--policies", str(SEED)], "", "cannot load policies"),
        (["review", str(SEED), "--no-such-flag"], "", "unrecognized arguments"),
        (["review", str(SEED), "--output", "xml"], "", "invalid choice"),
        (["review", "-"], "", "no objects to review in <stdin>"),
        (["review", "-"], "# only a comment\n---\n", "no objects to review"),
    ],
    ids=[
        "unreadable-file",
        "bad-yaml",
        "not-an-object",
        "bad-review",
        "missing-policy",
        "bad-policy",
        "unknown-flag",
        "unknown-output",
        "empty-stdin",
        "only-comments",
    ],
)
def test_bad_input_and_usage_exit_2(argv, stdin, message, monkeypatch, tmp_path):
    """Unreadable input, bad YAML, a bad policy or a usage error: exit 2, message on stderr."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*argv, stdin=stdin)
    assert code == 2
    assert message in err
    assert out == ""


def test_undecodable_file_exits_2(tmp_path):
    """A file that is not UTF-8 text is unreadable input."""
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00kind: Pod")
    code, _, err = run_cli("review", str(path))
    assert code == 2 and f"{path}: cannot read: not UTF-8 text (byte 0)" in err


@pytest.mark.parametrize("argv", [["review"], ["review", "-"]], ids=["no-path", "dash"])
def test_standard_input(argv):
    """Nothing or `-` reads standard input; the rewritten manifest is printed as YAML."""
    code, out, err = run_cli(*argv, stdin=dump_all(HAMI))
    assert code == 0
    assert yaml.safe_load(out) == HAMI_STORED
    assert "Warning: Pod/default/hami: lwgpu: nvidia.com/gpumem=3000 (3000Mi)" in err


def test_yaml_output_prints_allowed_objects_and_marks_denied_ones():
    """`--output yaml` prints the rewritten or unchanged allowed objects; a denied one leaves a
    comment on stdout in its place, and its denial on stderr."""
    code, out, err = run_cli(
        "review", "-", "--output", "yaml", stdin=dump_all(HAMI, TWO_GPUS, CRONJOB)
    )
    assert code == 1
    assert [d for d in yaml.safe_load_all(out) if d is not None] == [
        HAMI_STORED,
        decide(CRONJOB, default_policy()).obj,
    ]
    assert "# lwgpu: denied, not admitted: <stdin>#1 Pod/default/two-gpus: spec:" in out
    assert "Denied: <stdin>#1 Pod/default/two-gpus: spec: the pod needs 2 GPUs" in err


def verdicts(*argv: str, stdin: str = "") -> list[dict]:
    """The `--output json` verdicts of a manifest review."""
    code, out, err = run_cli("review", *argv, "--output", "json", stdin=stdin)
    assert code in (0, 1), err
    return json.loads(out)


def test_kind_list_and_multi_document_input():
    """`kind: List` items and every YAML document are reviewed, each named by where it was."""
    listed = {"apiVersion": "v1", "kind": "List", "items": [HAMI, CRONJOB]}
    found = verdicts("-", stdin=dump_all(listed, None, TWO_GPUS))
    assert [(v["where"], v["ref"], v["outcome"]) for v in found] == [
        ("<stdin>#0.items[0]", "Pod/default/hami", "mutated"),
        ("<stdin>#0.items[1]", "CronJob/default/nightly", "mutated"),
        ("<stdin>#2", "Pod/default/two-gpus", "denied"),
    ]
    assert found[1]["patch"] == list(decide(CRONJOB, default_policy()).patch)


def test_directory_input(tmp_path):
    """A directory is read recursively: .yaml, .yml and .json files in name order; no others."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.yml").write_text(dump_all(TWO_GPUS), encoding="utf-8")
    (tmp_path / "sub" / "c.json").write_text(json.dumps(CRONJOB), encoding="utf-8")
    (tmp_path / "a.yaml").write_text(dump_all(HAMI), encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a manifest", encoding="utf-8")
    found = verdicts(str(tmp_path))
    assert [(v["where"], v["outcome"]) for v in found] == [
        (f"{tmp_path / 'a.yaml'}#0", "mutated"),
        (f"{tmp_path / 'b.yml'}#0", "denied"),
        (f"{tmp_path / 'sub' / 'c.json'}#0", "mutated"),
    ]


def test_files_of_tools_in_a_directory_are_left_out_with_a_warning(tmp_path):
    """A chart's values.yaml and Chart.yaml and a kustomization.yaml beside the manifests are
    no objects for the cluster: reviewed, they broke `kubectl apply` of review's output."""
    (tmp_path / "a.yaml").write_text(dump_all(HAMI), encoding="utf-8")
    (tmp_path / "values.yaml").write_text("replicaCount: 2\n", encoding="utf-8")
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: x\n", encoding="utf-8")
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
    (tmp_path / "kustomization.yaml").write_text(dump_all(kustomization), encoding="utf-8")
    code, out, err = run_cli("review", str(tmp_path))
    assert code == 0
    assert [doc["metadata"]["name"] for doc in yaml.safe_load_all(out)] == ["hami"]
    left_out = [line for line in err.splitlines() if "left out" in line]
    assert left_out == [
        f"warning: {tmp_path / 'Chart.yaml'}#0: left out: no apiVersion and kind: not a"
        " Kubernetes object",
        f"warning: {tmp_path / 'kustomization.yaml'}#0: left out: a Kustomization of"
        " kustomize.config.k8s.io/v1beta1, read by a tool, not the cluster; `kubectl kustomize"
        " DIR | lwgpu review -` reviews what it builds",
        f"warning: {tmp_path / 'values.yaml'}#0: left out: no apiVersion and kind: not a"
        " Kubernetes object",
    ]


@pytest.mark.parametrize(
    ("objects", "code"), [((HAMI,), 1), ((CRONJOB,), 1), ((TWO_GPUS,), 1), ((HAMI_STORED,), 0)]
)
def test_exit_code_says_whether_anything_would_change(objects, code):
    """`--exit-code`: 1 when an object would be rewritten (or is denied), as `kubectl diff`
    exits 1 when something would change; 0 for objects already in their final form."""
    assert run_cli("review", "-", "-o", "diff", "--exit-code", stdin=dump_all(*objects))[0] == code
    assert run_cli("review", "-", "-o", "diff", stdin=dump_all(*objects))[0] == (
        1 if objects == (TWO_GPUS,) else 0
    )


def test_namespace_flag_governs_manifests_without_one():
    """`--namespace` applies to manifests that name none; kube-system is not governed."""
    assert (
        verdicts("-", "--namespace", "kube-system", stdin=dump_all(HAMI))[0]["outcome"] == "skipped"
    )
    assert (
        verdicts("-", "--namespace", "team-a", stdin=dump_all(HAMI))[0]["ref"] == "Pod/team-a/hami"
    )


@pytest.mark.parametrize(
    "obj", [HAMI, TWO_GPUS, CRONJOB, SEED], ids=["mutated", "denied", "cronjob", "seed"]
)
@pytest.mark.parametrize("encode", [json.dumps, yaml.safe_dump], ids=["json", "yaml"])
def test_admission_review_output_is_the_server_response(obj, encode):
    """For an AdmissionReview, `--output json` prints exactly the response `review` builds."""
    obj = yaml.safe_load(obj.read_text(encoding="utf-8")) if obj is SEED else obj
    body = admission_review(obj, uid=UID)
    code, out, _ = run_cli("review", "-", "--output", "json", stdin=encode(body))
    expected = review(parse_request(body), default_policies(), "mutate").response
    assert json.loads(out) == expected
    assert code == (0 if expected["response"]["allowed"] else 1)
    assert run_cli("review", "-", stdin=encode(body))[1] == out  # json is the default for reviews


def test_several_admission_reviews_print_verdicts_holding_each_response():
    """Two AdmissionReviews in one input print one verdict each, with the server's response."""
    bodies = [admission_review(HAMI, uid="u-1"), admission_review(TWO_GPUS, uid="u-2")]
    code, out, _ = run_cli("review", "-", stdin=dump_all(*bodies))
    assert code == 1
    found = json.loads(out)
    assert [v["response"] for v in found] == [
        review(parse_request(b), default_policies(), "mutate").response for b in bodies
    ]
    assert [v["outcome"] for v in found] == ["mutated", "denied"]


def test_patch_output_has_one_line_per_object():
    """`--output patch`: per line the object, its outcome and its JSON Patch; a denied and an
    unchanged object are told apart by the outcome."""
    objects = [HAMI, TWO_GPUS, CRONJOB, pod(container(limits={"cpu": 1}), name="plain")]
    code, out, _ = run_cli("review", "-", "--output", "patch", stdin=dump_all(*objects))
    assert code == 1
    lines = [json.loads(line) for line in out.splitlines()]
    # The patch the webhook answers for the object the apiserver hands it.
    assert [line["patch"] for line in lines] == [
        list(decide(as_decoded(o), default_policy()).patch) for o in objects
    ]
    assert [(line["where"], line["ref"], line["outcome"]) for line in lines] == [
        ("<stdin>#0", "Pod/default/hami", "mutated"),
        ("<stdin>#1", "Pod/default/two-gpus", "denied"),
        ("<stdin>#2", "CronJob/default/nightly", "mutated"),
        ("<stdin>#3", "Pod/default/plain", "skipped"),
    ]


def test_review_patch_decodes_to_patch_output():
    """The patch inside the AdmissionReview response is the one `--output patch` prints."""
    body = admission_review(CRONJOB, uid=UID)
    answer = json.loads(run_cli("review", "-", stdin=json.dumps(body))[1])["response"]
    patch_line = run_cli("review", "-", "--output", "patch", stdin=json.dumps(body))[1]
    assert json.loads(base64.b64decode(answer["patch"])) == json.loads(patch_line)["patch"]


GOLDEN_CASES = {
    "seed-gpu-mem-yaml": (["examples/cuda-sample-gpu-mem.yaml"], ""),
    "seed-gpu-mem-json": (["examples/cuda-sample-gpu-mem.yaml", "--output", "json"], ""),
    "seed-gpu-mem-patch": (["examples/cuda-sample-gpu-mem.yaml", "--output", "patch"], ""),
    "manifests-mixed-json": (["-", "--output", "json"], dump_all(HAMI, TWO_GPUS, CRONJOB)),
    "admission-review-json": (["-"], json.dumps(admission_review(HAMI, uid=UID))),
    "admission-review-denied": (["-"], yaml.safe_dump(admission_review(TWO_GPUS, uid=UID))),
}


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_golden_output(name, monkeypatch):
    """Exit code, stdout and stderr of a few reviews equal tests/golden/review/NAME.txt."""
    monkeypatch.chdir(REPO)
    argv, stdin = GOLDEN_CASES[name]
    code, out, err = run_cli("review", *argv, stdin=stdin)
    text = (
        f"$ python -m webhook review {' '.join(argv)}\nexit {code}\n"
        f"--- stdout\n{out}--- stderr\n{err}"
    )
    check_golden(GOLDEN / "review" / f"{name}.txt", text)


def test_a_top_level_yaml_sequence_holds_documents_like_a_json_array():
    """`- {...}` lists in YAML are split into documents, as `[...]` is in JSON."""
    as_yaml = yaml.safe_dump([HAMI, TWO_GPUS])
    as_json = json.dumps([HAMI, TWO_GPUS])
    assert (
        run_cli("review", "-", "-o", "json", stdin=as_yaml)[:2]
        == run_cli("review", "-", "-o", "json", stdin=as_json)[:2]
    )
    assert run_cli("review", "-", stdin=as_yaml)[0] == 1


def test_no_argument_on_a_terminal_says_what_it_expects(monkeypatch, capsys):
    """With no path and stdin a terminal, review says what it wants instead of waiting."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal(""))
    assert main(["review"]) == 2
    assert "no manifests given" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", Terminal(""))
    assert main(["review", "-"]) == 2  # `-` reads the terminal as asked: here it is empty
