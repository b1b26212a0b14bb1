"""The install as a test double of kube-apiserver uses it: `running()` renders `deploy/` with
`kubectl kustomize` (or takes other rendered objects, such as the Helm chart's) and starts the
real webhook server as its Deployment says. Not a cluster.

`running()` resolves the webhooks' Service to the webhook Deployment's container, makes
certificates with `python -m certs generate` and patches the printed caBundle into both
configurations (as the lwgpu-certs Job does), "mounts" the policy ConfigMap and the certificates
into a temporary folder, and starts the real server with the container's args on 127.0.0.1 and a
free port, to which the dispatcher (tests/fakes/apiserver_harness.py) routes
`<service>.<namespace>.svc:<port>`.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.fakes.apiserver_harness import Apiserver, Webhook
from tests.fakes.apiserver_rules import selector_matches
from tests.support.deploy import kustomize
from tests.support.paths import DEPLOY, REPO
from tests.support.server import Server, free_port
from tests.support.waiting import wait_for


class HarnessError(Exception):
    """The install cannot be used as the apiserver would use it (an inconsistent deploy/)."""


def _backend(objects: list[dict], service: dict) -> tuple[dict, dict, int]:
    """The Deployment, container and containerPort behind the webhooks' Service port."""
    [svc] = [
        o
        for o in objects
        if o["kind"] == "Service"
        and o["metadata"]["name"] == service["name"]
        and o["metadata"].get("namespace") == service["namespace"]
    ]
    [port] = [p for p in svc["spec"]["ports"] if p["port"] == service.get("port", 443)]
    selector = {"matchLabels": svc["spec"]["selector"]}
    [deployment] = [
        o
        for o in objects
        if o["kind"] == "Deployment"
        and selector_matches(selector, o["spec"]["template"]["metadata"].get("labels", {}))
    ]
    target = port.get("targetPort", port["port"])
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        for cport in container.get("ports", []):
            if target in (cport.get("name"), cport["containerPort"]):
                return deployment, container, cport["containerPort"]
    raise HarnessError(f"Service {service['name']}:{port['port']}: no container port {target!r}")


def _mounts(
    deployment: dict, container: dict, objects: list[dict], workdir: Path
) -> dict[str, Path]:
    """mountPath -> a local folder with what the kubelet would mount there (Secret: workdir/tls)."""
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"].get("volumes", [])}
    mounts = {}
    for mount in container.get("volumeMounts", []):
        volume, folder = volumes[mount["name"]], workdir / mount["name"]
        if "secret" in volume:  # the serving certificate, made by `certs generate` below
            mounts[mount["mountPath"]] = workdir / "tls"
        elif "configMap" in volume:
            [config] = [
                o
                for o in objects
                if o["kind"] == "ConfigMap" and o["metadata"]["name"] == volume["configMap"]["name"]
            ]
            folder.mkdir()
            for key, text in config.get("data", {}).items():
                (folder / key).write_text(text)
            mounts[mount["mountPath"]] = folder
    return mounts


def serve_command(container: dict, mounts: dict[str, Path], port: int, declared: int) -> list[str]:
    """The container's command line, on 127.0.0.1:`port`, mounted paths made local."""
    if container.get("command") != ["python", "-m", "webhook"]:
        raise HarnessError(f"unexpected webhook command {container.get('command')}")
    args = list(container["args"])
    for index, (flag, value) in enumerate(itertools.pairwise(args)):
        if flag == "--port" and int(value) != declared:
            raise HarnessError(
                f"--port {value} is not the containerPort {declared} that the Service targets"
            )
        if flag in ("--host", "--port"):
            args[index + 1] = "127.0.0.1" if flag == "--host" else str(port)
        elif value.startswith("/"):
            if value not in mounts:
                raise HarnessError(f"{flag} {value} is not a mounted volume of the container")
            args[index + 1] = str(mounts[value])
    return [sys.executable, "-m", "webhook", *args]


@contextlib.contextmanager
def running(workdir: Path, objects: list[dict] | None = None) -> Iterator[tuple[Apiserver, Server]]:
    """Take the install's objects (default: `kubectl kustomize deploy/`), make certificates,
    start the real server; yield the dispatcher and it."""
    if objects is None:
        objects = kustomize(DEPLOY)
    configs = sorted(
        (o for o in objects if o["kind"].endswith("WebhookConfiguration")),
        key=lambda o: (not o["kind"].startswith("Mutating"), o["metadata"]["name"]),
    )
    webhooks = [
        Webhook(copy.deepcopy(spec), c["kind"].startswith("Mutating"))
        for c in configs
        for spec in c["webhooks"]
    ]
    services = {json.dumps(h.spec["clientConfig"]["service"] | {"path": ""}) for h in webhooks}
    if len(services) != 1:
        raise HarnessError(f"the webhooks should call one Service port, not {services}")
    service = webhooks[0].spec["clientConfig"]["service"]
    deployment, container, declared = _backend(objects, service)
    bundle = subprocess.run(
        [
            sys.executable,
            "-m",
            "certs",
            "generate",
            "--service",
            service["name"],
            "--namespace",
            service["namespace"],
            "--out",
            str(workdir / "tls"),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()[-1]
    for hook in webhooks:
        hook.spec["clientConfig"]["caBundle"] = bundle  # what the lwgpu-certs Job patches in
    port = free_port()
    mounts = _mounts(deployment, container, objects, workdir)
    command = serve_command(container, mounts, port, declared)
    host = webhooks[0].service()[0]
    stdout, stderr = workdir / "server.stdout", workdir / "server.stderr"
    environment = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(command, cwd=REPO, env=environment, stdout=out, stderr=err)
    server = Server(process, port, workdir / "tls" / "ca.crt", stdout, stderr)
    apiserver = Apiserver(webhooks, {host: port})

    def ready() -> bool:
        if process.poll() is not None:
            raise HarnessError(f"server exited with {process.returncode}:\n{stderr.read_text()}")
        conn = server.connect(host.rsplit(":", 1)[0])
        with contextlib.suppress(OSError), contextlib.closing(conn):
            return conn.call("GET", "/readyz")[0] == 200
        return False

    try:
        wait_for(ready, 30, what="/readyz of the webhook server")
        yield apiserver, server
    finally:
        apiserver.close()
        server.stop()
