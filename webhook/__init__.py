"""lwgpu: a Kubernetes admission webhook that places GPU-memory requests on lightweight GPUs.

Sub-packages, lowest layer first (docs/CONTRIBUTING.md; `lint-imports` checks the order):
`api` (Kubernetes vocabulary), `policy`, `scheduling` (node matching), `core` (the
decision) beside `compile` (the policy as Kubernetes admission policy objects), `admission`
(the review function), `kube` (client code) and `files` (reading the file system), then the
shells `server`, `offline` and `node`, and `cli`, the `python -m webhook` dispatcher.
"""

from importlib import resources
from pathlib import Path

# The one version: pyproject.toml reads it; the chart and the image carry copies that
# tests/deploy/test_version.py compares with it.
__version__ = "0.1.0"
# The shipped policy is package data: `webhook/defaults` is a link to the checkout's
# `policies/` (its one copy), whose `*.yaml` the wheel carries, so the CLI finds it from any
# directory.
DEFAULT_POLICIES = Path(str(resources.files(__name__).joinpath("defaults", "default.yaml")))
