"""Certificates for the webhook: a small CA, the serving certificate, rotation and installer.

``generate`` keeps a set in a directory (development, and the files the server reads);
``install`` keeps it in a Secret and patches ``caBundle`` into webhook configurations.
"""

from .authority import Spec
from .certset import CertSet
from .directory import check, generate
from .errors import CertError
from .rotation import Plan, ensure, plan
from .store import load_dir

__all__ = [
    "CertError",
    "CertSet",
    "Plan",
    "Spec",
    "check",
    "ensure",
    "generate",
    "load_dir",
    "plan",
]
