"""A test double of kube-apiserver's admission dispatcher. It is NOT an apiserver.

No kube-apiserver can run here, so this module does what the apiserver's webhook admission
plugins do with the install that `kubectl kustomize deploy/` renders, and nothing else:

- `running()` takes the rendered Service, the webhook Deployment's container args and volume
  mounts, and both webhook configurations; creates certificates with `python -m certs generate`
  for the Service and puts the printed caBundle into the configurations (as the lwgpu-certs
  Job does); "mounts" the policy ConfigMap and the certificates into a temporary folder; and
  starts the real server with the Deployment's args on 127.0.0.1 and a free port, to which it
  maps the Service `<name>.<namespace>.svc:<port>`.
- `Apiserver.admit()` runs the mutating webhooks, then the validating ones, in configuration
  name order: `rules`, `namespaceSelector` (with `kubernetes.io/metadata.name`), `objectSelector`,
  `matchConditions` in real CEL (cel-python); an AdmissionReview v1 over HTTPS, verified against
  the caBundle with SNI `<service>.<namespace>.svc`, on one kept-alive connection per webhook,
  `?timeout=<timeoutSeconds>s` as the apiserver appends it; the response's apiVersion, kind and
  uid checked; the JSON patch applied by `kubectl patch --local --type json` (Kubernetes' own
  JSON-patch engine); `failurePolicy` on every error; one reinvocation pass for
  `reinvocationPolicy: IfNeeded`. The final object is checked with kubernetes-validate (strict).

What it leaves out: authentication, in-tree admission plugins, defaulting and conversion (it
only drops nulls, as decoding into Go structs does; removed API versions are refused as not
served), name generation, and validating webhooks run one after another, not in parallel.
The apiserver refuses a schema-invalid object before the validating webhooks; here the error is
reported in `Result.schema_error` after them, so tests can tell the two apart.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import os
import http.client
import json
import ssl
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import celpy
import kubernetes_validate
import yaml

from tests.server_harness import REPO, Connection, Server, free_port, wait_for

K8S_VERSION = kubernetes_validate.latest_version()
USER = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
OPTIONS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
CLUSTER_KINDS = {"Namespace", "Node", "PersistentVolume", "ClusterRole", "ClusterRoleBinding",
                 "StorageClass", "CustomResourceDefinition", "PriorityClass", "RuntimeClass",
                 "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
# Errors of a kept-alive connection the server closed while idle: Go's transport retries
# these once on a new connection (errServerClosedIdle), so the harness does too.
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
CEL = celpy.Environment()


class HarnessError(Exception):
    """The install cannot be used as the apiserver would use it (an inconsistent deploy/)."""


class WebhookError(Exception):
    """A failed webhook call; its `failurePolicy` decides what happens next."""


@dataclass
class Call:
    """One webhook invocation the dispatcher made."""

    webhook: str
    uid: str
    reinvocation: bool = False
    allowed: bool | None = None  # None: the call failed (see error)
    patch: list | None = None
    error: str = ""


@dataclass
class Result:
    """The admission outcome of one request."""

    allowed: bool
    obj: dict | None
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    schema_error: str | None = None
    schema_checked: bool = False

    @property
    def called(self) -> list[str]:
        """Names of the webhooks called, in order (a reinvoked one twice)."""
        return [c.webhook for c in self.calls]

    @property
    def patches(self) -> list[tuple[str, list]]:
        """(webhook, JSON patch) for every call that answered with a patch."""
        return [(c.webhook, c.patch) for c in self.calls if c.patch]


@dataclass(frozen=True)
class Webhook:
    """One entry of a webhook configuration; `local` stands in for another webhook in-process."""

    config: str
    spec: dict
    mutating: bool
    local: Callable[[dict], list] | None = None

    @property
    def name(self) -> str:
        """The webhook's name, as in the apiserver's messages."""
        return self.spec["name"]

    def service(self) -> tuple[str, str]:
        """`host:port` the apiserver dials, and the path with the timeout it appends."""
        svc = self.spec["clientConfig"]["service"]
        query = f"?timeout={self.spec.get('timeoutSeconds', 10)}s"
        return (f"{svc['name']}.{svc['namespace']}.svc:{svc.get('port', 443)}",
                svc.get("path", "/") + query)


def render(target: Path = REPO / "deploy") -> list[dict]:
    """The objects `kubectl kustomize <target>` renders (what `kubectl apply -k` installs)."""
    out = subprocess.run(["kubectl", "kustomize", str(target)], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def as_received(obj: dict, namespace: str) -> dict:
    """`obj` as the apiserver hands it to admission: nulls dropped, metadata.namespace set."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if v is not None}
        return [{} if v is None else strip(v) for v in value] if isinstance(value, list) else value
    received = strip(obj)
    if namespace and received.get("kind") not in CLUSTER_KINDS:
        received.setdefault("metadata", {})["namespace"] = namespace
    return received


