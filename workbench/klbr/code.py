"""``code``: outlines, symbols, tree-sitter queries and checked patches, bound in every cell.

Parsing runs on the host (tree-sitter, for Python, TypeScript/TSX, JavaScript, Rust, Go,
JSON and Markdown); each call here is one host RPC. Every answer is *version-bound*: a
``Range`` carries the file's path, the sha256 of the whole file, and the byte and line span.
Reading or patching a range whose file has changed since raises ``StaleRange`` naming the
current hash; it is never applied to shifted text. Take a fresh range and try again.

    o = await code.outline("app/models.py")        # symbols with kind and qualified name
    print(o)
    s = await code.symbol("app/models.py", "User.save")
    print(await code.read(s))
    done = await code.patch(s, new_source)         # checked: refused if it breaks the syntax
    r = await run(("python3", "-m", "unittest"), timeout=300)

``patch`` and ``patch_many`` write every touched file atomically (temp file, fsync,
rename) or none of them, refuse a patch that gives a file more syntax errors than it had
(``PatchRefused``, the file byte-identical), return the new ranges and are recorded with
the cell that made them. ``help(skills.code)`` shows the whole edit loop.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Union

from klbr import rpc, workspace
from klbr.awaited import api

__all__ = [
    "FindMatch", "FindResult", "Outline", "PatchRefused", "PatchResult", "Range", "StaleRange",
    "Symbol", "find", "lines", "outline", "patch", "patch_many", "read", "symbol",
]


@dataclass(frozen=True)
class Range:
    """A span of one file at one version: ``path``, content ``hash`` (sha256 hex), the bytes
    ``[start_byte, end_byte)`` and the 1-based lines ``start_line``..``end_line`` holding them.

    A range is honoured only while the file still has that hash.
    """

    path: str
    hash: str
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int

    def to_wire(self) -> dict[str, Any]:
        """The range as the host's ``code.*`` RPCs take it."""
        return asdict(self)

    @classmethod
    def from_wire(cls, data: Any) -> "Range":
        """Build a range from the host's JSON object; ``ValueError`` when a field is missing."""
        if not isinstance(data, dict):
            raise ValueError(f"cannot read range: expected an object (got {type(data).__name__})")
        try:
            return cls(str(data["path"]), str(data["hash"]), int(data["start_byte"]),
                       int(data["end_byte"]), int(data["start_line"]), int(data["end_line"]))
        except KeyError as missing:
            raise ValueError(f"cannot read range: field {missing} is missing (got {data!r})") from None

    def __repr__(self) -> str:
        lines = f"{self.start_line}" if self.start_line == self.end_line else f"{self.start_line}-{self.end_line}"
        return f"<Range {self.path}:{lines} bytes {self.start_byte}-{self.end_byte} @{self.hash[:12]}>"


@dataclass(frozen=True)
class Symbol:
    """One definition of an outline: ``kind`` (``class``, ``function``, ``method``, ``struct``,
    ``heading``, ``key``, ...), ``name``, ``qualified_name`` (``Class.method``), ``depth``,
    ``signature`` (its first line) and the ``range`` of the whole definition, decorators and
    ``export`` included."""

    kind: str
    name: str
    qualified_name: str
    depth: int
    signature: str
    range: Range

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> "Symbol":
        """Build a symbol from the host's JSON object."""
        return cls(str(data["kind"]), str(data["name"]), str(data["qualified_name"]),
                   int(data.get("depth", 0)), str(data.get("signature", "")), Range.from_wire(data["range"]))

    def __repr__(self) -> str:
        return f"<{self.kind} {self.qualified_name} {self.range.path}:{self.range.start_line}-{self.range.end_line}>"


