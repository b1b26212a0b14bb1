"""Error and warning collection for one policy document: every message says file, document
and field."""

from __future__ import annotations

from typing import Any

from webhook.api.text import as_yaml
from webhook.api.types import KubeObject


class PolicyError(ValueError):
    """One or more policy documents are invalid; `errors` holds one message each."""

    def __init__(self, errors: list[str]):
        self.errors = tuple(errors)
        super().__init__("\n".join(errors))


class PolicyDocument:
    """Collects errors for one document, each prefixed with where it is."""

    def __init__(self, where: str, errors: list[str]):
        self.where = where
        self.errors = errors
        # What loads but is likely not meant; `policy check` prints them.
        self.warnings: list[str] = []

    def error(self, path: str, message: str) -> None:
        self.errors.append(f"{self.where}: {path}: {message}")

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(f"{self.where}: {path}: {message}")

    def mapping(self, value: Any, path: str, allowed: set[str]) -> KubeObject:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(path, f"must be a mapping, got {as_yaml(value)}")
            return {}
        for key in value:
            if key not in allowed:
                self.error(
                    f"{path}.{key}" if path else str(key),
                    f"unknown field (allowed: {', '.join(sorted(allowed))})",
                )
        return value

    def check(self, ok: bool, path: str, message: str) -> bool:
        if not ok:
            self.error(path, message)
        return ok