def resource_of(obj: dict) -> tuple[dict, dict]:
    """GroupVersionKind and GroupVersionResource; the plural as meta.UnsafeGuessKindToResource."""
    group, _, version = obj["apiVersion"].rpartition("/")
    kind = obj["kind"]
    lower = kind.lower()
    plural = lower + "es" if lower.endswith("s") else lower[:-1] + "ies" if lower.endswith("y") \
        else lower + "s"
    return ({"group": group, "version": version, "kind": kind},
            {"group": group, "version": version, "resource": plural})


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """A metav1.LabelSelector against labels; an absent or empty selector matches everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    tests = {"In": lambda e: labels.get(e["key"]) in e["values"],
             "NotIn": lambda e: labels.get(e["key"]) not in e["values"],
             "Exists": lambda e: e["key"] in labels,
             "DoesNotExist": lambda e: e["key"] not in labels}
    return all(tests[e["operator"]](e) for e in selector.get("matchExpressions") or [])


def rule_matches(rule: dict, gvr: dict, operation: str, namespaced: bool) -> bool:
    """One RuleWithOperations, as admission/plugin/webhook/predicates/rules does (no subresource)."""
    def has(values, value):
        return "*" in values or value in values
    resources = [(r.split("/", 1) + [""])[:2] for r in rule.get("resources", [])]
    scope = rule.get("scope", "*")
    return (has(rule.get("operations", []), operation) and has(rule.get("apiGroups", []), gvr["group"])
            and has(rule.get("apiVersions", []), gvr["version"])
            and any(r in ("*", gvr["resource"]) and s in ("*", "") for r, s in resources)
            and (scope == "*" or (scope == "Namespaced") == namespaced))


@functools.cache
def _program(expression: str):
    return CEL.program(CEL.compile(expression))


def match_conditions(webhook: Webhook, activation: dict) -> str | None:
    """"skip" when a condition is false, an error text when one errs (no false), else None."""
    errors = []
    for condition in webhook.spec.get("matchConditions", []):
        try:
            verdict = _program(condition["expression"]).evaluate(activation)
        except celpy.CELEvalError as exc:
            verdict = exc
        if verdict is False or (isinstance(verdict, celpy.celtypes.BoolType) and not verdict):
            return "skip"
        if not isinstance(verdict, celpy.celtypes.BoolType):
            errors.append(f"matchCondition {condition['name']!r}: {verdict!r}")
    return "; ".join(errors) or None


def apply_patch(obj: dict, ops: list) -> dict:
    """Apply an RFC 6902 patch with Kubernetes' own engine (`kubectl patch --local`)."""
    done = subprocess.run(["kubectl", "patch", "--local", "--type", "json", "-f", "-", "-p",
                           json.dumps(ops), "-o", "json"], input=json.dumps(obj),
                          capture_output=True, text=True, timeout=30)
    if done.returncode:
        raise WebhookError(f"JSON patch failed to apply: {done.stderr.strip()}")
    return json.loads(done.stdout)


def schema_error(obj: dict) -> tuple[str | None, bool]:
    """(kubernetes-validate's strict error or None, whether a schema existed for the kind)."""
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return None, False
    except kubernetes_validate.ValidationError as err:
        return f"{'.'.join(map(str, err.path))}: {err.message}", True
    return None, True


class _Refused(Exception):
    """The request is refused: by a webhook's answer, or by failurePolicy Fail on an error."""


