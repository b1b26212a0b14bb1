"""YAML as the real kubectl reads it: `review -o yaml` reads back exactly as it was written, and
`review` of a YAML manifest predicts what the real kube-apiserver makes of it.

kubectl reads every file through its resource builder (k8s.io/cli-runtime, pkg/resource/
visitor.go, `StreamVisitor.Visit`: `yaml.NewYAMLOrJSONDecoder`), which turns YAML into JSON
with sigs.k8s.io/yaml and so types plain scalars by go-yaml v2's rules (go.yaml.in/yaml/v2,
resolve.go, `resolve`), not PyYAML's. So a string that Go would read as a number, boolean or
null must be quoted, or `review -o yaml | kubectl apply -f -` changes env values and ConfigMap
data; and a manifest `review` reads with PyYAML can mean something else to the cluster.

Every reading here is the real kubectl's, on the session's real control plane:
`kubectl create --dry-run=client -o json` maps kinds through the server's discovery, sends
nothing and prints each object as it decoded it; `--dry-run=server` (with lwgpu installed)
shows what the apiserver and lwgpu's webhook make of it, stored nowhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.builders import container, pod
from tests.support.cli import run_cli
from tests.support.paths import SHIPPED_POLICY
from webhook.offline.yaml_output import dump_all
from webhook.policy.yamldocs import YamlError, load_all

# Scalars every YAML reader disagrees on, then generated ones of the same shapes.
TRICKY = [
    "1e-4",
    "1e5",
    "3e-5",
    "1E10",
    ".5",
    "5.",
    "0x1p3",
    "0o17",
    "0b1",
    "1_000",
    "017",
    "08",
    "1e400",
    "y",
    "n",
    "Y",
    "on",
    "Off",
    "NO",
    "true",
    "~",
    "null",
    "",
    ".inf",
    "-.Inf",
    ".NaN",
    "+inf",
    "-nan",
    "2024-01-02",
    "2024-01-02T10:00:00Z",
    "1:20",
    "-f",
    "<<",
    "12:30:45",
    "1.2.3",
    "v1",
    "0",
    "-0",
    "+1",
    "0.0.0.0",
    "nvidia.com/gpu",
    "#x",
    "a: b",
    "- x",
]
NUMBERS = st.from_regex(
    r"\A[-+]?([0-9_]{1,4}(\.[0-9_]{0,3})?|\.[0-9]{1,3})([eE][-+]?[0-9]{1,2})?\Z"
)
SCALARS = st.one_of(st.sampled_from(TRICKY), NUMBERS, st.text(max_size=12))
# Integers within int64: kubectl decodes a larger one as a float64 however it is written
# (k8s.io/apimachinery, pkg/util/json/json.go, `convertNumber`), so no quoting can keep it.
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
VALUES = st.recursive(
    SCALARS | INT64 | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SCALARS, inner, max_size=3),
    max_leaves=12,
)
HEAD = ("apiVersion", "kind", "metadata")
# Each generated mapping is the body of an object kubectl can map: a ConfigMap whose other
# top-level fields a client dry run prints as read (it validates nothing: nothing is sent).
BODIES = st.dictionaries(SCALARS.filter(lambda key: key not in HEAD), VALUES, max_size=6)


def as_objects(bodies: list[dict]) -> list[dict]:
    """Each body as the top level of a ConfigMap kubectl can map (named unlike `y`: a bool)."""
    head = {"apiVersion": "v1", "kind": "ConfigMap"}
    return [{**head, "metadata": {"name": f"doc-{i}"}, **body} for i, body in enumerate(bodies)]


def kubectl_reads(plane, text: str) -> list[dict]:
    """Every object of the YAML `text` as the real kubectl decodes it, in order."""
    done = plane.kubectl(
        "create", "--dry-run=client", "-o", "json", "-f", "-", input=text, check=False
    )
    assert done.returncode == 0, done.stderr
    # kubectl prints one JSON object after another, each on lines of its own.
    decoder, out, objects, end = json.JSONDecoder(), done.stdout.strip(), [], 0
    while end < len(out):
        obj, end = decoder.raw_decode(out, end + (out[end] == "\n"))
        objects.append(obj)
    return objects


def bodies_read(plane, objects: list[dict]) -> list[dict]:
    """The bodies of `objects` once `dump_all` wrote them and kubectl read them back."""
    read = kubectl_reads(plane, dump_all(objects))
    return [{k: v for k, v in obj.items() if k not in HEAD} for obj in read]


def test_every_tricky_scalar_reads_back_the_same(control_plane):
    """Each scalar of `TRICKY`, as a key and as a value, is read back by kubectl as the
    string it was; so are the other types next to them."""
    body = {s: s for s in TRICKY} | {"int": 7, "bool": True, "null": None, "list": TRICKY}
    assert bodies_read(control_plane, as_objects([body])) == [body]


@settings(max_examples=25, deadline=None)
@given(bodies=st.lists(BODIES, min_size=1, max_size=20))
def test_every_document_reads_back_the_same(control_plane, bodies):
    """Generated documents (up to 20 to one kubectl call) read back exactly as written."""
    assert bodies_read(control_plane, as_objects(bodies)) == bodies


def test_review_reads_every_tricky_scalar_as_kubectl(control_plane):
    """What `review` reads from a manifest (webhook/policy/yamlscalars.py) is what the real
    kubectl reads: each scalar of `TRICKY` unquoted, as a value and as a key (each key in a
    mapping of its own: `y` and `true` are one key to both). Not infinities and NaN, which
    JSON cannot hold (kubectl refuses them), nor what is no plain scalar."""
    plain = [
        s
        for s in TRICKY
        if s and s[0] not in "#<-" and ": " not in s and s not in (".inf", "-.Inf", ".NaN")
    ]
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tricky}\nvalues:\n" + "".join(
        f"  v{i}: {s}\n" for i, s in enumerate(plain)
    )
    nulls = ("~", "null")
    text += "keys:\n" + "".join(f"- {s}: {i}\n" for i, s in enumerate(plain) if s not in nulls)
    [read] = load_all(text, "tricky.yaml")
    [kubectl] = kubectl_reads(control_plane, text)
    assert read["values"] == kubectl["values"]
    assert read["keys"] == kubectl["keys"]
    for null in nulls:  # a key kubectl cannot turn into JSON: both refuse the file
        text = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: tricky}}\nkeys: {{{null}: 1}}\n"
        done = control_plane.kubectl(
            "create", "--dry-run=client", "-f", "-", input=text, check=False
        )
        assert done.returncode and "unsupported map key" in done.stderr
        with pytest.raises(YamlError, match="found a null key, which kubectl refuses"):
            load_all(text, "tricky.yaml")


def test_review_yaml_keeps_env_strings_strings(control_plane, tmp_path):
    """The CLI's own output: env values and annotations survive kubectl unchanged."""
    env = [{"name": f"V{i}", "value": value} for i, value in enumerate(TRICKY)]
    manifest = pod(
        container(limits={"aliyun.com/gpu-mem": 2}, env=env),
        annotations={"note": "1e5", "y": "y"},
    )
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(manifest))
    code, out, _ = run_cli("review", str(path), "-o", "yaml")
    assert code == 0
    [rewritten] = kubectl_reads(control_plane, out)
    assert rewritten["spec"]["containers"][0]["env"] == env
    assert rewritten["metadata"]["annotations"]["note"] == "1e5"
    assert rewritten["metadata"]["annotations"]["y"] == "y"
    assert rewritten["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


# --- review's reading of a manifest, held to the cluster's ---------------------------------


@dataclass(frozen=True)
class Scalars:
    """A Pod's limits as written (each value as YAML text), what the cluster makes of them,
    and the bug that makes `review` predict otherwise (None where it agrees)."""

    limits: dict[str, str]
    # The admitted Pod's container limits and lwgpu.io/rewritten-from; None: not admitted.
    cluster: tuple[dict[str, str], str] | None
    bug: str | None = None


GPU_1 = {"nvidia.com/gpu": "1"}
# PyYAML reads YAML 1.1 (yaml/resolver.py, the implicit resolvers): a float needs a dot and
# a signed exponent (`1e3` and `1.0e3` are strings), `1:20` is a base-60 integer (80), and
# `0o17` is no number. go-yaml v2 reads `1e3` as the float 1000, `0o1750` as the integer 1000
# (strconv.ParseInt, base 0) and `1:20` as a string; kubectl sends what it read as JSON, and
# a Quantity given a JSON number keeps no spelling of it (k8s.io/apimachinery,
# pkg/api/resource/quantity.go, `UnmarshalJSON`): 1000 is stored as `1k`.
SCALARS_READ = {
    "exponent, rewritten away": Scalars(
        {"nvidia.com/gpumem": "1e3"}, (GPU_1, "nvidia.com/gpumem=1000")
    ),
    "exponent, kept": Scalars(
        {"nvidia.com/gpumem": "1000", "cpu": "1e3"},
        ({"cpu": "1k", **GPU_1}, "nvidia.com/gpumem=1000"),
    ),
    "negative exponent, kept": Scalars(
        {"nvidia.com/gpumem": "1000", "cpu": "1e-3"},
        ({"cpu": "1m", **GPU_1}, "nvidia.com/gpumem=1000"),
    ),
    "exponent with a dot, kept": Scalars(
        {"nvidia.com/gpumem": "1000", "cpu": "1.0e3"},
        ({"cpu": "1k", **GPU_1}, "nvidia.com/gpumem=1000"),
    ),
    "exponent, same canonical form": Scalars(
        {"nvidia.com/gpumem": "1000", "cpu": "2.5e3"},
        ({"cpu": "2500", **GPU_1}, "nvidia.com/gpumem=1000"),
    ),
    "exponent, quoted": Scalars(
        {"nvidia.com/gpumem": "1000", "cpu": "'1e3'"},
        ({"cpu": "1e3", **GPU_1}, "nvidia.com/gpumem=1000"),
    ),
    "signed exponent": Scalars({"nvidia.com/gpumem": "1.5e+3"}, (GPU_1, "nvidia.com/gpumem=1500")),
    "negative exponent, rewritten away": Scalars(
        {"nvidia.com/gpumem": "1e-3"}, (GPU_1, "nvidia.com/gpumem=0.001")
    ),
    "underscores": Scalars({"nvidia.com/gpumem": "1_000"}, (GPU_1, "nvidia.com/gpumem=1000")),
    "hexadecimal": Scalars({"nvidia.com/gpumem": "0x400"}, (GPU_1, "nvidia.com/gpumem=1024")),
    "octal, leading zero": Scalars(
        {"nvidia.com/gpumem": "01750"}, (GPU_1, "nvidia.com/gpumem=1000")
    ),
    "binary": Scalars({"nvidia.com/gpumem": "0b1111101000"}, (GPU_1, "nvidia.com/gpumem=1000")),
    "octal, 0o": Scalars(
        {"nvidia.com/gpumem": "0o1750"},
        (GPU_1, "nvidia.com/gpumem=1000"),
    ),
    "base 60": Scalars(
        {"nvidia.com/gpumem": "1:20"},
        None,
    ),
    "boolean": Scalars({"nvidia.com/gpumem": "on"}, None),
}


def manifest(limits: dict[str, str]) -> str:
    """A Pod whose only container has `limits`, each value written as is, as a person does."""
    lines = "".join(f"        {name}: {text}\n" for name, text in limits.items())
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: scalars\nspec:\n  containers:\n"
        "  - name: main\n    image: registry.k8s.io/pause:3.10\n    resources:\n"
        f"      limits:\n{lines}"
    )


