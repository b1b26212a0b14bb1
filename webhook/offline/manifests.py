"""Read the inputs of `webhook review`: files, directories or stdin of YAML or JSON.

A document is an AdmissionReview, a `kind: List` (or any `...List` with `items`),
or an object manifest. Each comes with where it was found, for messages. A directory is
read by the rule policies are (`webhook.files.directory`: recursive, name order, dot-names
skipped), with `.json` files besides `.yaml`/`.yml`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.files import MANIFEST_SUFFIXES, files_under, unreadable
from webhook.policy.yamldocs import YamlError, load_all


class InputError(ValueError):
    """An input that cannot be read or parsed (exit code 2); `where` is the input it is
    about (a file, `file#index`), for reports that group by file (`-o junit`)."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


@dataclass(frozen=True)
class Manifest:
    """One manifest (an object or an AdmissionReview) and where it came from (`file#index`)."""

    where: str
    body: Any


def _parse(text: str, where: str) -> list[Any]:
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
            return data if isinstance(data, list) else [data]
        except json.JSONDecodeError:
            pass  # YAML flow style also starts with '{': let the YAML parser judge it
        except RecursionError:
            raise InputError(f"{where}: not valid JSON: nested too deeply", where) from None
    try:
        documents = load_all(text, where)
    except YamlError as err:
        raise InputError(str(err), where) from None
    # A top-level sequence holds documents, as a JSON array does.
    return documents[0] if len(documents) == 1 and isinstance(documents[0], list) else documents


def _expand(body: Any, where: str) -> Iterator[Manifest]:
    kind = body.get("kind") if isinstance(body, dict) else None
    if isinstance(kind, str) and kind.endswith("List") and isinstance(body.get("items"), list):
        for index, item in enumerate(body["items"]):
            yield from _expand(item, f"{where}.items[{index}]")
    elif body is not None:
        yield Manifest(where, body)


def _read_file(file: Path | None) -> list[Manifest]:
    """The documents of one file (None: standard input); raises `InputError`."""
    name = "<stdin>" if file is None else str(file)
    try:
        text = sys.stdin.read() if file is None else file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(unreadable(name, err), name) from None
    documents: list[Manifest] = []
    for index, body in enumerate(_parse(text, name)):
        documents.extend(_expand(body, f"{name}#{index}"))
    return documents


def read_inputs(paths: list[str]) -> tuple[list[Manifest], list[InputError]]:
    """Every document of every readable input, in order, and one error per unreadable file.

    One unreadable file (a Helm template among manifests) must not hide the verdicts of
    the others: `review` reports each error and still reviews the rest.
    """
    documents: list[Manifest] = []
    errors: list[InputError] = []
    for path in paths or ["-"]:
        try:
            files: list[Path | None] = (
                [None] if path == "-" else list(files_under(Path(path), MANIFEST_SUFFIXES))
            )
        except OSError as err:  # a directory that cannot be listed
            errors.append(InputError(unreadable(err.filename or path, err), path))
            continue
        for file in files:
            try:
                documents.extend(_read_file(file))
            except InputError as err:
                errors.append(err)
    if not documents and not errors:
        # An empty review passing CI silently usually means a wrong path or an empty pipe.
        named = ", ".join("<stdin>" if p == "-" else p for p in paths or ["-"])
        errors.append(InputError(f"no objects to review in {named}", named))
    return documents, errors


def read_documents(paths: list[str]) -> list[Manifest]:
    """Every document of every input, in order; `-` is standard input. Raises the first
    `InputError` (for inputs that must be read whole, such as a node list)."""
    documents, errors = read_inputs(paths)
    if errors:
        raise errors[0]
    return documents
