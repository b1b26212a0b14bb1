"""The real manifests the tests run on: every file of `../shared/corpus/` (never edited), read
document by document exactly as `webhook review` reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.paths import CORPUS
from webhook.offline.manifests import Manifest, read_documents


def corpus_files() -> list[Path]:
    """Every manifest file of the shared corpus (its SOURCES.md is prose, not a manifest)."""
    return sorted(p for p in CORPUS.iterdir() if p.is_file() and p.name != "SOURCES.md")


def documents(path: Path) -> list[Manifest]:
    """The documents of one file, read exactly as `webhook review` reads them."""
    return read_documents([str(path)])


def named_documents(paths: list[Path]) -> list[tuple[str, Any]]:
    """(`file#index`, body) of every document of `paths`, for test ids."""
    return [(doc.where.rsplit("/", 1)[-1], doc.body) for path in paths for doc in documents(path)]
