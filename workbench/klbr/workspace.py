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
import errno
import os
import shutil
import stat
from dataclasses import dataclass
from typing import Any, Sequence

from klbr import rpc
from klbr.awaited import api
from klbr.files import FileHandle, touch_at, writing
from klbr.listing import Entry, Listing, Match, SearchResult, list_entries, search_tree
from klbr.paths import Located, PathArg, WorkspaceEscape, locate

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

    ``exit_code`` is the program's exit status, ``None`` when a signal ended it (the host's
    timeout or a cancel kills its whole process group). ``stdout``/``stderr`` are bytes, capped by the host;
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


def _run_result(reply: dict[str, Any]) -> RunResult:
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
    """The workspace rooted at ``root`` (a real, absolute directory path).

    ``deny`` names directories the workspace never includes even when they lie inside the
    root: the state directory (store, token, drafts). Every path is walked without letting
    the kernel follow a link (``klbr.paths.locate``).
    """

    def __init__(self, root: str, deny: tuple[str, ...] | list[str] = ()) -> None:
        """Bind to ``root``; raises ``NotADirectoryError`` when it is not a directory."""
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise NotADirectoryError(f"cannot bind workspace: root is not a directory (got {root!r})")
        self.root = real
        self.deny = tuple(os.path.normpath(d) for d in deny)
        inside = (os.path.relpath(d, real) for d in self.deny if d == real or d.startswith(real + os.sep))
        self._hidden = frozenset(p.replace(os.sep, "/") for p in inside)

    def _locate(self, path: PathArg, **options: bool) -> Located:
        return locate(self.root, path, deny=self.deny, **options)

    def resolve(self, path: PathArg, *, follow: bool = True) -> str:
        """The absolute path of ``path`` inside the root, or ``WorkspaceEscape`` if it leads out."""
        with self._locate(path, follow=follow) as where:
            return where.path

    async def open_file(self, path: PathArg, create: bool = False) -> FileHandle:
        """Open a text file; with ``create=True`` make it (and its parents) if missing.

        Raises ``FileNotFoundError`` when it is missing and ``create`` is False,
        ``IsADirectoryError`` for a directory, ``WorkspaceEscape`` for a path outside. A pipe,
        socket or device is refused (``OSError``) when the handle reads or appends, not waited on.
        """
        try:
            with writing(str(path)):
                where = self._locate(path, make_parents=create)
        except (FileNotFoundError, NotADirectoryError) as err:
            raise FileNotFoundError(f"cannot open {path}: no such file (pass create=True to make it)") from err
        with where:
            if not where.name or (where.exists and stat.S_ISDIR(where.lstat().st_mode)):
                raise IsADirectoryError(f"cannot open {where.rel}: it is a directory")
            if not where.exists:
                if not create:
                    raise FileNotFoundError(f"cannot open {where.rel}: no such file (pass create=True to make it)")
                with writing(where.rel):
                    touch_at(where)
            return FileHandle(self.root, where.rel, self.deny)

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
        with self._locate(path) as where:
            return await asyncio.to_thread(list_entries, where, recursive, match, max_entries, self._hidden)

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
        with self._locate(path) as where:
            return await asyncio.to_thread(search_tree, where, pattern, max_results, regex, self._hidden)

    async def delete(self, path: PathArg, recursive: bool = False) -> None:
        """Delete a file, a symlink (not its target) or an empty directory.

        A non-empty directory needs ``recursive=True``. The root itself is never deleted, nor
        a directory the state directory lies in (``WorkspaceEscape``).
        """
        with self._locate(path, follow=False) as where:
            if not where.name:
                raise PermissionError(f"cannot delete {path!r}: it is the workspace root {self.root!r}")
            if not where.exists:
                raise FileNotFoundError(f"cannot delete {where.rel}: no such file or directory")
            mode = where.lstat().st_mode
            if not stat.S_ISDIR(mode):
                with writing(where.rel):
                    os.unlink(where.name, dir_fd=where.parent_fd)
            elif recursive:
                self._refuse_holding_state(path, where.path)
                with writing(where.rel):
                    await asyncio.to_thread(shutil.rmtree, where.name, dir_fd=where.parent_fd)
            else:
                try:
                    os.rmdir(where.name, dir_fd=where.parent_fd)
                except OSError as err:
                    if err.errno != errno.ENOTEMPTY:
                        raise
                    raise OSError(f"cannot delete {where.rel}: directory is not empty (pass recursive=True)") from err

    def _refuse_holding_state(self, path: PathArg, target: str) -> None:
        """Refuse to delete ``target`` recursively when a denied directory lies inside it."""
        for denied in self.deny:
            if denied.startswith(target.rstrip(os.sep) + os.sep):
                raise WorkspaceEscape(
                    path, self.root, "",
                    message=f"cannot delete {path!r}: it holds the state directory {denied!r}, "
                    "which is never part of the workspace; delete what else it holds one by one",
                )

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
        where = None
        if cwd is not None:
            with self._locate(cwd) as found:
                if found.name and (not found.exists or not stat.S_ISDIR(found.lstat().st_mode)):
                    raise NotADirectoryError(f"cannot run: cwd is not a directory (got {cwd!r})")
                where = found.path
        params = {"argv": args, "timeout_s": timeout, "cwd": where}
        return _run_result(await rpc.call_object("workspace.run", params, action="run"))

    def __repr__(self) -> str:
        return f"<workspace {self.root}>"


_current: Workspace | None = None


def bind(root: str, deny: tuple[str, ...] | list[str] = ()) -> Workspace:
    """Bind this generation's workspace to ``root``, refusing ``deny`` (done once, at ``init``)."""
    global _current
    _current = Workspace(root, deny)
    return _current


async def current() -> Workspace:
    """The workspace of this kernel generation. Raises ``RuntimeError`` before ``init``."""
    if _current is None:
        raise RuntimeError("cannot use the workspace: no workspace is bound yet (got no init)")
    return _current


@api("open_file", "no file was opened")
async def open_file(path: PathArg, create: bool = False) -> FileHandle:
    """Open a workspace text file; see ``Workspace.open_file``."""
    return await (await current()).open_file(path, create)


@api("ls", "nothing was listed")
async def ls(
    path: PathArg = ".", recursive: bool = False, match: str | None = None, max_entries: int = 10_000
) -> Listing:
    """List a workspace directory; see ``Workspace.ls``."""
    return await (await current()).ls(path, recursive, match, max_entries)


@api("search", "nothing was searched")
async def search(
    pattern: str, path: PathArg = ".", max_results: int = 100, regex: bool = False
) -> SearchResult:
    """Search workspace files for a pattern; see ``Workspace.search``."""
    return await (await current()).search(pattern, path, max_results, regex)


@api("delete", "nothing was deleted")
async def delete(path: PathArg, recursive: bool = False) -> None:
    """Delete a workspace path; see ``Workspace.delete``."""
    await (await current()).delete(path, recursive)


@api("run", "the program did not run")
async def run(argv: Sequence[str], timeout: float = 60, cwd: PathArg | None = None) -> RunResult:
    """Run a program through the host; see ``Workspace.run``."""
    return await (await current()).run(argv, timeout, cwd)


# help(open_file) in a cell should give the whole contract, not a pointer to the class.
for _name in PRELUDE_NAMES:
    globals()[_name].__doc__ = getattr(Workspace, _name).__doc__
del _name
