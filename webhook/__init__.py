"""lwgpu: a Kubernetes admission webhook that places GPU-memory requests on lightweight GPUs."""

from pathlib import Path

__version__ = "0.1.0"
DEFAULT_POLICIES = Path(__file__).resolve().parent.parent / "policies" / "default.yaml"
