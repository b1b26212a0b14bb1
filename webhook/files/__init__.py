"""Reading from the file system: which files a path names (`directory`, the one rule of
`serve --policies`, `policy check` and `review`), how an unreadable one is reported, and
policy files loaded into a `PolicySet` (`policies`).

The pure layers parse text and objects only; this package hands them the text.
Imports: `webhook.policy`, `webhook.api` and the standard library. `webhook.api`,
`webhook.policy`, `webhook.scheduling`, `webhook.core` and `webhook.admission` never
import it (an import-linter contract); the shells above do.
"""

from .directory import MANIFEST_SUFFIXES, POLICY_SUFFIXES, files_under, unreadable
from .policies import load_policies, policy_files

__all__ = [
    "MANIFEST_SUFFIXES",
    "POLICY_SUFFIXES",
    "files_under",
    "load_policies",
    "policy_files",
    "unreadable",
]