@dataclass(frozen=True)
class Outline:
    """The symbols of one file at one version, in source order.

    ``truncated`` is True when the file had more symbols than one outline lists (5,000);
    ``syntax_errors`` counts what the parser could not read (an outline of a broken file
    may miss symbols). ``print(outline)`` shows one line per symbol, indented by nesting.
    """

    path: str
    hash: str
    language: str
    lines: int
    symbols: list[Symbol]
    truncated: bool
    syntax_errors: int

    def __str__(self) -> str:
        head = f"{self.path} ({self.language}, {self.lines} lines, @{self.hash[:12]})"
        rows = [head] + [
            f"{'  ' * s.depth}{s.range.start_line:>5}-{s.range.end_line:<5} {s.kind} {s.qualified_name}"
            for s in self.symbols
        ]
        if self.syntax_errors:
            rows.append(f"[{self.syntax_errors} syntax error(s): symbols may be missing]")
        if self.truncated:
            rows.append(f"[truncated: stopped at {len(self.symbols)} symbols; more exist]")
        return "\n".join(rows)

    __repr__ = __str__


@dataclass(frozen=True)
class FindMatch:
    """One hit of ``find``: ``path``, ``range`` (version-bound), ``text`` (its first line),
    ``captures`` (query mode: capture name → text) and, in symbol mode, ``kind`` and
    ``qualified_name``."""

    path: str
    range: Range
    text: str
    captures: dict[str, str] = field(default_factory=dict)
    kind: str | None = None
    qualified_name: str | None = None

    def __repr__(self) -> str:
        what = f" {self.kind} {self.qualified_name}" if self.kind else ""
        return f"{self.path}:{self.range.start_line}:{what} {self.text}"


@dataclass(frozen=True)
class FindResult:
    """The hits of one ``find``; ``truncated`` is True when ``max_results`` (or the 5,000-file
    cap) cut it short, so more may exist. ``refused_languages`` names the grammars that could
    not compile the query (a query is written for one language's node names)."""

    mode: str
    matches: list[FindMatch]
    truncated: bool
    files_searched: int
    files_skipped: int
    refused_languages: dict[str, str]

    def __str__(self) -> str:
        rows = [repr(m) for m in self.matches]
        if self.truncated:
            rows.append(f"[truncated: stopped at {len(self.matches)} matches; more exist]")
        elif not self.matches:
            rows.append(f"no matches in {self.files_searched} file(s)")
        return "\n".join(rows)

    __repr__ = __str__


@dataclass(frozen=True)
class PatchResult:
    """An applied patch: ``ranges`` (the new range of each edit, in the order given),
    ``files`` (per file: ``path``, ``before_hash``, ``after_hash``, ``syntax_checked``),
    ``patch_id`` and ``seq`` of its durable record. ``range`` is the first new range."""

    patch_id: str
    seq: int
    ranges: list[Range]
    files: list[dict[str, Any]]

    @property
    def range(self) -> Range:
        """The new range of the first edit (the only one, for ``patch``)."""
        return self.ranges[0]

    def __repr__(self) -> str:
        paths = ", ".join(f["path"] for f in self.files)
        return f"<patch {self.patch_id}: {len(self.ranges)} edit(s) in {paths}>"


class StaleRange(Exception):
    """A range's file changed since the range was taken; nothing was read or written.

    ``stale`` lists ``{path, range_hash, current_hash}`` per file. Take a fresh range
    (``outline``, ``symbol``, ``lines``) and decide again: never patch by offsets alone.
    """

    def __init__(self, action: str, stale: list[dict[str, str]]) -> None:
        """Describe the refused ``action`` and each stale file."""
        parts = [f"{s.get('path')} (range @{str(s.get('range_hash'))[:12]}, now @{str(s.get('current_hash'))[:12]}, "
                 f"current hash {s.get('current_hash')})" for s in stale]
        super().__init__(f"cannot {action}: the file changed since the range was taken: {'; '.join(parts)}")
        self.stale = stale
        self.current_hash = str(stale[0].get("current_hash")) if stale else None


class PatchRefused(ValueError):
    """A patch would give a file more syntax errors than it has; no file was changed.

    ``refusals`` lists ``{path, errors_before, errors_after, problems}``, each problem with
    ``line``, ``column``, ``kind`` (``ERROR`` or ``MISSING <token>``) and ``text``.
    """

    def __init__(self, refusals: list[dict[str, Any]]) -> None:
        """Describe each refused file and its first syntax problems."""
        parts = []
        for r in refusals:
            where = ", ".join(f"line {p.get('line')} col {p.get('column')} {p.get('kind')} {p.get('text')!r}"
                              for p in r.get("problems", []))
            parts.append(f"{r.get('path')}: {r.get('errors_before')} -> {r.get('errors_after')} syntax errors ({where})")
        super().__init__(f"cannot patch: the result would not parse; nothing was written: {'; '.join(parts)}")
        self.refusals = refusals