def admitted(obj: dict) -> tuple[dict[str, str], str]:
    """What is compared of an admitted Pod: its limits and lwgpu's rewritten-from note."""
    annotations = obj["metadata"].get("annotations") or {}
    return obj["spec"]["containers"][0]["resources"]["limits"], annotations.get(
        "lwgpu.io/rewritten-from", ""
    )


@pytest.mark.parametrize("case", SCALARS_READ)
def test_review_reads_unquoted_scalars_as_the_cluster(lwgpu, namespace, tmp_path, case):
    """A manifest with unquoted quantities: what the cluster admits and stores (kubectl reads
    the file, the apiserver decodes it, lwgpu's webhook rewrites it: a server-side dry run)
    is what `review -o yaml` of the same file predicts, or the case names the bug."""
    scalars = SCALARS_READ[case]
    path = tmp_path / "pod.yaml"
    path.write_text(manifest(scalars.limits), encoding="utf-8")

    done = namespace.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", str(path), check=False
    )
    cluster = admitted(json.loads(done.stdout)) if done.returncode == 0 else None
    assert cluster == scalars.cluster, done.stderr

    code, out, err = run_cli(
        "review", str(path), "-o", "yaml", "--policies", str(SHIPPED_POLICY), "-n", namespace.name
    )
    assert code in (0, 1), err
    predicted = admitted(yaml.safe_load(out)) if code == 0 else None
    if scalars.bug:
        assert predicted != cluster, "review now reads this as the cluster: drop the bug"
        pytest.xfail(scalars.bug)
    assert predicted == cluster
