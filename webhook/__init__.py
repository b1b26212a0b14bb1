"""lwgpu: a Kubernetes admission webhook that places GPU-memory requests on lightweight GPUs.

Sub-packages, lowest layer first (docs/CONTRIBUTING.md; `lint-imports` checks the order):
`api` (Kubernetes vocabulary), `policy`, `core` (the decision), `admission` (the review
function), `kube` (client code), then the shells `server`, `offline` and `node`, and
`cli`, the `python -m webhook` dispatcher.
"""

from pathlib import Path

__version__ = "0.1.0"
DEFAULT_POLICIES = Path(__file__).resolve().parent.parent / "policies" / "default.yaml"
