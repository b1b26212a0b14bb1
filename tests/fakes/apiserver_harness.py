"""A test double of kube-apiserver's admission dispatcher. It is NOT an apiserver.

No kube-apiserver can run here. `Apiserver.admit()` does what the apiserver's webhook admission
plugins do with the webhook configurations of the install (which tests/fakes/apiserver_install.py
renders and starts), and nothing more. It runs the mutating webhooks, then the validating ones,
in configuration name order: `rules`, `namespaceSelector` (plus `kubernetes.io/metadata.name`),
`objectSelector`, `matchConditions` with cel-go's semantics (tests/fakes/apiserver_cel.py: an
expression that errors in a cluster errors here, and failurePolicy applies); a v1
AdmissionReview over HTTPS verified against the caBundle with SNI `<service>.<namespace>.svc`,
one kept-alive connection per webhook, `?timeout=<timeoutSeconds>s` appended as the apiserver does
and `timeoutSeconds` as the socket timeout; apiVersion, kind and uid of the answer checked; the
JSON patch applied by `kubectl patch --local --type json` (Kubernetes' own engine);
`failurePolicy` on every call error; one reinvocation pass for `IfNeeded`.

Defaulting and validation are off unless given (`defaulter`, `validator`; the Store of
tests/fakes/apiserver_store.py gives tests/fakes/apiserver_defaults.py and
tests/fakes/apiserver_validation.py): the defaulter runs on the object as decoded and again on
each patched object, as `callAttrMutatingHook` does (mutating/dispatcher.go: decode the patched
JSON, compare for reinvocation, then `o.GetObjectDefaulter().Default`); the validator runs after
the mutating webhooks and before the validating ones, where the registry's `rest.BeforeCreate` /
`BeforeUpdate` call the strategy's Validate, and refuses with `errors.NewInvalid`'s message.

Left out: authentication, in-tree admission plugins, conversion (nulls are dropped, as decoding
into Go structs does; removed API versions are refused as not served), name generation, and
parallel validating calls (here one after another). The apiserver refuses a schema-invalid object
before the validating webhooks; here kubernetes-validate's (strict) verdict on the final object
is reported in `Result.schema_error`, so tests can tell it from a denial.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import http.client
import json
import ssl
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.fakes.apiserver_cel import bindings, match_conditions
from tests.fakes.apiserver_rules import (
    CLUSTER_KINDS,
    as_received,
    namespace_selector_matches,
    object_selector_matches,
    resource_of,
    rule_matches,
    schema_error,
)
from tests.support.https_client import Connection

USER = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
OPTIONS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
# A kept-alive connection the server closed while idle: Go's transport retries once on a new
# connection (errServerClosedIdle), so the harness does too.
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class WebhookError(Exception):
    """A failed webhook call; the webhook's `failurePolicy` decides what follows."""


class _Refused(Exception):
    """The request is refused: by a webhook's answer, or by failurePolicy Fail on an error."""


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
    """The admission outcome of one request and the final object."""

    allowed: bool
    obj: dict
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    schema_error: str | None = None
    schema_checked: bool = False  # False: no schema for the kind (a custom resource)
    invalid: list[str] = field(default_factory=list)  # the validator's field errors

    @property
    def called(self) -> list[str]:
        """Names of the webhooks called, in order (a reinvoked one twice)."""
        return [c.webhook for c in self.calls]

    @property
    def patches(self) -> list[tuple[str, list]]:
        """(webhook, JSON patch) for every call answered with a patch."""
        return [(c.webhook, c.patch) for c in self.calls if c.patch]


@dataclass(frozen=True)
class Webhook:
    """One webhook of a configuration; `local` stands in-process for another webhook."""

    spec: dict
    mutating: bool
    local: Callable[[dict], list] | None = None

    @property
    def name(self) -> str:
        """The webhook's name, as the apiserver's messages give it."""
        return self.spec["name"]

    def service(self) -> tuple[str, str]:
        """The `host:port` the apiserver dials, and the path with the timeout it appends."""
        svc = self.spec["clientConfig"]["service"]
        return (
            f"{svc['name']}.{svc['namespace']}.svc:{svc.get('port', 443)}",
            f"{svc.get('path', '/')}?timeout={self.spec.get('timeoutSeconds', 10)}s",
        )


