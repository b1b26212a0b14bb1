"""Policies: the frozen model (`model`), the validating loader (`load`), the YAML reader.

Text and parsed objects in, `Policy` objects out: which files hold policies and how they
are read is `webhook.files`.

Imports: `webhook.api`, the standard library and PyYAML. No I/O; never `webhook.files`,
`webhook.core` or anything above it, and never flask, werkzeug, gunicorn, kubernetes,
pynvml or prometheus_client.
"""

from .document import PolicyError
from .load import load_documents, policy_set
from .model import Policy, PolicySet, Profile, frozen_map

__all__ = [
    "Policy",
    "PolicyError",
    "PolicySet",
    "Profile",
    "frozen_map",
    "load_documents",
    "policy_set",
]
