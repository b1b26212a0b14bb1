"""Policies: the frozen model (`model`), the validating loader (`load`), the YAML reader.

Imports: `webhook.api`, the standard library and PyYAML. Never `webhook.core` or anything
above it, and never flask, werkzeug, gunicorn, kubernetes, pynvml or prometheus_client.
"""

from .document import PolicyError
from .load import load_documents, load_policies
from .model import Policy, PolicySet, Profile, frozen_map

__all__ = [
    "Policy",
    "PolicyError",
    "PolicySet",
    "Profile",
    "frozen_map",
    "load_documents",
    "load_policies",
]
