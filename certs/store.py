"""Certificate files on disk: read a set from a directory, replace it with atomic writes.

Each file is written to a temporary file in the same directory and moved over the old
one with ``os.replace``, so a reader (the webhook server re-reading its certificate)
never sees a half-written file. Keys get mode 0600 from the moment they exist.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .certset import CA_CRT, CA_KEY, FILE_NAMES, SECRET_KEYS, TLS_CRT, TLS_KEY, CertSet
from .errors import CertError

# Written in this order so that a reader sees the new CA bundle before a certificate signed
# by a new CA, and the new key right before the certificate that needs it.
WRITE_ORDER = (CA_CRT, CA_KEY, TLS_KEY, TLS_CRT)


def read_files(
    directory: str | os.PathLike[str], names: Iterable[str] = FILE_NAMES
) -> dict[str, bytes]:
    """The named files that exist in the directory, name -> bytes; unreadable is a CertError."""
    found = {}
    for name in names:
        path = Path(directory, name)
        try:
            found[name] = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise CertError(f"cannot read {path}: {exc.strerror or exc}") from None
    return found


def load_dir(directory: str | os.PathLike[str]) -> CertSet | None:
    """The set stored in the directory, None when it holds none of the files."""
    files = read_files(directory)
    return CertSet.from_files(files, str(directory)) if files else None


def write_dir(directory: str | os.PathLike[str], cert_set: CertSet) -> None:
    """Write every file of the set into the directory (created 0700 if missing), atomically each."""
    Path(directory).mkdir(mode=0o700, parents=True, exist_ok=True)
    files = cert_set.to_files()
    for name in WRITE_ORDER:
        write_atomic(Path(directory, name), files[name], 0o600 if name in SECRET_KEYS else 0o644)


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` with ``data`` via a temp file in the same directory and ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates the file 0600, so a key is never readable by others, even briefly.
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # The rename itself is durable only once the directory entry is flushed.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
