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
from pathlib import Path

from klbr.paths import to_relative

__all__ = ["Entry", "Listing", "Match", "SearchResult", "list_entries", "search_tree"]

_SKIP_DIRS = frozenset({".git"})
_MAX_FILE_BYTES = 8 * 1024 * 1024
_MAX_LINE_CHARS = 400


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


def _entry(root: str, path: str) -> Entry:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        kind = "link"
    elif stat.S_ISDIR(info.st_mode):
        kind = "dir"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    else:
        kind = "other"
    return Entry(to_relative(root, path), kind, info.st_size if kind == "file" else 0)


def list_entries(root: str, target: Path, recursive: bool, match: str | None, max_entries: int) -> Listing:
    """List ``target`` one level deep, or walk it; keep names matching the glob ``match``.

    A file target lists just that file. Raises ``FileNotFoundError`` when it is missing.
    """
    out = Listing()
    if not target.is_dir():
        if not os.path.lexists(target):
            raise FileNotFoundError(f"cannot list {to_relative(root, target)}: no such file or directory")
        out.append(_entry(root, str(target)))
        return out
    if not recursive:
        names = sorted(os.listdir(target))
        for name in names:
            if match is None or fnmatch.fnmatch(name, match):
                if len(out) >= max_entries:
                    out.truncated = True
                    break
                out.append(_entry(root, os.path.join(target, name)))
        return out
    for dirpath, dirnames, filenames in os.walk(target, followlinks=False):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            if match is None or fnmatch.fnmatch(name, match):
                if len(out) >= max_entries:
                    out.truncated = True
                    return out
                out.append(_entry(root, os.path.join(dirpath, name)))
    return out


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


def _files(target: Path):  # noqa: ANN202 - a plain generator of paths
    if not target.is_dir():
        yield str(target)
        return
    for dirpath, dirnames, filenames in os.walk(target, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            yield os.path.join(dirpath, name)


def search_tree(root: str, target: Path, pattern: str, max_results: int, regex: bool) -> SearchResult:
    """Find lines under ``target`` containing ``pattern`` (a substring, or a regex).

    Skips ``.git`` directories, symlinks, binary files (a NUL byte in the first 8 KiB)
    and files over 8 MiB (counted in ``files_skipped``). Raises ``re.error`` for a bad
    regex and ``FileNotFoundError`` for a missing target.
    """
    if not os.path.lexists(target):
        raise FileNotFoundError(f"cannot search {to_relative(root, target)}: no such file or directory")
    compiled = re.compile(pattern) if regex else None
    result = SearchResult(pattern)
    for path in _files(target):
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_FILE_BYTES:
                result.files_skipped += 1
                continue
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            result.files_skipped += 1
            continue
        if b"\0" in data[:8192]:
            result.files_skipped += 1
            continue
        rel = to_relative(root, path)
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            found = compiled.search(line) is not None if compiled else pattern in line
            if not found:
                continue
            if len(result.matches) >= max_results:
                result.truncated = True
                return result
            text = line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + "..."
            result.matches.append(Match(rel, number, text))
    return result
