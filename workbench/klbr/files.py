"""``FileHandle``: one workspace file, read and edited as UTF-8 text.

A handle keeps the file's path relative to the workspace root and checks it again on
every operation, so a file replaced by a symlink that leads out is refused then too.
``write`` and ``replace`` write a temporary file, fsync it and rename it over the old one:
the file is either the old text or the new text, never half of each.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from klbr.paths import resolve_in

__all__ = ["FileHandle"]


def _atomic_write(target: Path, text: str) -> None:
    mode = None
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode if mode is not None else 0o644)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class FileHandle:
    """A workspace file, returned by ``await open_file(path)``.

    Methods are coroutines: ``await f.read()``, ``await f.write(text)``,
    ``await f.replace(old, new)``, ``await f.append(text)``. ``f.path`` is the path
    relative to the workspace root.
    """

    def __init__(self, root: str, path: str) -> None:
        """Bind the file at ``path`` (relative to ``root``); use ``open_file`` instead."""
        self._root = root
        self.path = path

    def _target(self) -> Path:
        return resolve_in(self._root, self.path)

    async def read(self) -> str:
        """Return the whole file as text (UTF-8; invalid bytes raise ``UnicodeDecodeError``)."""
        return self._target().read_text(encoding="utf-8")

    async def write(self, text: str) -> int:
        """Replace the whole file with ``text`` atomically; return the characters written."""
        if not isinstance(text, str):
            raise TypeError(f"cannot write {self.path}: text must be a string (got {type(text).__name__})")
        await asyncio.to_thread(_atomic_write, self._target(), text)
        return len(text)

    async def replace(self, old: str, new: str) -> None:
        """Replace the one occurrence of ``old`` with ``new`` and save atomically.

        Raises ``ValueError`` naming the count when ``old`` occurs 0 or several times (the
        file is left untouched), or when ``old`` is empty.

        >>> await note.replace("colour", "color")  # doctest: +SKIP
        """
        if not isinstance(old, str) or not isinstance(new, str):
            raise TypeError(f"cannot replace in {self.path}: old and new must be strings")
        if old == "":
            raise ValueError(f"cannot replace in {self.path}: old text is empty (got '')")
        target = self._target()
        text = target.read_text(encoding="utf-8")
        count = text.count(old)
        if count != 1:
            shown = old if len(old) <= 80 else old[:77] + "..."
            raise ValueError(
                f"cannot replace in {self.path}: expected exactly one occurrence of {shown!r} (got {count})"
            )
        await asyncio.to_thread(_atomic_write, target, text.replace(old, new, 1))

    async def append(self, text: str) -> int:
        """Append ``text`` to the end of the file and fsync; return the characters written."""
        if not isinstance(text, str):
            raise TypeError(f"cannot append to {self.path}: text must be a string (got {type(text).__name__})")
        with open(self._target(), "a", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        return len(text)

    def __repr__(self) -> str:
        return f"<file {self.path}>"
