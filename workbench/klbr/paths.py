"""Root-bound path resolution for the workspace.

Every workspace path is resolved against the root: a relative path is joined to it, an
absolute path must already lie inside it, and the result with every symlink followed
must still lie inside it. Anything else raises ``WorkspaceEscape``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["WorkspaceEscape", "resolve_in", "to_relative"]

PathArg = str | os.PathLike[str]


class WorkspaceEscape(PermissionError):
    """A path leads outside the workspace root (by ``..``, absolute path or symlink)."""

    def __init__(self, path: object, root: str, how: str) -> None:
        """Name the refused ``path``, the ``root`` and ``how`` it escaped."""
        super().__init__(f"cannot use path {str(path)!r}: {how} outside the workspace root {root!r}")
        self.path = str(path)
        self.root = root


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_in(root: str, path: PathArg, *, follow: bool = True) -> Path:
    """Return the absolute real path of ``path`` inside ``root`` (already a real path).

    With ``follow=False`` the last component is not followed if it is a symlink (to act
    on the link itself, as ``delete`` does); every parent still is.

    Raises ``WorkspaceEscape`` for an escape, ``TypeError`` for a non-path and
    ``ValueError`` for an empty path or one holding a NUL byte.

    >>> resolve_in("/srv/ws", "docs/../notes.md")
    PosixPath('/srv/ws/notes.md')
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"cannot resolve path: expected str or a path (got {type(path).__name__})")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"cannot resolve path: expected a text path (got {type(text).__name__})")
    if text == "":
        raise ValueError("cannot resolve path: path is empty (got '')")
    if "\0" in text:
        raise ValueError(f"cannot resolve path: path holds a NUL byte (got {text!r})")
    joined = os.path.normpath(os.path.join(root, text))
    if not _inside(joined, root):
        how = "absolute path is" if os.path.isabs(text) else "'..' leads"
        raise WorkspaceEscape(text, root, how)
    if follow or joined == root:
        real = os.path.realpath(joined)
    else:
        real = os.path.join(os.path.realpath(os.path.dirname(joined)), os.path.basename(joined))
    if not _inside(real, root):
        raise WorkspaceEscape(text, root, f"a symlink leads to {real!r},")
    return Path(real)


def to_relative(root: str, path: PathArg) -> str:
    """The POSIX path of ``path`` relative to ``root`` (``.`` for the root itself)."""
    rel = os.path.relpath(os.fspath(path), root)
    return Path(rel).as_posix()