Target = Union[Range, Symbol, FindMatch, dict]
"""What ``read`` and ``patch`` take: a ``Range``, or anything with a ``.range``."""


def _range_of(target: Target, action: str) -> Range:
    if isinstance(target, Range):
        return target
    if isinstance(target, (Symbol, FindMatch)):
        return target.range
    if isinstance(target, dict):
        return Range.from_wire(target)
    raise TypeError(f"cannot {action}: expected a Range, Symbol or FindMatch (got {type(target).__name__})")


async def _rel(path: str | os.PathLike[str], action: str) -> str:
    """The workspace-relative path; ``WorkspaceEscape`` for a path that leaves the root."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"cannot {action}: path must be a str (got {type(path).__name__})")
    ws = await workspace.current()
    text = os.fspath(path)
    if any(c in text for c in "*?[{"):
        if os.path.isabs(text):
            text = os.path.relpath(text, ws.root)
        return text
    return os.path.relpath(ws.resolve(text), ws.root).replace(os.sep, "/")


@api("code.outline", "nothing was read")
async def outline(path: str | os.PathLike[str]) -> Outline:
    """Return the ``Outline`` of a workspace file: every class, function, method, type,
    heading or key with its kind, qualified name and version-bound range.

    Raises ``klbr.rpc.RpcError`` with code ``invalid_input`` for a file without a grammar,
    over 4 MiB or not UTF-8, ``not_found`` for a missing file, and ``WorkspaceEscape`` for a
    path outside the workspace.

    >>> print(await code.outline("app.py"))  # doctest: +SKIP
    """
    reply = await rpc.call_object("code.outline", {"path": await _rel(path, "outline")})
    return Outline(str(reply["path"]), str(reply["hash"]), str(reply["language"]), int(reply["lines"]),
                   [Symbol.from_wire(s) for s in reply["symbols"]], bool(reply["truncated"]),
                   int(reply["syntax_errors"]))


@api("code.symbol", "nothing was read")
async def symbol(path: str | os.PathLike[str], name: str, kind: str | None = None) -> Symbol:
    """Return the one symbol of ``path`` named ``name``: a qualified name (``"Class.method"``,
    ``"Type.Method"`` for Go, ``"Title.Section"`` for Markdown) or, failing that, a plain name.

    ``kind`` narrows the choice (``"class"``, ``"method"``, ``"impl"``, ...). Raises
    ``klbr.rpc.RpcError`` with code ``not_found`` when nothing matches and ``invalid_input``
    when several do (the message lists them with their lines).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"cannot find symbol: name must be a non-empty string (got {name!r})")
    params = {"path": await _rel(path, "find symbol"), "name": name, "kind": kind}
    return Symbol.from_wire(await rpc.call_object("code.symbol", params))


