"""The session's workspace: ``open_file``, ``ls``, ``search``, ``delete`` and ``run``, bound in every cell.

The root is resolved once per kernel generation (at ``init``); ``ws = await
workspace.current()`` returns the object form, whose methods are the same functions.
Paths are relative to the root or absolute inside it; ``..`` escapes, absolute paths
elsewhere and symlinks that lead out raise ``WorkspaceEscape`` (a ``PermissionError``).

``run(argv)`` is not a subprocess of this Python process: it asks the host, which starts
the program in its own process group, caps its output, enforces the timeout and cleans
up on cancellation, so replacing the kernel never strands a build.

    print(await search("TODO", "runtime", max_results=20))
    note = await open_file("docs/note.md")
    await note.replace("old", "new")          # exactly one occurrence, or ValueError
    check = await run(("deno", "check", "main.ts"), timeout=120)
    print(check.exit_code, check.stderr.decode(errors="replace"))
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
from dataclasses import dataclass
from typing import Any, Sequence

from klbr import rpc
from klbr.files import FileHandle
from klbr.listing import Entry, Listing, Match, SearchResult, list_entries, search_tree
from klbr.paths import PathArg, WorkspaceEscape, resolve_in, to_relative

__all__ = [
    "PRELUDE_NAMES", "Entry", "FileHandle", "Listing", "Match", "RunResult", "SearchResult",
    "Workspace", "WorkspaceEscape", "bind", "current", "delete", "ls", "open_file", "run", "search",
]

_MAX_TIMEOUT_S = 24 * 3600

PRELUDE_NAMES = ("open_file", "ls", "search", "delete", "run")
"""The workspace functions bound in every cell."""


@dataclass(frozen=True)
class RunResult:
    """What a ``run`` produced: exit status, captured bytes, caps and timing.

    ``exit_code`` is the program's exit status (negative: killed by that signal; ``None``
    when it never exited normally). ``stdout``/``stderr`` are bytes, capped by the host;
    ``*_truncated`` says when the cap was hit. ``timed_out`` means the host killed it.
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    duration_ms: int

    @property
    def ok(self) -> bool:
        """True when the program exited 0 within its timeout."""
        return self.exit_code == 0 and not self.timed_out

    def __repr__(self) -> str:
        flags = [f for f in ("stdout_truncated", "stderr_truncated", "timed_out") if getattr(self, f)]
        return (
            f"RunResult(exit_code={self.exit_code}, stdout={len(self.stdout)} bytes, "
            f"stderr={len(self.stderr)} bytes, duration_ms={self.duration_ms}"
            + "".join(f", {f}=True" for f in flags) + ")"
        )


def _run_result(reply: Any) -> RunResult:
    if not isinstance(reply, dict):
        raise RuntimeError(f"cannot run: host replied with a non-object (got {type(reply).__name__})")
    return RunResult(
        exit_code=reply.get("exit_code"),
        stdout=base64.b64decode(reply.get("stdout_b64") or ""),
        stderr=base64.b64decode(reply.get("stderr_b64") or ""),
        stdout_truncated=bool(reply.get("stdout_truncated")),
        stderr_truncated=bool(reply.get("stderr_truncated")),
        timed_out=bool(reply.get("timed_out")),
        duration_ms=int(reply.get("duration_ms") or 0),
    )


