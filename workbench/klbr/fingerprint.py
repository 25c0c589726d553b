"""What this worker process loaded: its interpreter and the ``klbr`` package, by content.

The host records a worker's fingerprint when it starts and compares it with a fresh one at
each boundary; a difference in the interpreter or the package means the process runs code
that is no longer on disk, and the host replaces it.

- ``executable``: the real path of ``sys.executable``;
- ``version``: the interpreter's version, e.g. ``3.11.7``;
- ``interpreter``: ``<inode>:<size>:<mtime_ns>`` of that file, which a reinstall changes;
- ``package``: the sha256 of every ``*.py`` file of the package, by relative path.

The package hash is the sha256 of ``klbr-package-v1\\n`` followed, per file in bytewise
order of its relative POSIX path, by the path and the content, each as an 8-byte big-endian
length and the bytes. ``__pycache__`` is not part of it. The host computes the same hash
(``runtime/kernel/_fingerprint.ts``) without starting Python.

The host asks for ``current()`` at every turn boundary, so the hash is kept with the files'
stat signature (path, inode, size, mtime and ctime in nanoseconds): while no file of the
package was added, removed, replaced or written, the kept hash is answered without reading
the files. Any write changes a file's ctime, which no tool can set back. A signature with a
time less than ``RACY_NS`` old is never kept, so a write in the same clock tick as the hash
(which could leave the times equal) is read again next time, as git treats racily-clean
index entries.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from typing import Any

__all__ = ["LOADED", "current", "package_hash"]

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


RACY_NS = 2_000_000_000
"""How recent a file's mtime or ctime may be for its package hash to be kept (2 s)."""

_kept: dict[str, tuple[tuple[Any, ...], str]] = {}


def _package_files(root: str) -> list[tuple[bytes, str]]:
    files: list[tuple[bytes, str]] = []
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_dir():
                    # As os.walk: a linked directory is listed, not entered.
                    if entry.name != "__pycache__" and not entry.is_symlink():
                        pending.append((entry.path, f"{prefix}{entry.name}/"))
                elif entry.name.endswith(".py"):
                    files.append((f"{prefix}{entry.name}".encode(), entry.path))
    return sorted(files)


def package_hash(root: str = PACKAGE_DIR) -> str:
    """The sha256 hex of the ``*.py`` files under ``root`` (see the module docstring).

    Answered from the kept hash while the files' stat signature is unchanged.

    >>> package_hash() == package_hash()
    True
    """
    files = _package_files(root)
    try:
        stats = [os.stat(path) for _, path in files]
    except OSError:
        stats = None  # a file went away while walking: read what is there
    signature: tuple[Any, ...] | None = None
    if stats is not None:
        signature = tuple(
            (rel, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) for (rel, _), st in zip(files, stats)
        )
        kept = _kept.get(root)
        if kept is not None and kept[0] == signature:
            return kept[1]
    digest = hashlib.sha256(b"klbr-package-v1\n")
    for rel, path in files:
        with open(path, "rb") as handle:
            data = handle.read()
        digest.update(_u64(len(rel)) + rel)
        digest.update(_u64(len(data)) + data)
    value = digest.hexdigest()
    newest = max((max(st.st_mtime_ns, st.st_ctime_ns) for st in stats or []), default=0)
    if signature is not None and newest < time.time_ns() - RACY_NS:
        _kept[root] = (signature, value)
    else:
        _kept.pop(root, None)
    return value


def _interpreter() -> tuple[str, str]:
    executable = os.path.realpath(sys.executable)
    try:
        info = os.stat(executable)
    except OSError as exc:
        return executable, f"missing ({type(exc).__name__})"
    return executable, f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"


def current() -> dict[str, Any]:
    """The fingerprint of what is on disk now: the interpreter file and the package."""
    executable, identity = _interpreter()
    return {
        "executable": executable,
        "version": platform.python_version(),
        "interpreter": identity,
        "package": package_hash(),
    }


LOADED: dict[str, Any] = current()
"""The fingerprint taken when this module was imported, with the rest of the package."""