@api("code.find", "nothing was searched")
async def find(pattern: str, path: str | os.PathLike[str] = ".", max_results: int = 100,
               capture: str | None = None) -> FindResult:
    """Find nodes by a tree-sitter query, or symbols by a name glob, in a file, a directory
    or a path glob (``"src/**/*.ts"``).

    A ``pattern`` starting with ``(`` or ``[`` is a tree-sitter query, e.g.
    ``'(call function: (identifier) @fn (#eq? @fn "open"))'``: each match's range is the
    ``capture`` named (default: its largest capture). Any other pattern is a glob over
    symbol names (``"test_*"``, ``"User.*"``). Stops at ``max_results`` (1-1000) with
    ``truncated`` set: a truncated result is not a complete one. Links, ``.git`` and
    ``node_modules`` are skipped.

    >>> print(await code.find("(function_definition name: (identifier) @name)", "**/*.py"))  # doctest: +SKIP
    """
    if not isinstance(pattern, str) or not pattern.strip():
        raise ValueError(f"cannot find: pattern must be a non-empty string (got {pattern!r})")
    if not isinstance(max_results, int) or isinstance(max_results, bool) or not 1 <= max_results <= 1000:
        raise ValueError(f"cannot find: max_results must be an int in 1-1000 (got {max_results!r})")
    params = {"pattern": pattern, "path": await _rel(path, "find"), "max_results": max_results,
              "capture": capture}
    reply = await rpc.call_object("code.find", params)
    matches = [
        FindMatch(str(m["path"]), Range.from_wire(m["range"]), str(m.get("text", "")),
                  dict(m.get("captures") or {}), (m.get("symbol") or {}).get("kind"),
                  (m.get("symbol") or {}).get("qualified_name"))
        for m in reply["matches"]
    ]
    return FindResult(str(reply["mode"]), matches, bool(reply["truncated"]), int(reply["files_searched"]),
                      int(reply["files_skipped"]), dict(reply.get("refused_languages") or {}))


@api("code.read", "nothing was read")
async def read(target: Target) -> str:
    """Return the text of a range (or of a ``Symbol``/``FindMatch``'s range).

    Raises ``StaleRange`` (nothing read) when the file changed since the range was taken.
    """
    rng = _range_of(target, "read")
    reply = await rpc.call_object("code.read", {"range": rng.to_wire()})
    if not reply.get("ok"):
        raise StaleRange(f"read {rng.path}", list(reply.get("stale") or []))
    return str(reply["text"])


@api("code.lines", "nothing was read")
async def lines(path: str | os.PathLike[str], start: int, end: int | None = None) -> Range:
    """Return the range of whole lines ``start``..``end`` (1-based, inclusive; default one
    line) of a file as it is now: a span to ``read`` or ``patch`` that is not a symbol.
    Its text ends with the last line's newline, so a replacement should too.
    """
    for name, value in (("start", start), ("end", end)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"cannot read lines: {name} must be a line number >= 1 (got {value!r})")
    reply = await rpc.call_object("code.lines", {"path": await _rel(path, "read lines"), "start": start, "end": end})
    return Range.from_wire(reply["range"])


@api("code.patch", "nothing was changed")
async def patch(target: Target, new_text: str) -> PatchResult:
    """Replace the text of one range by ``new_text``; see ``patch_many``.

    >>> s = await code.symbol("app.py", "greet")                        # doctest: +SKIP
    >>> done = await code.patch(s, "def greet(name):\\n    return f'hi {name}'")  # doctest: +SKIP
    >>> done.range                                                      # doctest: +SKIP
    """
    return await patch_many([(target, new_text)])


@api("code.patch_many", "nothing was changed")
async def patch_many(edits: Iterable[tuple[Target, str]]) -> PatchResult:
    """Apply every ``(range, new_text)`` edit, in one file or several, or none of them.

    Refused before anything is written when any range is stale (``StaleRange``), when two
    edits of a file overlap, or when the result of a file would have more syntax errors than
    the file has now (``PatchRefused``, naming line, column and text). Each file is written
    to a temp file, fsynced and renamed over the old one. Returns a ``PatchResult`` whose
    ``ranges`` are the new range of each edit, in the order given; every old range of a
    patched file is stale from then on.
    """
    wire = []
    for item in edits:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"cannot patch: each edit is a (range, new_text) pair (got {item!r})")
        target, text = item
        if not isinstance(text, str):
            raise TypeError(f"cannot patch: new_text must be a str (got {type(text).__name__})")
        wire.append({"range": _range_of(target, "patch").to_wire(), "text": text})
    if not wire:
        raise ValueError("cannot patch: no edits (got an empty list)")
    reply = await rpc.call_object("code.patch", {"edits": wire})
    if not reply.get("ok"):
        if reply.get("reason") == "stale":
            raise StaleRange("patch", list(reply.get("stale") or []))
        raise PatchRefused(list(reply.get("refusals") or []))
    return PatchResult(str(reply["patch_id"]), int(reply["seq"]),
                       [Range.from_wire(r) for r in reply["ranges"]], list(reply["files"]))