@dataclass
class Apiserver:
    """The admission dispatcher over a set of webhooks and Service routes ("host:port" -> port)."""

    webhooks: list[Webhook]
    routes: dict[str, int]
    _connections: dict[str, Connection] = field(default_factory=dict, repr=False)

    def with_routes(self, **routes: int) -> Apiserver:
        """A copy whose listed Services lead to other loopback ports (e.g. nothing listening)."""
        return Apiserver(self.webhooks, {**self.routes, **routes})

    def with_local_webhook(self, name: str, patch: Callable[[dict], list]) -> Apiserver:
        """A copy with one more mutating webhook, in-process, called after the configured ones."""
        spec = {"name": name, "reinvocationPolicy": "Never", "failurePolicy": "Fail"}
        local = Webhook("zz-" + name, spec, True, local=patch)
        hooks = [h for h in self.webhooks if h.mutating] + [local]
        return Apiserver(hooks + [h for h in self.webhooks if not h.mutating], self.routes)

    def close(self) -> None:
        """Close every kept-alive connection."""
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def admit(self, obj: dict, namespace: str, namespace_labels: dict | None = None,
              operation: str = "CREATE", old: dict | None = None, dry_run: bool = False) -> Result:
        """Admit `obj` as kube-apiserver's webhook admission plugins would; see the module doc."""
        obj = as_received(obj, namespace)
        old = as_received(old, namespace) if old else None
        gvk, gvr = resource_of(obj)
        error, checked = schema_error(obj)
        if not checked and ("." not in gvk["group"] or gvk["group"].endswith(".k8s.io")):
            return Result(False, obj, f'no matches for kind "{gvk["kind"]}" in version "{obj["apiVersion"]}"')
        namespaced = obj["kind"] not in CLUSTER_KINDS
        metadata = obj.get("metadata", {})
        request = {"uid": "", "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
                   "name": metadata.get("name", ""), "namespace": namespace if namespaced else "",
                   "operation": operation, "userInfo": USER, "object": obj, "oldObject": old,
                   "dryRun": dry_run, "options": {"apiVersion": "meta.k8s.io/v1",
                                                  "kind": OPTIONS.get(operation, "CreateOptions"),
                                                  **({"dryRun": ["All"]} if dry_run else {})}}
        labels = {**(namespace_labels or {}), "kubernetes.io/metadata.name": namespace}
        result = Result(True, obj)
        try:
            self._mutate(request, labels, result)
            for hook in (h for h in self.webhooks if not h.mutating):
                self._run(hook, request, labels, result, False)
        except _Refused as refusal:
            result.allowed, result.message = False, str(refusal)
        result.obj = request["object"]
        result.schema_error, result.schema_checked = schema_error(result.obj)
        return result

    def _mutate(self, request: dict, labels: dict, result: Result) -> None:
        # mutating/dispatcher.go: a change reinvokes every IfNeeded webhook called before it,
        # once, in a second pass; a webhook's own change does not reinvoke it.
        reinvoke, invoked = set(), set()
        mutating = [h for h in self.webhooks if h.mutating]
        for hook in mutating:
            if self._run(hook, request, labels, result, False):
                reinvoke |= invoked
            if hook.spec.get("reinvocationPolicy") == "IfNeeded":
                invoked.add(hook.name)
        for hook in (h for h in mutating if h.name in reinvoke):
            self._run(hook, request, labels, result, True)

    def _skip(self, hook: Webhook, request: dict, labels: dict) -> str | None:
        """"skip", an error text (a matchCondition failed to evaluate), or None: call it."""
        if hook.local:
            return None
        obj, old, spec = request["object"], request["oldObject"], hook.spec
        namespaced = bool(request["namespace"])
        if not any(rule_matches(r, request["resource"], request["operation"], namespaced)
                   for r in spec.get("rules", [])):
            return "skip"
        scope = labels if namespaced else obj.get("metadata", {}).get("labels", {})
        # A cluster-scoped object other than a Namespace is never filtered by namespaceSelector.
        if (namespaced or obj["kind"] == "Namespace") and not selector_matches(
                spec.get("namespaceSelector"), scope):
            return "skip"
        if not any(selector_matches(spec.get("objectSelector"), o.get("metadata", {}).get("labels", {}))
                   for o in (obj, old) if o):
            return "skip"
        seen = {k: v for k, v in request.items() if k not in ("object", "oldObject")}
        return match_conditions(hook, {"object": celpy.json_to_cel(obj),
                                       "oldObject": celpy.json_to_cel(old),
                                       "request": celpy.json_to_cel(seen)})

    def _run(self, hook: Webhook, request: dict, labels: dict, result: Result, again: bool) -> bool:
        """Call one webhook if it matches; True when its patch changed the object."""
        error = self._skip(hook, request, labels)
        if error == "skip":
            return False
        if not error and request["dryRun"] and hook.spec.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise _Refused(f'admission webhook "{hook.name}" does not support dry run')
        call = Call(hook.name, str(uuid.uuid4()), again)
        answer = None
        if not error:
            result.calls.append(call)
            try:
                answer = hook.local and {"allowed": True, "patch": hook.local(copy.deepcopy(request["object"]))}
                answer = answer or self._call(hook, {**request, "uid": call.uid}, call.uid)
            except WebhookError as exc:
                error = call.error = str(exc)
        if error:
            if hook.spec.get("failurePolicy", "Fail") == "Ignore":
                return False
            raise _Refused(f'Internal error occurred: failed calling webhook "{hook.name}": {error}')
        call.allowed = answer["allowed"]
        result.warnings += answer.get("warnings", [])
        if not call.allowed:
            status = answer.get("status") or {}
            reason = status.get("message") or status.get("reason")
            raise _Refused(f'admission webhook "{hook.name}" denied the request'
                           + (f": {reason}" if reason else " without explanation"))
        call.patch = answer.get("patch") or None
        if not call.patch:
            return False
        try:
            patched = apply_patch(request["object"], call.patch)
        except WebhookError as exc:  # not a call failure: failurePolicy does not apply
            raise _Refused(f"Internal error occurred: {exc}") from None
        changed, request["object"] = patched != request["object"], patched
        return changed

    def _call(self, hook: Webhook, request: dict, uid: str) -> dict:
        """POST the AdmissionReview; the checked `response`, patch decoded. WebhookError on error."""
        host, path = hook.service()
        url = f'Post "https://{host}{path}"'
        if host not in self.routes:
            raise WebhookError(f"{url}: service {host} has no endpoints")
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": request}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json, */*",
                   "User-Agent": "kube-apiserver-admission"}
        for attempt in (1, 2):
            conn = self._connection(hook, host)
            reused = conn.sock is not None
            try:
                conn.request("POST", path, body, headers)
                response = conn.getresponse()
                data = response.read()
                break
            except STALE as exc:
                conn.close()
                if attempt == 2 or not reused:
                    raise WebhookError(f"{url}: {exc!r}") from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise WebhookError(f"{url}: {exc!r}") from None
        if response.status != 200:
            raise WebhookError(f"{url}: HTTP {response.status}: {data[:300]!r}")
        try:
            review = json.loads(data)
            answer = review["response"]
            assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
            assert answer["uid"] == uid and isinstance(answer["allowed"], bool)
            if "patch" in answer:
                assert hook.mutating, "validating webhook may not return a patch"
                assert answer.get("patchType") == "JSONPatch", "patchType must be JSONPatch"
                answer = {**answer, "patch": json.loads(base64.b64decode(answer["patch"]))}
        except (ValueError, KeyError, TypeError, AssertionError) as exc:
            raise WebhookError(f"received invalid webhook response: {exc!r}: {data[:300]!r}") from None
        return answer

    def _connection(self, hook: Webhook, host: str) -> Connection:
        # One kept-alive connection per webhook, as the apiserver's per-webhook client keeps.
        if hook.name not in self._connections:
            context = ssl.create_default_context()
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            bundle = hook.spec["clientConfig"].get("caBundle")
            if bundle:
                context.load_verify_locations(cadata=base64.b64decode(bundle).decode())
            self._connections[hook.name] = Connection(
                self.routes[host], context, host.rsplit(":", 1)[0], hook.spec.get("timeoutSeconds", 10))
        return self._connections[hook.name]


