"""The servers an end-to-end run compares, started side by side on the same certificates.

- `webhook`: `python -m webhook serve`, the product.
- `webhook@REV` (with `--against REV`): the same command from another commit's source, so a
  change is measured alone against the version before it, in the same interleaved run.
- `flask`: the no-op Flask app on the webhook's gunicorn class and settings (`noop`).
- `wsgi`: a bare WSGI function on the same gunicorn: the floor of anything Python serves here.
- `floor` (only when asked for): the bare WSGI function answering lwgpu's own answer to the
  seed pod (patch, warnings, audit annotations) to every review: the floor as the apiserver
  sees it, which then applies the same patch as after lwgpu (`variants.py`).
- `go`: a minimal Go net/http webhook applying the same rewrite (`peers/main.go`); its answer
  must equal the webhook's, or the run stops.
- `go-fixed`: Go answering a constant 200: the machine's TLS + HTTP bound.
- `go-h2` (only when asked for): the Go webhook offering HTTP/2 as well (`-http2`); every
  other server speaks HTTP/1.1 only, as kube-apiserver speaks to a webhook in a cluster.
- `no-log`, `no-metrics`, `no-decision` (only when asked for): `webhook serve` with that part
  switched off (`parts`), so the difference to `webhook` is the part's end-to-end cost.

Go peers are skipped, with the reason recorded, where `go` is missing or the build fails.
"""

from __future__ import annotations

import base64
import subprocess
import tarfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

import certs
from tools.paths import REPO
from webhook import DEFAULT_POLICIES, admission
from webhook.policy import PolicySet

from . import bodies, golang, procs

NAMES = ("webhook", "flask", "wsgi", "go", "go-fixed")
LABELS = {
    "webhook": "lwgpu",
    "flask": "Flask no-op",
    "wsgi": "bare WSGI",
    "floor": "bare WSGI, lwgpu's answer",
    "go": "Go webhook",
    "go-fixed": "Go fixed 200",
    "go-h2": "Go webhook, HTTP/2",
    "no-log": "lwgpu, no access log",
    "no-metrics": "lwgpu, no metrics",
    "no-decision": "lwgpu, decision reused",
}
# Not in the default lineup: they explain lwgpu's own cost, they are not peers.
PARTS = {"no-log": "access-log", "no-metrics": "metrics", "no-decision": "decision"}
REV_SOURCES = ("webhook", "certs", "policies")


@dataclass(frozen=True)
class Contender:
    """How to start one server: `python -m module args` (or `program args`) from `root`."""

    name: str
    module: str
    args: list[str]
    program: list[str] | None = None
    root: Path = REPO


@dataclass
class Lineup:
    """The servers started, in the order they were asked for, and the peers skipped."""

    servers: dict[str, procs.Server] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def certificates(tls: Path) -> Path:
    """A CA and the serving certificate every server presents (127.0.0.1 and localhost), in
    `tls`; returns `tls`."""
    certs.generate(tls, "lwgpu-webhook", "lwgpu-system", dns=("localhost",), ips=("127.0.0.1",))
    return tls


def tls_args(tls: Path) -> list[str]:
    """The serving certificate's flags of `webhook serve` and of the Go peers."""
    return ["--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key")]


def label(name: str) -> str:
    """The table's name for a contender."""
    return LABELS.get(name, name)


