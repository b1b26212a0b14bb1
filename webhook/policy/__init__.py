"""Policies: the frozen model (`model`) and the validating YAML loader (`load`)."""

from .load import PolicyError, load_documents, load_policies
from .model import GPU_RESOURCE, MEM_LABEL, Policy, PolicySet, Profile, frozen_map

__all__ = ["GPU_RESOURCE", "MEM_LABEL", "Policy", "PolicyError", "PolicySet", "Profile",
           "frozen_map", "load_documents", "load_policies"]
