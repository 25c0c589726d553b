"""Listing and searching the workspace tree: ``Entry``/``Listing`` and ``Match``/``SearchResult``.

Both walks stay inside the root: symlinks are listed as links and never descended into.
Both are capped, and a capped result says so (``truncated``) instead of passing for a
complete one.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from dataclasses import dataclass, field

from klbr.paths import Located

__all__ = ["Entry", "Listing", "Match", "SearchResult", "list_entries", "search_tree"]

_SKIP_DIRS = frozenset({".git"})
_MAX_FILE_BYTES = 8 * 1024 * 1024
_MAX_LINE_CHARS = 400
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Entry:
    """One listed path: ``path`` relative to the root, ``kind`` (file/dir/link/other), ``size``."""

    path: str
    kind: str
    size: int

    def __repr__(self) -> str:
        if self.kind == "dir":
            return f"{self.path}/"
        if self.kind == "link":
            return f"{self.path} -> (link)"
        return f"{self.path} ({self.size} B)"


class Listing(list[Entry]):
    """A list of ``Entry``; ``truncated`` is True when the walk stopped at its cap."""

    truncated: bool = False

    def __repr__(self) -> str:
        lines = [repr(entry) for entry in self]
        if self.truncated:
            lines.append(f"[truncated: stopped after {len(self)} entries]")
        return "\n".join(lines) if lines else "(empty)"


def _kind(info: os.stat_result) -> str:
    if stat.S_ISLNK(info.st_mode):
        return "link"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    return "file" if stat.S_ISREG(info.st_mode) else "other"


def _entry(rel: str, info: os.stat_result) -> Entry:
    kind = _kind(info)
    return Entry(rel, kind, info.st_size if kind == "file" else 0)


def _join(base: str, *names: str) -> str:
    return os.path.normpath(os.path.join(base, *names)).replace(os.sep, "/")


def _open_dir(where: Located) -> int | None:
    """A descriptor of the directory ``where`` names, or None when it is not a directory."""
    if not where.name:
        return os.dup(where.parent_fd)
    if not where.exists:
        return None
    if not stat.S_ISDIR(where.lstat().st_mode):
        return None
    return os.open(where.name, _DIR_FLAGS, dir_fd=where.parent_fd)


def _walk(fd: int, rel: str, hidden: frozenset[str], skip: frozenset[str] = frozenset()):  # noqa: ANN202
    """``os.fwalk`` from ``fd`` (never following links), pruning hidden and skipped directories."""
    for dirpath, dirnames, filenames, dirfd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
        here = _join(rel, dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in skip and _join(here, d) not in hidden)
        yield here, dirnames, [f for f in filenames if _join(here, f) not in hidden], dirfd


def list_entries(where: Located, recursive: bool, match: str | None, max_entries: int, hidden: frozenset[str]) -> Listing:
    """List the directory ``where`` names one level deep, or walk it; keep names matching
    the glob ``match``. A file lists just that file. Paths in ``hidden`` (relative to the
    root: the state directory) are left out. Raises ``FileNotFoundError`` when it is missing.
    """
    out = Listing()
    if where.name and not where.exists:
        raise FileNotFoundError(f"cannot list {where.rel}: no such file or directory")
    fd = _open_dir(where)
    if fd is None:
        out.append(_entry(where.rel, where.lstat()))
        return out
    base = "." if not where.name else where.rel
    try:
        if not recursive:
            for name in sorted(os.listdir(fd)):
                rel = _join(base, name)
                if rel in hidden or (match is not None and not fnmatch.fnmatch(name, match)):
                    continue
                if len(out) >= max_entries:
                    out.truncated = True
                    break
                _append_present(out, rel, name, fd)
            return out
        for here, dirnames, filenames, dirfd in _walk(fd, base, hidden):
            for name in sorted(dirnames + filenames):
                if match is None or fnmatch.fnmatch(name, match):
                    if len(out) >= max_entries:
                        out.truncated = True
                        return out
                    _append_present(out, _join(here, name), name, dirfd)
        return out
    finally:
        os.close(fd)


def _append_present(out: Listing, rel: str, name: str, dir_fd: int) -> None:
    """Add the entry ``name`` of the directory ``dir_fd`` as ``rel``, unless it went since the
    directory was read (a build deleting its output): a listing shows what is there."""
    try:
        out.append(_entry(rel, os.stat(name, dir_fd=dir_fd, follow_symlinks=False)))
    except FileNotFoundError:
        pass


@dataclass(frozen=True)
class Match:
    """One matching line: ``path`` relative to the root, 1-based ``line`` and its ``text``."""

    path: str
    line: int
    text: str

    def __repr__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


@dataclass
class SearchResult:
    """The matches of one search; ``truncated`` is True when it stopped at ``max_results``."""

    pattern: str
    matches: list[Match] = field(default_factory=list)
    truncated: bool = False
    files_skipped: int = 0

    def __str__(self) -> str:
        lines = [repr(m) for m in self.matches]
        if self.truncated:
            lines.append(f"[truncated: stopped at {len(self.matches)} matches; more exist]")
        elif not self.matches:
            lines.append(f"no matches for {self.pattern!r}")
        return "\n".join(lines)

    __repr__ = __str__


def _read_small(name: str, dirfd: int) -> bytes | None:
    """The bytes of a regular file of at most 8 MiB, opened without following a link."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dirfd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_FILE_BYTES:
            return None
        return handle.read(_MAX_FILE_BYTES + 1)


def _files(where: Located, hidden: frozenset[str]):  # noqa: ANN202 - (rel, name, dirfd) triples
    fd = _open_dir(where)
    if fd is None:
        yield where.rel, where.name, where.parent_fd
        return
    try:
        base = "." if not where.name else where.rel
        for here, _dirs, filenames, dirfd in _walk(fd, base, hidden, _SKIP_DIRS):
            for name in sorted(filenames):
                yield _join(here, name), name, dirfd
    finally:
        os.close(fd)


def _lines(text: str) -> list[str]:
    """The lines of ``text`` split at newlines only, as editors, grep and ``code.lines`` count
    them (``str.splitlines`` also splits at form feeds, lone carriage returns and U+2028, and
    every line number after one would be off); a CRLF's carriage return is not kept."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def search_tree(where: Located, pattern: str, max_results: int, regex: bool, hidden: frozenset[str]) -> SearchResult:
    """Find lines under the path ``where`` names containing ``pattern`` (a substring, or a regex).

    Skips ``.git`` directories, symlinks, binary files (a NUL byte in the first 8 KiB), files
    over 8 MiB (counted in ``files_skipped``) and ``hidden`` paths. Raises ``re.error`` for a
    bad regex and ``FileNotFoundError`` for a missing target.
    """
    if where.name and not where.exists:
        raise FileNotFoundError(f"cannot search {where.rel}: no such file or directory")
    compiled = re.compile(pattern) if regex else None
    result = SearchResult(pattern)
    for rel, name, dirfd in _files(where, hidden):
        data = _read_small(name, dirfd)
        if data is None or b"\0" in data[:8192]:
            result.files_skipped += 1
            continue
        for number, line in enumerate(_lines(data.decode("utf-8", "replace")), 1):
            found = compiled.search(line) is not None if compiled else pattern in line
            if not found:
                continue
            if len(result.matches) >= max_results:
                result.truncated = True
                return result
            text = line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + "..."
            result.matches.append(Match(rel, number, text))
    return result