def _resolve(objects: list[dict], service: dict) -> tuple[dict, dict, int]:
    """The Deployment, container and containerPort behind one webhook's Service port."""
    [svc] = [o for o in objects if o["kind"] == "Service"
             and (o["metadata"]["name"], o["metadata"].get("namespace")) == (service["name"], service["namespace"])]
    [port] = [p for p in svc["spec"]["ports"] if p["port"] == service.get("port", 443)]
    selector = {"matchLabels": svc["spec"]["selector"]}
    [deployment] = [o for o in objects if o["kind"] == "Deployment" and selector_matches(
        selector, o["spec"]["template"]["metadata"].get("labels", {}))]
    target = port.get("targetPort", port["port"])
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        for cport in container.get("ports", []):
            if target in (cport.get("name"), cport["containerPort"]):
                return deployment, container, cport["containerPort"]
    raise HarnessError(f"Service {service['name']} port {port['port']}: no container port {target!r}")


def _mounted(deployment: dict, container: dict, objects: list[dict], workdir: Path,
             tls_dir: Path) -> dict[str, Path]:
    """mountPath -> a local folder holding what the kubelet would mount there."""
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"].get("volumes", [])}
    mounts = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "secret" in volume:  # the one Secret: the serving certificate `certs generate` made
            mounts[mount["mountPath"]] = tls_dir
        elif "configMap" in volume:
            [config] = [o for o in objects if o["kind"] == "ConfigMap"
                        and o["metadata"]["name"] == volume["configMap"]["name"]]
            folder = workdir / "mounts" / mount["name"]
            folder.mkdir(parents=True)
            for key, text in config.get("data", {}).items():
                (folder / key).write_text(text)
            mounts[mount["mountPath"]] = folder
    return mounts