def checkout(rev: str, into: Path) -> tuple[str, Path]:
    """The short commit of `rev` and a folder holding its `webhook` source (from git archive)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", rev],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    root = into / f"rev-{sha}"
    archive = into / f"rev-{sha}.tar"
    root.mkdir(parents=True, exist_ok=True)
    with open(archive, "wb") as out:
        subprocess.run(["git", "archive", sha, *REV_SOURCES], cwd=REPO, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return sha, root


def contenders(
    names: tuple[str, ...],
    tls: Path,
    workdir: Path,
    policies: PolicySet,
    *,
    workers: int,
    threads: int,
    against: str | None,
) -> tuple[list[Contender], dict[str, str]]:
    """What to start for `names` (plus `webhook@REV`), and the peers that cannot run."""
    serving = tls_args(tls)
    python = python_args(tls, workers, threads)
    serve = ["serve", *python, "--policies", str(DEFAULT_POLICIES)]
    binary, why = (None, "") if not {"go", "go-fixed", "go-h2"} & set(names) else golang.build()
    found: list[Contender] = []
    skipped: dict[str, str] = {}
    for name in names:
        if name == "webhook":
            found.append(Contender(name, "webhook", serve))
            if against:
                sha, root = checkout(against, workdir)
                found.append(Contender(f"webhook@{sha}", "webhook", serve, root=root))
        elif name in ("flask", "wsgi"):
            found.append(
                Contender(
                    name, "tools.bench.noop", [*python, *(["--bare"] if name == "wsgi" else [])]
                )
            )
        elif name == "floor":
            found.append(floor(python, workdir, answer_to(bodies.seed_pod(), "default", policies)))
        elif name in PARTS:
            found.append(Contender(name, "tools.bench.parts", [*python, "--without", PARTS[name]]))
        elif binary is None:
            skipped[name] = why
        elif name in ("go", "go-h2"):
            table = workdir / "profiles.json"
            table.write_bytes(orjson.dumps(golang.profiles_json(policies)))
            protocols = ["-http2"] if name == "go-h2" else []
            found.append(
                Contender(name, "", [*serving, *protocols, "-profiles", str(table)], [str(binary)])
            )
        else:
            found.append(Contender(name, "", [*serving, "-mode", "fixed"], [str(binary)]))
    return found, skipped


def python_args(tls: Path, workers: int, threads: int) -> list[str]:
    """The serving flags of every Python server of the lineup."""
    return [*tls_args(tls), "--workers", str(workers), "--threads", str(threads)]


def answer_to(pod: dict[str, Any], namespace: str, policies: PolicySet) -> dict[str, Any]:
    """lwgpu's `response` to the review of creating `pod` in `namespace`, without its uid."""
    request = admission.parse_request(orjson.loads(bodies.body(pod, namespace)))
    response = dict(admission.review(request, policies, "mutate").response["response"])
    del response["uid"]
    return response


def floor(python: list[str], workdir: Path, answer: dict[str, Any]) -> Contender:
    """The `floor` server: the bare WSGI function answering `answer` to every review."""
    path = workdir / "floor-answer.json"
    path.write_bytes(orjson.dumps(answer))
    return Contender("floor", "tools.bench.noop", [*python, "--bare", "--answer", str(path)])


def start(stack: ExitStack, found: list[Contender], ca: Path, workdir: Path) -> dict[str, Any]:
    """Start every contender (each stopped when `stack` closes); name -> `procs.Server`."""
    return {
        c.name: stack.enter_context(
            procs.serving(c.name, c.module, c.args, ca, workdir, program=c.program, root=c.root)
        )
        for c in found
    }


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    # Key order, escaping (Go writes "->" as "\u003e") and the patch's base64 text may
    # differ between encoders: compare what they mean.
    response = dict(answer.get("response", {}))
    if "patch" in response:
        response["patch"] = orjson.loads(base64.b64decode(response["patch"]))
    return {**answer, "response": response}


def check_answers(servers: dict[str, procs.Server], body: bytes) -> str:
    """Every server answers the review with 200; webhooks answer exactly as `webhook` does.

    Returns the webhook's decision. Floors only have to allow it.
    """
    answers = {}
    for name, server in servers.items():
        status, data = server.call("POST", "/mutate", body)
        answer = orjson.loads(data) if status == 200 else {}
        if status != 200 or "allowed" not in answer.get("response", {}):
            raise RuntimeError(f"{name} answered {status}: {data[:300]!r}")
        answers[name] = _comparable(answer)
    ours = answers["webhook"]
    for name, answer in answers.items():
        if (name in ("go", "go-h2", "floor") or name.startswith("webhook@")) and answer != ours:
            raise RuntimeError(f"{name} answered differently from the webhook:\n{answer}\n{ours}")
    response = ours["response"]
    return "mutated" if "patch" in response else ("allowed" if response["allowed"] else "denied")