class Workspace:
    """The workspace rooted at ``root`` (a real, absolute directory path)."""

    def __init__(self, root: str) -> None:
        """Bind to ``root``; raises ``NotADirectoryError`` when it is not a directory."""
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise NotADirectoryError(f"cannot bind workspace: root is not a directory (got {root!r})")
        self.root = real

    def resolve(self, path: PathArg, *, follow: bool = True) -> str:
        """The absolute real path of ``path``, or ``WorkspaceEscape`` if it leads out."""
        return str(resolve_in(self.root, path, follow=follow))

    async def open_file(self, path: PathArg, create: bool = False) -> FileHandle:
        """Open a text file; with ``create=True`` make it (and its parents) if missing.

        Raises ``FileNotFoundError`` when it is missing and ``create`` is False,
        ``IsADirectoryError`` for a directory, ``WorkspaceEscape`` for a path outside.
        """
        target = resolve_in(self.root, path)
        rel = to_relative(self.root, target)
        if target.is_dir():
            raise IsADirectoryError(f"cannot open {rel}: it is a directory")
        if not target.exists():
            if not create:
                raise FileNotFoundError(f"cannot open {rel}: no such file (pass create=True to make it)")
            target.parent.mkdir(parents=True, exist_ok=True)
            resolve_in(self.root, rel)  # the new parents must not have raced out
            target.touch()
        return FileHandle(self.root, rel)

    async def ls(
        self,
        path: PathArg = ".",
        recursive: bool = False,
        match: str | None = None,
        max_entries: int = 10_000,
    ) -> Listing:
        """List a directory one level deep, or walk it with ``recursive=True``.

        ``match`` is a name glob (``"*.py"``) applied to each entry's name. Links are
        shown, never followed. Stops at ``max_entries`` with ``truncated`` set.
        """
        target = resolve_in(self.root, path)
        return await asyncio.to_thread(list_entries, self.root, target, recursive, match, max_entries)

    async def search(
        self, pattern: str, path: PathArg = ".", max_results: int = 100, regex: bool = False
    ) -> SearchResult:
        """Find lines containing ``pattern`` (or matching it, with ``regex=True``).

        Returns a ``SearchResult`` with ``.matches`` (path, line, text) and
        ``.truncated``; printing it says "truncated" when ``max_results`` cut it short.
        """
        if not isinstance(pattern, str) or pattern == "":
            raise ValueError(f"cannot search: pattern must be a non-empty string (got {pattern!r})")
        if not isinstance(max_results, int) or max_results < 1:
            raise ValueError(f"cannot search: max_results must be a positive int (got {max_results!r})")
        target = resolve_in(self.root, path)
        return await asyncio.to_thread(search_tree, self.root, target, pattern, max_results, regex)

    async def delete(self, path: PathArg, recursive: bool = False) -> None:
        """Delete a file, a symlink (not its target) or an empty directory.

        A non-empty directory needs ``recursive=True``. The root itself is never deleted.
        """
        target = resolve_in(self.root, path, follow=False)
        rel = to_relative(self.root, target)
        if str(target) == self.root:
            raise PermissionError(f"cannot delete {path!r}: it is the workspace root {self.root!r}")
        if not os.path.lexists(target):
            raise FileNotFoundError(f"cannot delete {rel}: no such file or directory")
        if target.is_symlink() or not target.is_dir():
            target.unlink()
        elif recursive:
            await asyncio.to_thread(shutil.rmtree, target)
        elif any(target.iterdir()):
            raise OSError(f"cannot delete {rel}: directory is not empty (pass recursive=True)")
        else:
            target.rmdir()

    async def run(self, argv: Sequence[str], timeout: float = 60, cwd: PathArg | None = None) -> RunResult:
        """Run a program through the host and return its ``RunResult``.

        ``argv`` is a sequence of strings, never a shell string: ``run(("git", "status"))``.
        ``timeout`` is in seconds (the host kills the whole process group when it passes);
        ``cwd`` is a workspace path (default: the root). Cancelling the cell stops the program.

        Raises ``TypeError`` for a shell string or non-string items, ``ValueError`` for an
        empty argv or a timeout outside (0, 86400] seconds, and ``klbr.rpc.RpcError`` when
        the host refuses.
        """
        if isinstance(argv, (str, bytes)):
            raise TypeError(f"cannot run: run takes argv, not a shell string (got {argv!r})")
        args = list(argv)
        if not args:
            raise ValueError("cannot run: argv is empty (got [])")
        bad = [a for a in args if not isinstance(a, str)]
        if bad:
            raise TypeError(f"cannot run: every argv item must be a str (got {bad[0]!r})")
        number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
        if not number or not 0 < timeout <= _MAX_TIMEOUT_S:
            raise ValueError(
                f"cannot run: timeout must be a number of seconds in (0, {_MAX_TIMEOUT_S}] (got {timeout!r})"
            )
        where = self.resolve(cwd) if cwd is not None else None
        if where is not None and not os.path.isdir(where):
            raise NotADirectoryError(f"cannot run: cwd is not a directory (got {cwd!r})")
        reply = await rpc.call("workspace.run", {"argv": args, "timeout_s": timeout, "cwd": where})
        return _run_result(reply)

    def __repr__(self) -> str:
        return f"<workspace {self.root}>"


_current: Workspace | None = None


def bind(root: str) -> Workspace:
    """Bind this generation's workspace to ``root`` and return it (done once, at ``init``)."""
    global _current
    _current = Workspace(root)
    return _current


async def current() -> Workspace:
    """The workspace of this kernel generation. Raises ``RuntimeError`` before ``init``."""
    if _current is None:
        raise RuntimeError("cannot use the workspace: no workspace is bound yet (got no init)")
    return _current


async def open_file(path: PathArg, create: bool = False) -> FileHandle:
    """Open a workspace text file; see ``Workspace.open_file``."""
    return await (await current()).open_file(path, create)


async def ls(
    path: PathArg = ".", recursive: bool = False, match: str | None = None, max_entries: int = 10_000
) -> Listing:
    """List a workspace directory; see ``Workspace.ls``."""
    return await (await current()).ls(path, recursive, match, max_entries)


async def search(
    pattern: str, path: PathArg = ".", max_results: int = 100, regex: bool = False
) -> SearchResult:
    """Search workspace files for a pattern; see ``Workspace.search``."""
    return await (await current()).search(pattern, path, max_results, regex)


async def delete(path: PathArg, recursive: bool = False) -> None:
    """Delete a workspace path; see ``Workspace.delete``."""
    await (await current()).delete(path, recursive)


async def run(argv: Sequence[str], timeout: float = 60, cwd: PathArg | None = None) -> RunResult:
    """Run a program through the host; see ``Workspace.run``."""
    return await (await current()).run(argv, timeout, cwd)


# help(open_file) in a cell should give the whole contract, not a pointer to the class.
for _name in PRELUDE_NAMES:
    globals()[_name].__doc__ = getattr(Workspace, _name).__doc__
del _name