def serve_command(container: dict, mounts: dict[str, Path], port: int, declared: int) -> list[str]:
    """The container's command line, on 127.0.0.1:`port` with mounted paths made local."""
    if container.get("command") != ["python", "-m", "webhook"]:
        raise HarnessError(f"unexpected webhook command {container.get('command')}")
    args = list(container["args"])
    for index, value in enumerate(args[:-1]):
        flag, nxt = value, args[index + 1]
        if flag == "--port" and int(nxt) != declared:
            raise HarnessError(f"--port {nxt} is not the containerPort {declared} the Service targets")
        if flag in ("--host", "--port"):
            args[index + 1] = "127.0.0.1" if flag == "--host" else str(port)
        elif nxt.startswith("/"):
            if nxt not in mounts:
                raise HarnessError(f"{flag} {nxt} is not a mounted volume of the container")
            args[index + 1] = str(mounts[nxt])
    return [sys.executable, "-m", "webhook", *args]


@contextlib.contextmanager
def running(workdir: Path, target: Path = REPO / "deploy") -> Iterator[tuple[Apiserver, Server]]:
    """Render `target`, make certificates, start the real server; yield the dispatcher and it."""
    objects = render(target)
    configs = sorted((o for o in objects if o["kind"].endswith("WebhookConfiguration")),
                     key=lambda o: (not o["kind"].startswith("Mutating"), o["metadata"]["name"]))
    services = {json.dumps(w["clientConfig"]["service"], sort_keys=True): w["clientConfig"]["service"]
                for c in configs for w in c["webhooks"]}
    if len({(s["name"], s["namespace"]) for s in services.values()}) != 1:
        raise HarnessError(f"the webhooks should use one Service, not {list(services)}")
    first = next(iter(services.values()))
    deployment, container, declared = _resolve(objects, first)
    tls_dir = workdir / "tls"
    bundle = subprocess.run([sys.executable, "-m", "certs", "generate", "--service", first["name"],
                             "--namespace", first["namespace"], "--out", str(tls_dir)], cwd=REPO,
                            check=True, capture_output=True, text=True).stdout.split()[-1]
    webhooks = []
    for config in configs:
        for spec in config["webhooks"]:
            spec = copy.deepcopy(spec)
            spec["clientConfig"]["caBundle"] = bundle  # what the lwgpu-certs Job patches in
            webhooks.append(Webhook(config["metadata"]["name"], spec, config["kind"].startswith("Mutating")))
    port = free_port()
    command = serve_command(container, _mounted(deployment, container, objects, workdir, tls_dir),
                            port, declared)
    routes = {Webhook("", {"clientConfig": {"service": s}}, False).service()[0]: port
              for s in services.values()}
    stdout, stderr = workdir / "server.stdout", workdir / "server.stderr"
    environment = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(command, cwd=REPO, env=environment, stdout=out, stderr=err)
    server = Server(process, port, tls_dir / "ca.crt", stdout, stderr)
    apiserver = Apiserver(webhooks, routes)
    try:
        def healthy() -> bool:
            if process.poll() is not None:
                raise HarnessError(f"server exited with {process.returncode}:\n{stderr.read_text()}")
            with contextlib.suppress(OSError):
                return server.get("/readyz")[0] == 200
            return False
        wait_for(healthy, 30, what="/readyz of the webhook server")
        yield apiserver, server
    finally:
        apiserver.close()
        server.stop()
