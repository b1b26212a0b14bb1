"""The ways a pod create can be admitted, registered side by side on one control plane.

Each variant decides the pods of its own namespace (`bench-<variant>`, labelled
`lwgpu-bench/variant=<variant>`), so a run switches variant by switching namespace and never
waits for the apiserver to notice a configuration change:

- `none`: no webhook and no policy;
- `lwgpu`: `python -m webhook serve` as the Deployment runs it (2 workers, 8 threads, the
  default policy), registered by the shipped `lwgpu-mutate` configuration (`kubectl kustomize
  deploy/`: its rules, matchConditions, failurePolicy, timeout) with `clientConfig` a URL on
  loopback and the serving CA as its `caBundle`;
- `floor`: the bare WSGI function on lwgpu's gunicorn, worker and TLS settings answering
  lwgpu's own answer to the seed pod (`lineup`'s `floor`), registered by a copy of that
  configuration (`lwgpu-mutate-floor`): what lwgpu adds beyond it is lwgpu's own code, what
  it adds beyond Go is the stack (gunicorn, Python's TLS, HTTP/1.1);
- `go`: the Go webhook of `peers/` (the same rewrite, the same answer: `lineup.check_answers`)
  registered by a copy of that configuration (`lwgpu-mutate-go`);
- `go-h2`: the same Go webhook offering HTTP/2 (`lwgpu-mutate-go-h2`). kube-apiserver
  offers HTTP/2 to a webhook URL on loopback only (k8s.io/apiserver pkg/util/webhook/client.go,
  `HookClient`, `isLocalHost`); behind a Service, as every webhook of a cluster is, it speaks
  HTTP/1.1 (issue 75791), and `go` is held to that. This variant shows what HTTP/2 would change:
  one connection multiplexing a burst instead of a TLS handshake per concurrent call;
- `map`: the compiled MutatingAdmissionPolicy and its binding (`webhook.compile.rewrite_policy`,
  what `python -m webhook policy compile` prints), evaluated inside kube-apiserver.

To each configuration and binding only a namespace selector on the variant's label is added.
Every configuration is consulted for every create, so each variant pays the same price for
the others' namespace selectors (a lookup in the apiserver's namespace cache). The final-state
ValidatingAdmissionPolicy is not installed: `none` must admit the pod it would refuse.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from tools.cluster import install
from tools.cluster.controlplane import ControlPlane
from tools.reliability.creates import Create, CreateStream, gpu_memory_pod
from tools.waiting import wait_for
from webhook.compile import rewrite_policy
from webhook.policy import PolicySet

from . import bodies, lineup, procs

VARIANTS = ("none", "lwgpu", "floor", "go", "go-h2", "map")
LABELS = {
    "none": "no webhook",
    "lwgpu": "lwgpu",
    "floor": "bare WSGI floor",
    "go": "Go webhook",
    "go-h2": "Go webhook, HTTP/2",
    "map": "compiled MAP",
}
LABEL = "lwgpu-bench/variant"
SERVERS = {
    "lwgpu": "webhook",
    "go": "go",
    "go-h2": "go-h2",
}  # variant -> lineup name (the floor starts later)
CONFIGURATION = "lwgpu-mutate"
READY_S = 60  # for the apiserver's informers to see the namespaces and configurations


@dataclass
class Variants:
    """The variants that run (those whose server could start) and the ones skipped, why."""

    plane: ControlPlane
    servers: dict[str, procs.Server]
    names: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    # Per rewriting variant but lwgpu: the parts of the stored pod that differ from lwgpu's.
    differences: dict[str, list[str]] = field(default_factory=dict)


def namespace(variant: str) -> str:
    """The namespace whose pods `variant` decides."""
    return f"bench-{variant}"


def _selected(variant: str) -> dict[str, Any]:
    return {"key": LABEL, "operator": "In", "values": [variant]}


def shipped_configuration(plane: ControlPlane) -> dict[str, Any]:
    """The `lwgpu-mutate` MutatingWebhookConfiguration as `kubectl kustomize deploy/` renders
    it."""
    for obj in yaml.safe_load_all(install.render(plane)):
        kind = obj and (obj["kind"], obj["metadata"]["name"])
        if kind == ("MutatingWebhookConfiguration", CONFIGURATION):
            found: dict[str, Any] = obj
            return found
    raise LookupError(f"{CONFIGURATION} is not in the rendered deploy/")


def webhook_configuration(
    shipped: dict[str, Any], variant: str, server: procs.Server
) -> dict[str, Any]:
    """`shipped`, pointed at `server` by URL with its CA, for `variant`'s namespace only."""
    config = copy.deepcopy(shipped)
    if variant != "lwgpu":
        config["metadata"]["name"] = f"{CONFIGURATION}-{variant}"
    bundle = base64.b64encode(server.ca.read_bytes()).decode()
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": server.url + "/mutate", "caBundle": bundle}
        selector = hook.setdefault("namespaceSelector", {})
        selector.setdefault("matchExpressions", []).append(_selected(variant))
    return config


