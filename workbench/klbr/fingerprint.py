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
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from typing import Any

__all__ = ["LOADED", "current", "package_hash"]

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def package_hash(root: str = PACKAGE_DIR) -> str:
    """The sha256 hex of the ``*.py`` files under ``root`` (see the module docstring)."""
    files: list[tuple[bytes, str]] = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                files.append((rel.encode(), path))
    digest = hashlib.sha256(b"klbr-package-v1\n")
    for rel, path in sorted(files):
        with open(path, "rb") as handle:
            data = handle.read()
        digest.update(_u64(len(rel)) + rel)
        digest.update(_u64(len(data)) + data)
    return digest.hexdigest()


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
