"""Load policy files (a file or a directory) into a validated `PolicySet`.

The reading half of `webhook.policy.load`: which files a path names (the directory rule of
`directory`), their text, and an unreadable file or directory reported like an invalid
document, so that every problem of a load is listed at once.
"""

from __future__ import annotations

import os
from pathlib import Path

from webhook.policy import Policy, PolicySet, load_documents, policy_set
from webhook.policy.model import KIND

from .directory import POLICY_SUFFIXES, files_under, unreadable


def policy_files(path: Path) -> list[Path]:
    """The policy files of a path, by the one directory rule of `webhook.files.directory`."""
    return files_under(path, POLICY_SUFFIXES)


def load_policies(*paths: str | os.PathLike[str]) -> PolicySet:
    """Load and validate every policy under `paths`, as one set; raise `PolicyError` listing
    all errors (see `webhook.policy.policy_set`)."""
    errors: list[str] = []
    policies: list[Policy] = []
    for path in paths:
        root = Path(path)
        if not root.exists():
            errors.append(f"{root}: no such file or directory")
            continue
        found, failed = len(policies), len(errors)
        try:
            files = policy_files(root)
        except OSError as err:  # a directory that cannot be listed, or vanished meanwhile
            errors.append(unreadable(err.filename or root, err))
            continue
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                errors.append(unreadable(file, err))
                continue
            policies.extend(load_documents(text, str(file), errors))
        if len(policies) == found and len(errors) == failed:
            errors.append(f"{root}: no {KIND} documents found")
    return policy_set(policies, errors)