def compiled_policy(policies: PolicySet) -> list[dict[str, Any]]:
    """The compiled MutatingAdmissionPolicy, its binding limited to the `map` namespace."""
    objects = rewrite_policy(policies)
    for obj in objects:
        if obj["kind"].endswith("Binding"):
            obj["spec"]["matchResources"] = {
                "namespaceSelector": {"matchExpressions": [_selected("map")]}
            }
    return objects


def create_once(plane: ControlPlane, variant: str) -> Create:
    """One dry-run create of the seed pod in `variant`'s namespace."""
    with CreateStream(plane, namespace(variant), rate=1, count=1, threads=1) as stream:
        pass
    return stream.records[0]


def stored(plane: ControlPlane, variant: str) -> dict[str, Any]:
    """The seed pod as the apiserver would store it in `variant`'s namespace (a dry run)."""
    done = plane.kubectl(
        "create", "--dry-run=server", "-o", "json", "-n", namespace(variant), "-f", "-",
        input=orjson.dumps(gpu_memory_pod()).decode(),
    )  # fmt: skip
    pod: dict[str, Any] = orjson.loads(done.stdout)
    return pod


def _decided(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    return {
        "resources": [c.get("resources") for c in spec["containers"]],
        "nodeSelector": spec.get("nodeSelector"),
        "affinity": spec.get("affinity"),
        "tolerations": spec.get("tolerations"),
        "annotations": pod["metadata"].get("annotations"),
    }


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """What the rewrite decides that differs between two stored pods: each container's
    resources, the node selector, affinity and tolerations, and the annotations."""
    mine, other = _decided(ours), _decided(theirs)
    return [name for name in mine if mine[name] != other[name]]


def _behaves(variants: Variants, variant: str) -> bool:
    """`variant` admits the seed pod, rewritten (not, for `none`), and only lwgpu's own
    namespace reaches lwgpu."""
    lwgpu = variants.servers.get("lwgpu")
    before = lwgpu.reviews() if lwgpu else 0
    create = create_once(variants.plane, variant)
    reached = (lwgpu.reviews() if lwgpu else 0) > before
    return (
        create.status == 201
        and create.rewritten == (variant != "none")
        and reached == (variant == "lwgpu")
    )


def _wait_until_deciding(variants: Variants, variant: str) -> None:
    wait_for(
        functools.partial(_behaves, variants, variant),
        READY_S,
        interval=0.5,
        what=f"the {variant} variant deciding {namespace(variant)}",
    )


@contextlib.contextmanager
def registered(
    plane: ControlPlane, workdir: Path, policies: PolicySet, *, workers: int, threads: int
) -> Iterator[Variants]:
    """Start the webhooks, register every variant, wait until each decides its namespace."""
    tls = workdir / "tls"
    lineup.certificates(tls)
    found, skipped = lineup.contenders(
        tuple(SERVERS.values()),
        tls,
        workdir,
        policies,
        workers=workers,
        threads=threads,
        against=None,
    )
    with contextlib.ExitStack() as stack:
        started = lineup.start(stack, found, tls / "ca.crt", workdir)
        lineup.check_answers(started, bodies.body(bodies.seed_pod()))
        servers = {v: started[name] for v, name in SERVERS.items() if name in started}
        variants = Variants(plane, servers)
        variants.skipped = {v: skipped[name] for v, name in SERVERS.items() if name in skipped}
        variants.names = [v for v in VARIANTS if v not in variants.skipped]
        shipped = shipped_configuration(plane)
        objects: list[dict[str, Any]] = [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace(v), "labels": {LABEL: v}},
            }
            for v in variants.names
        ]
        objects += [webhook_configuration(shipped, v, s) for v, s in servers.items()]
        if "map" in variants.names:
            objects += compiled_policy(policies)
        listed = {"apiVersion": "v1", "kind": "List", "items": objects}
        plane.kubectl("create", "-f", "-", input=orjson.dumps(listed).decode())
        for variant in variants.names:
            if variant != "floor":
                _wait_until_deciding(variants, variant)
        # The floor answers what lwgpu answers to the pod as the apiserver sends it: the pod
        # stored in the floor's namespace before its webhook is registered (built-in mutating
        # plugins and defaults applied), so the apiserver applies the same patch as for lwgpu.
        answer = lineup.answer_to(stored(plane, "floor"), namespace("floor"), policies)
        python = lineup.python_args(tls, workers, threads)
        floor = lineup.start(
            stack, [lineup.floor(python, workdir, answer)], tls / "ca.crt", workdir
        )
        variants.servers["floor"] = floor["floor"]
        configuration = webhook_configuration(shipped, "floor", floor["floor"])
        plane.kubectl("create", "-f", "-", input=orjson.dumps(configuration).decode())
        _wait_until_deciding(variants, "floor")
        if "lwgpu" in variants.names:
            ours = stored(plane, "lwgpu")
            variants.differences = {
                v: differences(ours, stored(plane, v))
                for v in variants.names
                if v != "lwgpu" and v != "none"
            }
        yield variants
