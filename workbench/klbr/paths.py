"""Root-bound path resolution for the workspace, without ever letting the kernel follow a link.

A path is walked one component at a time from a descriptor of the root: each directory is
opened relative to its parent with ``O_NOFOLLOW``, and a symlink met on the way is read and
resolved here, against the root, never by the kernel. So a directory swapped for a symlink
between a check and a use cannot carry an operation outside the root: the operation works
on the descriptor of the directory that was checked. ``..`` above the root, an absolute path
elsewhere, a symlink that leads out, and anything inside a denied directory (the state
directory) raise ``WorkspaceEscape``.
"""

from __future__ import annotations

import contextlib
import os
import stat

__all__ = ["Located", "WorkspaceEscape", "locate"]

PathArg = str | os.PathLike[str]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_LINKS = 40
_RETRIES = 8


class WorkspaceEscape(PermissionError):
    """A path leads outside the workspace root (by ``..``, absolute path or symlink), or
    into the state directory, which is never part of the workspace."""

    def __init__(self, path: object, root: str, how: str, *, message: str | None = None) -> None:
        """Name the refused ``path``, the ``root`` and ``how`` it escaped."""
        super().__init__(message or f"cannot use path {str(path)!r}: {how} outside the workspace root {root!r}")
        self.path = str(path)
        self.root = root


class _Raced(Exception):
    """A component changed into a link while it was being opened: walk again."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class Located:
    """Where a path ends: an open descriptor of its parent directory and its last name.

    ``name`` is ``""`` for the root itself (``parent_fd`` is then the root). ``rel`` is the
    POSIX path relative to the root after resolution; ``exists`` says whether ``name`` was
    there when it was walked. Use it as a context manager: it closes its descriptors.
    """

    def __init__(self, root: str, fds: list[int], parts: list[str], name: str, exists: bool) -> None:
        self.root = root
        self._fds = fds
        self.parent_fd = fds[-1]
        self.name = name
        self.rel = "/".join([*parts, name]) if name or parts else "."
        self.exists = exists

    @property
    def path(self) -> str:
        """The absolute path inside the root (for messages and the host)."""
        return self.root if self.rel == "." else os.path.join(self.root, self.rel)

    def lstat(self) -> os.stat_result:
        """``lstat`` of the last component (the root when ``name`` is empty)."""
        if not self.name:
            return os.fstat(self.parent_fd)
        return os.stat(self.name, dir_fd=self.parent_fd, follow_symlinks=False)

    def close(self) -> None:
        """Close every descriptor of the walk."""
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _checked_text(path: PathArg) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"cannot resolve path: expected str or a path (got {type(path).__name__})")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"cannot resolve path: expected a text path (got {type(text).__name__})")
    if text == "":
        raise ValueError("cannot resolve path: path is empty (got '')")
    if "\0" in text:
        raise ValueError(f"cannot resolve path: path holds a NUL byte (got {text!r})")
    return text


def _check_deny(text: str, root: str, parts: list[str], deny: tuple[str, ...]) -> None:
    here = os.path.join(root, *parts)
    for denied in deny:
        if _inside(here, denied):
            raise WorkspaceEscape(
                text, root, "",
                message=f"cannot use path {text!r}: it is inside the state directory {denied!r}, "
                "which is never part of the workspace",
            )


def locate(
    root: str,
    path: PathArg,
    *,
    follow: bool = True,
    deny: tuple[str, ...] = (),
    make_parents: bool = False,
) -> Located:
    """Walk ``path`` inside ``root`` (a real, absolute path) and return where it ends.

    With ``follow=False`` a symlink as the last component is the result itself (to act on
    the link, as ``delete`` does). With ``make_parents=True`` missing directories on the way
    are created (each relative to its parent's descriptor).

    Raises ``WorkspaceEscape`` for an escape or a denied directory, ``FileNotFoundError`` or
    ``NotADirectoryError`` for a missing or non-directory parent, ``TypeError`` for a
    non-path and ``ValueError`` for an empty path or one holding a NUL byte.

    >>> with locate("/usr", "lib/../bin") as where:
    ...     where.path
    '/usr/bin'
    """
    text = _checked_text(path)
    joined = os.path.normpath(os.path.join(root, text))
    if not _inside(joined, root):
        how = "absolute path is" if os.path.isabs(text) else "'..' leads"
        raise WorkspaceEscape(text, root, how)
    start = [p for p in os.path.relpath(joined, root).split(os.sep) if p not in ("", ".")]
    for _ in range(_RETRIES):
        try:
            return _walk(root, text, start, follow, tuple(os.path.normpath(d) for d in deny), make_parents)
        except _Raced:
            continue
    raise WorkspaceEscape(text, root, "", message=f"cannot use path {text!r}: it kept changing while it was opened")


def _walk(
    root: str, text: str, start: list[str], follow: bool, deny: tuple[str, ...], make_parents: bool
) -> Located:
    fds = [os.open(root, _DIR_FLAGS)]
    parts: list[str] = []
    pending = list(start)
    links = 0
    try:
        _check_deny(text, root, parts, deny)
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if not parts:
                    raise WorkspaceEscape(text, root, "'..' leads")
                parts.pop()
                os.close(fds.pop())
                continue
            _check_deny(text, root, [*parts, name], deny)
            last = not pending
            try:
                info = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
            except FileNotFoundError:
                if last:
                    return Located(root, fds, parts, name, exists=False)
                if not make_parents:
                    raise FileNotFoundError(f"cannot use path {text!r}: {'/'.join([*parts, name])} does not exist") from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fds[-1])
                pending.insert(0, name)
                continue
            if stat.S_ISLNK(info.st_mode) and (follow or not last):
                links += 1
                if links > _MAX_LINKS:
                    raise OSError(f"cannot use path {text!r}: too many levels of symbolic links")
                target = os.readlink(name, dir_fd=fds[-1])
                if os.path.isabs(target):
                    real = os.path.normpath(target)
                    if not _inside(real, root):
                        raise WorkspaceEscape(text, root, f"a symlink leads to {real!r},")
                    for fd in fds[1:]:
                        os.close(fd)
                    del fds[1:]
                    parts = []
                    pending = [p for p in os.path.relpath(real, root).split(os.sep) if p not in ("", ".")] + pending
                else:
                    real = os.path.normpath(os.path.join(root, *parts, target))
                    if not _inside(real, root):
                        raise WorkspaceEscape(text, root, f"a symlink leads to {real!r},")
                    pending = target.split("/") + pending
                continue
            if last:
                return Located(root, fds, parts, name, exists=True)
            if not stat.S_ISDIR(info.st_mode):
                raise NotADirectoryError(f"cannot use path {text!r}: {'/'.join([*parts, name])} is not a directory")
            try:
                fds.append(os.open(name, _DIR_FLAGS, dir_fd=fds[-1]))
            except OSError as err:
                # ELOOP: it became a link after the stat; ENOTDIR: it became a file. Walk again.
                raise _Raced() from err
            parts.append(name)
        # The walk ended on a directory it opened ("a/b/.." or a link to a directory):
        # answer with its parent, like any other last component.
        if not parts:
            return Located(root, fds, [], "", exists=True)
        os.close(fds.pop())
        name = parts.pop()
        return Located(root, fds, parts, name, exists=True)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