def _apply_patch(obj: dict, ops: list) -> dict:
    """Apply an RFC 6902 patch with Kubernetes' own engine (`kubectl patch --local`)."""
    done = subprocess.run(
        [
            "kubectl",
            "patch",
            "--local",
            "--type",
            "json",
            "-f",
            "-",
            "-p",
            json.dumps(ops),
            "-o",
            "json",
        ],
        input=json.dumps(obj),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode:
        raise _Refused(f"Internal error occurred: JSON patch failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def invalid_message(obj: dict, errors: list[str]) -> str:
    """The apiserver's refusal of an invalid object: `errors.NewInvalid` (`<Kind>.<group> "name"
    is invalid: ...`), its errors aggregated as `utilerrors.NewAggregate` prints them."""
    group = obj["apiVersion"].rpartition("/")[0]
    kind = f"{obj['kind']}.{group}" if group else obj["kind"]
    meta = obj.get("metadata") or {}
    unique = list(dict.fromkeys(errors))
    listed = unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]"
    return f'{kind} "{meta.get("name") or meta.get("generateName", "")}" is invalid: {listed}'


@dataclass
class Apiserver:
    """The dispatcher: webhooks in call order, and Service routes ("host:port" -> loopback port)."""

    webhooks: list[Webhook]
    routes: dict[str, int]
    # webhook name -> its kept-alive connection (public: tests check that it is reused)
    connections: dict[str, Connection] = field(default_factory=dict, repr=False)
    # The object -> the object with the kind's defaults (None: no defaulting).
    defaulter: Callable[[dict], dict] | None = None
    # (object, oldObject or None) -> field errors (None: no validation).
    validator: Callable[[dict, dict | None], list[str]] | None = None

    def _copy(self, webhooks: list[Webhook], routes: dict[str, int]) -> Apiserver:
        """This dispatcher with other webhooks or routes: own connections, same machinery."""
        return dataclasses.replace(self, webhooks=webhooks, routes=routes, connections={})

    def with_routes(self, routes: dict[str, int]) -> Apiserver:
        """A copy where these Services ("host:port") lead to other loopback ports."""
        return self._copy(self.webhooks, {**self.routes, **routes})

    def reconfigured(self, webhook: str, /, **changes: object) -> Apiserver:
        """A copy where `webhook` has another caBundle or Service name/namespace/port/path."""
        hooks = []
        for hook in self.webhooks:
            spec = copy.deepcopy(hook.spec)
            for key, value in changes.items() if hook.name == webhook else ():
                client = spec["clientConfig"]
                (client if key == "caBundle" else client["service"])[key] = value
            hooks.append(Webhook(spec, hook.mutating, hook.local))
        return self._copy(hooks, self.routes)

    def with_local_webhook(self, name: str, patch: Callable[[dict], list]) -> Apiserver:
        """A copy with another mutating webhook (in-process, always matching) after the others."""
        local = Webhook({"name": name, "reinvocationPolicy": "Never"}, True, local=patch)
        mutating = [h for h in self.webhooks if h.mutating]
        return self._copy([*mutating, local, *self.webhooks[len(mutating) :]], self.routes)

    def close(self) -> None:
        """Close every kept-alive connection."""
        for conn in self.connections.values():
            conn.close()
        self.connections.clear()

    def admit(
        self,
        obj: dict,
        namespace: str,
        namespace_labels: dict | None = None,
        operation: str = "CREATE",
        old: dict | None = None,
        dry_run: bool = False,
    ) -> Result:
        """Admit `obj` as kube-apiserver's webhook admission plugins would; see the module doc."""
        obj = as_received(obj, namespace)
        if self.defaulter:
            obj = self.defaulter(obj)
        gvk, gvr = resource_of(obj)
        built_in = "." not in gvk["group"] or gvk["group"].endswith(".k8s.io")
        if built_in and not schema_error(obj)[1]:  # a removed API version, e.g. apps/v1beta1
            return Result(
                False, obj, f'no matches for kind "{gvk["kind"]}" in version "{obj["apiVersion"]}"'
            )
        namespaced = obj["kind"] not in CLUSTER_KINDS
        options = {
            "apiVersion": "meta.k8s.io/v1",
            "kind": OPTIONS.get(operation, "CreateOptions"),
            **({"dryRun": ["All"]} if dry_run else {}),
        }
        request = {
            "uid": "",
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": obj.get("metadata", {}).get("name", ""),
            "namespace": namespace if namespaced else "",
            "operation": operation,
            "userInfo": USER,
            "object": obj,
            "oldObject": old and as_received(old, namespace),
            "dryRun": dry_run,
            "options": options,
        }
        labels = {**(namespace_labels or {}), "kubernetes.io/metadata.name": namespace}
        result = Result(True, obj)
        try:
            # mutating/dispatcher.go: a change reinvokes, once, every IfNeeded webhook called
            # before it (a webhook's own change does not reinvoke it).
            reinvoke, invoked = set(), set()
            for hook in (h for h in self.webhooks if h.mutating):
                if self._run(hook, request, labels, result, False):
                    reinvoke |= invoked
                if hook.spec.get("reinvocationPolicy") == "IfNeeded":
                    invoked.add(hook.name)
            for hook in (h for h in self.webhooks if h.name in reinvoke):
                self._run(hook, request, labels, result, True)
            if self.validator and operation != "DELETE":
                result.invalid = self.validator(request["object"], request["oldObject"])
                if result.invalid:
                    raise _Refused(invalid_message(request["object"], result.invalid))
            for hook in (h for h in self.webhooks if not h.mutating):
                self._run(hook, request, labels, result, False)
        except _Refused as refusal:
            result.allowed, result.message = False, str(refusal)
        result.obj = request["object"]
        result.schema_error, result.schema_checked = schema_error(result.obj)
        return result

    def _matches(self, hook: Webhook, request: dict, labels: dict) -> str | None:
        """ "skip", an error text (a matchCondition did not evaluate), or None: call it."""
        obj, old, spec = request["object"], request["oldObject"], hook.spec
        namespaced = bool(request["namespace"])
        if hook.local:
            return None
        if not any(
            rule_matches(r, request["resource"], request["operation"], namespaced)
            for r in spec.get("rules", [])
        ):
            return "skip"
        if not namespace_selector_matches(spec.get("namespaceSelector"), request, labels):
            return "skip"
        if not object_selector_matches(spec.get("objectSelector"), request):
            return "skip"
        return match_conditions(spec.get("matchConditions", []), bindings(obj, old, request))

    def _run(self, hook: Webhook, request: dict, labels: dict, result: Result, again: bool) -> bool:
        """Call one webhook if it matches; True when its patch changed the object."""
        error = self._matches(hook, request, labels)
        if error == "skip":
            return False
        call = Call(hook.name, str(uuid.uuid4()), again)
        if not error:
            if request["dryRun"] and hook.spec.get("sideEffects") not in ("None", "NoneOnDryRun"):
                raise _Refused(f'admission webhook "{hook.name}" does not support dry run')
            result.calls.append(call)
            try:
                answer = (
                    {"allowed": True, "patch": hook.local(copy.deepcopy(request["object"]))}
                    if hook.local
                    else self._call(hook, {**request, "uid": call.uid})
                )
            except WebhookError as exc:
                error = call.error = str(exc)
        if error:
            if hook.spec.get("failurePolicy", "Fail") == "Ignore":
                return False
            raise _Refused(
                f'Internal error occurred: failed calling webhook "{hook.name}": {error}'
            )
        call.allowed, call.patch = answer["allowed"], answer.get("patch") or None
        result.warnings += answer.get("warnings", [])
        if not call.allowed:  # the apiserver's webhookerrors.ToStatusErr wording
            status = answer.get("status") or {}
            reason = status.get("message") or status.get("reason")
            raise _Refused(
                f'admission webhook "{hook.name}" denied the request'
                + (f": {reason}" if reason else " without explanation")
            )
        before = request["object"]
        if not call.patch:
            return False
        patched = _apply_patch(before, call.patch)
        request["object"] = self.defaulter(patched) if self.defaulter else patched
        return patched != before

    def _call(self, hook: Webhook, request: dict) -> dict:
        """POST the AdmissionReview; its checked `response`, patch decoded; or WebhookError."""
        host, path = hook.service()
        url = f'Post "https://{host}{path}"'
        if host not in self.routes:
            raise WebhookError(f"{url}: service {host} has no endpoints")
        body = json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, */*",
            "User-Agent": "kube-apiserver-admission",
        }
        for attempt in (1, 2):
            conn = self._connection(hook, host)
            reused = conn.sock is not None
            try:
                conn.request("POST", path, body, headers)
                response = conn.getresponse()
                data = response.read()
                break
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if attempt == 2 or not reused or not isinstance(exc, STALE):
                    raise WebhookError(f"{url}: {exc!r}") from None
        if response.status != 200:
            raise WebhookError(f"{url}: HTTP {response.status}: {data[:300]!r}")
        try:
            review = json.loads(data)
            answer = review["response"]
            assert review["apiVersion"] == "admission.k8s.io/v1"
            assert review["kind"] == "AdmissionReview"
            assert answer["uid"] == request["uid"] and isinstance(answer["allowed"], bool)
            if "patch" in answer:
                assert hook.mutating, "validating webhook may not return a patch"
                assert answer.get("patchType") == "JSONPatch", "patchType must be JSONPatch"
                answer = {**answer, "patch": json.loads(base64.b64decode(answer["patch"]))}
        except (ValueError, KeyError, TypeError, AssertionError) as exc:
            raise WebhookError(
                f"received invalid webhook response: {exc!r}: {data[:300]!r}"
            ) from None
        return answer

    def _connection(self, hook: Webhook, host: str) -> Connection:
        # One kept-alive connection per webhook, like the apiserver's client for each webhook.
        if hook.name not in self.connections:
            context = ssl.create_default_context()
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            if bundle := hook.spec["clientConfig"].get("caBundle"):
                context.load_verify_locations(cadata=base64.b64decode(bundle).decode())
            self.connections[hook.name] = Connection(
                self.routes[host],
                context,
                host.rsplit(":", 1)[0],
                hook.spec.get("timeoutSeconds", 10),
            )
        return self.connections[hook.name]
