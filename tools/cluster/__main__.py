"""`python -m tools.cluster build` builds the control plane's binaries (cached outside the
checkout); `python -m tools.cluster up` starts a control plane with the test fleet's Nodes
and lwgpu installed from this checkout, prints how to point kubectl at it, and runs until
Ctrl-C (`--bare`: without lwgpu)."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

from tools.cluster import binaries, controlplane, fleet, install

FLEET = Path(__file__).resolve().parents[2] / "tests" / "data" / "nodes" / "mixed-fleet.yaml"


def _up(args: argparse.Namespace) -> int:
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="lwgpu-cluster-"))
    with controlplane.running(workdir / "control-plane") as plane:
        names = fleet.create(plane, Path(args.nodes))
        print(f"control plane up at {plane.server}, {len(names)} nodes from {args.nodes}")
        if not args.bare:
            with install.installed(plane, workdir / "pods"):
                print("lwgpu installed from this checkout (kubectl apply --server-side -k deploy/)")
                return _serve(plane)
        return _serve(plane)


def _serve(plane: controlplane.ControlPlane) -> int:
    kubectl = binaries.path("kubectl")
    print(
        "point kubectl at it:\n"
        f"  export KUBECONFIG={plane.kubeconfig}\n"
        f"  alias kubectl={kubectl}   # v{binaries.KUBE_VERSION[1:]}, matching the apiserver\n"
        "  kubectl apply -f examples/   # for instance\n"
        "Ctrl-C stops everything.",
        flush=True,
    )
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the cluster as Ctrl-C does


def main(argv: list[str] | None = None) -> int:
    """The `build` and `up` commands."""
    parser = argparse.ArgumentParser(prog="python -m tools.cluster", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build etcd and the Kubernetes binaries")
    up = commands.add_parser("up", help="start a control plane with lwgpu installed")
    up.add_argument("--nodes", default=str(FLEET), help="fleet file (default: %(default)s)")
    up.add_argument("--dir", help="work directory (default: a new temporary one)")
    up.add_argument("--bare", action="store_true", help="do not install lwgpu")
    args = parser.parse_args(argv)
    if args.command == "build":
        return binaries.build()
    if absent := binaries.missing():
        print(f"python -m tools.cluster: not built: {', '.join(absent)}; {binaries.HOW_TO_BUILD}")
        return 2
    return _up(args)


if __name__ == "__main__":
    sys.exit(main())
