"""``history``: find and read back anything of this session, also what a summary covers.

Your context holds a summary in place of older items; nothing is deleted. Every input you
received, every message you sent (local and Discord), every scratchpad note, every cell's
code and output, and every spooled artifact stays searchable and readable by its id.

Search by words; results name ids, best first::

    found = await history.search("vault code", limit=5)
    found.hits[0].id        # 'input:in_01…'
    found.truncated         # True when more matched than `limit`

Read one exactly, in slices::

    page = await history.read("input:in_01…")          # the first 4000 characters
    page.text, page.total, page.next_offset             # next_offset is None at the end
    rest = await history.read(page.id, offset=page.next_offset)

Ids, as summaries write them in [brackets]:

- ``input:<id>``: an input you received (its text; a Discord message's details follow as JSON);
- ``send:<seq>``: a message you sent with ``local.send`` (it was delivered);
- ``outbox:<id>``: a Discord message, with its state in ``meta``;
- ``item:<n>``: a provider item (your scratchpad note for an assistant item);
- ``cell:<id>`` and ``output:<id>``: a cell's code, and what it printed or returned;
- ``summary:<epoch>``: an earlier summary;
- ``artifact:<sha256>``: a spooled long output (offsets and lengths are bytes here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from klbr import rpc
from klbr.awaited import api_class

__all__ = ["Hit", "Page", "SearchResult", "History", "history"]


@dataclass(frozen=True)
class Hit:
    """One search hit: ``id`` for ``history.read``, ``snippet`` with matches in «», rank 1 is best."""

    id: str
    kind: str
    snippet: str
    rank: int
    score: float
    at: int


@dataclass(frozen=True)
class SearchResult:
    """The hits of one search, best first; ``truncated`` when more matched than the limit."""

    hits: list[Hit]
    truncated: bool
    query: str

    def __iter__(self) -> Iterator[Hit]:
        """Iterate over the hits."""
        return iter(self.hits)

    def __len__(self) -> int:
        """How many hits were returned."""
        return len(self.hits)


@dataclass(frozen=True)
class Page:
    """A slice of one item's exact text: ``text`` from ``offset``, of ``total`` in all.

    ``unit`` is ``characters``, or ``bytes`` for an artifact. ``next_offset`` is where the
    next slice starts, ``None`` at the end. ``meta`` says what else is known (the author and
    conversation of an input, a Discord message's state, a cell's outcome, …).
    """

    id: str
    kind: str
    text: str
    offset: int
    total: int
    unit: str
    next_offset: int | None
    meta: dict[str, Any] = field(default_factory=dict)


_MAX_QUERY = 2000
"""The longest query the host searches, in UTF-16 units."""


def _int(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"cannot use history: {name} must be an integer in {low}-{high} (got {value!r})")
    return value


@api_class("history", search="nothing was searched", read="nothing was read")
class History:
    """This session's history. Bound in every cell as ``history``."""

    async def search(self, query: str, limit: int = 10, match: str = "all") -> SearchResult:
        """Find texts of this session that contain the words of ``query``; at most ``limit`` (1-100).

        ``query`` is at most 2000 characters and 32 words; every word is searched.
        ``match="all"`` (the default) wants every word, ``match="any"`` at least one. A word is
        letters and digits (``_`` joins them: ``foo_bar`` finds "foo bar"); other characters only
        separate words; a trailing ``*`` makes a prefix (``zeph*``). Raises ``ValueError`` for
        bad arguments and ``klbr.rpc.RpcError`` when the host refuses, with code
        ``invalid_input`` for a query of more than 32 words (shorten it) or without a word.

        >>> found = await history.search("deploy failed", limit=3)  # doctest: +SKIP
        >>> [hit.id for hit in found]  # doctest: +SKIP
        ['output:cell_01…', 'send:812']
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"cannot search history: query must be a non-empty string (got {query!r})")
        # The host counts UTF-16 units, as JavaScript does: a character outside the BMP is two.
        units = len(query.encode("utf-16-le")) // 2
        if units > _MAX_QUERY:
            raise ValueError(
                f"cannot search history: query is over {_MAX_QUERY} characters (got {units}); search for fewer words"
            )
        if match not in ("all", "any"):
            raise ValueError(f"cannot search history: match must be 'all' or 'any' (got {match!r})")
        params = {"query": query, "limit": _int("limit", limit, 1, 100), "match": match}
        result = await rpc.call("history.search", params)
        if not isinstance(result, dict):
            raise RuntimeError("cannot search history: the host replied without results")
        hits = [Hit(**{k: r[k] for k in ("id", "kind", "snippet", "rank", "score", "at")})
                for r in result.get("results", [])]
        return SearchResult(hits=hits, truncated=bool(result.get("truncated")), query=str(result.get("query", "")))

    async def read(self, id: str, offset: int = 0, length: int = 4000) -> Page:  # noqa: A002 - the id of an item
        """Read ``length`` characters (bytes for an artifact) of item ``id`` exactly, from ``offset``.

        ``length`` is 1-1000000. Raises ``ValueError`` for bad arguments and
        ``klbr.rpc.RpcError`` with code ``not_found`` for an id this session does not have.

        >>> page = await history.read("send:812")  # doctest: +SKIP
        >>> page.text, page.meta["conversation"]  # doctest: +SKIP
        ('Deployed.', 'local:default')
        """
        if not isinstance(id, str) or ":" not in id:
            raise ValueError(f"cannot read history: id must be '<kind>:<key>' (got {id!r})")
        params = {"id": id, "offset": _int("offset", offset, 0, 2**53 - 1), "length": _int("length", length, 1, 1_000_000)}
        result = await rpc.call("history.read", params)
        if not isinstance(result, dict) or not isinstance(result.get("text"), str):
            raise RuntimeError("cannot read history: the host replied without text")
        return Page(id=result["id"], kind=result["kind"], text=result["text"], offset=result["offset"],
                    total=result["total"], unit=result["unit"], next_offset=result.get("next_offset"),
                    meta=dict(result.get("meta") or {}))

    def __repr__(self) -> str:
        return "<history: await history.search(query, limit=10); await history.read(id, offset=0, length=4000)>"


history = History()
"""The one ``History`` object the prelude binds."""
