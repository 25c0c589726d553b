"""``FileHandle``: one workspace file, read and edited as UTF-8 text.

A handle keeps the file's path relative to the workspace root and walks it again on every
operation (``klbr.paths.locate``), so a file or directory replaced by a symlink that leads
out is refused then too, and an operation always works on the descriptor of the directory
it checked: a swap between the check and the write cannot carry the write outside.
``write`` and ``replace`` write a temporary file, fsync it and rename it over the old one
within that directory: the file is either the old text or the new text, never half of each.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator

from klbr.awaited import api_class
from klbr.paths import Located, locate

__all__ = ["FileHandle", "ReadOnlyPath", "read_text_at", "touch_at", "writing"]


class ReadOnlyPath(PermissionError):
    """A write to a path the sandbox keeps read-only: klbr's own code (unless the owner set
    ``workspace { self_edit #true }``) or the repository's ``.git/hooks`` and ``.git/config``."""


@contextlib.contextmanager
def writing(rel: str) -> Iterator[None]:
    """Turn the sandbox's refusals of a write under ``rel`` (a read-only mount: ``EROFS``, or a
    mount point that cannot be replaced: ``EBUSY``) into one ``ReadOnlyPath`` that says why."""
    try:
        yield
    except OSError as err:
        if err.errno not in (errno.EROFS, errno.EBUSY):
            raise
        raise ReadOnlyPath(
            f"cannot write {rel}: it is read-only to cells (klbr's own code, unless "
            "workspace { self_edit #true }, and the repository's .git/hooks and .git/config; "
            f"see docs/security.md) (got {err.strerror})",
        ) from err

def _open_at(where: Located, flags: int, mode: int = 0o644) -> int:
    if not where.name:
        raise IsADirectoryError(f"cannot open {where.rel}: it is the workspace root")
    return os.open(where.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=where.parent_fd)


def _open_regular(where: Located, flags: int) -> int:
    """Open the regular file ``where`` names, never through a link. A pipe, socket or device
    is refused at once: opening or reading one could wait for ever, and the cell with it."""
    try:
        fd = _open_at(where, flags | os.O_NONBLOCK)
    except OSError as err:
        if err.errno != errno.ENXIO:  # a pipe no process reads, opened to write
            raise
        fd = None
    if fd is None or not stat.S_ISREG(os.fstat(fd).st_mode):
        if fd is not None:
            os.close(fd)
        raise OSError(f"cannot open {where.rel}: it is not a regular file (a pipe, socket or device)")
    return fd


def read_text_at(where: Located) -> str:
    """Read the regular file ``where`` names as UTF-8 text, never through a link."""
    fd = _open_regular(where, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        return handle.read().decode("utf-8")


def touch_at(where: Located) -> None:
    """Create the file ``where`` names if it is missing (never through a link)."""
    os.close(_open_at(where, os.O_WRONLY | os.O_CREAT))


def _atomic_write(where: Located, text: str) -> None:
    mode = 0o644
    with contextlib.suppress(FileNotFoundError):
        info = where.lstat()
        if stat.S_ISREG(info.st_mode):
            mode = info.st_mode & 0o7777
    tmp = f".{where.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=where.parent_fd)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
            os.fchmod(out.fileno(), mode)
        os.replace(tmp, where.name, src_dir_fd=where.parent_fd, dst_dir_fd=where.parent_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=where.parent_fd)
        raise


def _occurrences(text: str, old: str) -> int:
    """How many times ``old`` occurs in ``text``, overlapping occurrences included: ``str.count``
    counts ``}\\n}`` once in ``}\\n}\\n}``, where it starts twice and the one meant is ambiguous."""
    count, at = 0, text.find(old)
    while at != -1:
        count += 1
        at = text.find(old, at + 1)
    return count


@api_class("file", read="nothing was read", write="nothing was written", replace="nothing was replaced",
           append="nothing was appended")
class FileHandle:
    """A workspace file, returned by ``await open_file(path)``.

    Methods are coroutines: ``await f.read()``, ``await f.write(text)``,
    ``await f.replace(old, new)``, ``await f.append(text)``. ``f.path`` is the path
    relative to the workspace root.
    """

    def __init__(self, root: str, path: str, deny: tuple[str, ...] = ()) -> None:
        """Bind the file at ``path`` (relative to ``root``); use ``open_file`` instead."""
        self._root = root
        self._deny = deny
        self.path = path

    def _locate(self) -> Located:
        return locate(self._root, self.path, deny=self._deny)

    async def read(self) -> str:
        """Return the whole file as text (UTF-8; invalid bytes raise ``UnicodeDecodeError``)."""
        with self._locate() as where:
            return read_text_at(where)

    async def write(self, text: str) -> int:
        """Replace the whole file with ``text`` atomically; return the characters written."""
        if not isinstance(text, str):
            raise TypeError(f"cannot write {self.path}: text must be a string (got {type(text).__name__})")
        with self._locate() as where, writing(where.rel):
            await asyncio.to_thread(_atomic_write, where, text)
        return len(text)

    async def replace(self, old: str, new: str) -> None:
        """Replace the one occurrence of ``old`` with ``new`` and save atomically.

        Raises ``ValueError`` naming the count when ``old`` occurs 0 or several times, overlapping
        ones included (the file is left untouched), or when ``old`` is empty.

        >>> await note.replace("colour", "color")  # doctest: +SKIP
        """
        if not isinstance(old, str) or not isinstance(new, str):
            raise TypeError(f"cannot replace in {self.path}: old and new must be strings")
        if old == "":
            raise ValueError(f"cannot replace in {self.path}: old text is empty (got '')")
        with self._locate() as where:
            text = read_text_at(where)
            count = _occurrences(text, old)
            if count != 1:
                shown = old if len(old) <= 80 else old[:77] + "..."
                raise ValueError(
                    f"cannot replace in {self.path}: expected exactly one occurrence of {shown!r} (got {count})"
                )
            with writing(where.rel):
                await asyncio.to_thread(_atomic_write, where, text.replace(old, new, 1))

    async def append(self, text: str) -> int:
        """Append ``text`` to the end of the file and fsync; return the characters written."""
        if not isinstance(text, str):
            raise TypeError(f"cannot append to {self.path}: text must be a string (got {type(text).__name__})")
        with self._locate() as where, writing(where.rel):
            fd = _open_regular(where, os.O_WRONLY | os.O_APPEND)
            with os.fdopen(fd, "a", encoding="utf-8", newline="") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
        return len(text)

    def __repr__(self) -> str:
        return f"<file {self.path}>"
