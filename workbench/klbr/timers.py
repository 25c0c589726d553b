"""``timers``: durable timers that wake you later, even when nobody writes.

A timer is a row the host writes before the call returns. At its due time the host admits
an input from ``timer`` into your inbox (once: a timer never fires twice, also across a
restart; one that fell due while the daemon was down fires when it starts again). That
input wakes you like any other; if a turn is running then, it waits as pending work.

    t = await timers.after(600, "look at the build again")   # or timers.at(when, note)
    wait("build running")                                      # the turn ends; the timer wakes you
    await timers.cancel(t["timer_id"])                         # a cancelled timer never fires
    await timers.list()                                        # pending timers (all=True: ended too)

``wait(reason, seconds=…)`` is the short form: it sets the timer and ends the turn.

Each timer is a dict: ``timer_id``, ``state`` (``pending``, ``fired`` or ``cancelled``),
``note``, ``due`` (ISO 8601, UTC), ``due_at`` (ms since the epoch), ``wait``, ``cause``,
and what set it (``cell_id``, ``frame_id``, ``job_id``).
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from klbr import rpc
from klbr.awaited import api_class

__all__ = ["Timers", "arm_wait", "due_params", "timers"]

_MAX_SECONDS = 366 * 86_400


def due_params(when: Any, *, seconds: float | None = None, action: str = "set timer") -> dict[str, Any]:
    """The host's ``timers.at`` time parameters for ``when`` or ``seconds`` from now.

    ``when`` is an aware ``datetime``, ISO 8601 text with an offset (``Z`` counts), or Unix
    seconds (``int``/``float``). A naive ``datetime`` is refused: its zone would be a guess.

    Raises ``TypeError``/``ValueError`` for anything else.

    >>> due_params(None, seconds=2)
    {'seconds': 2.0}
    >>> due_params("2030-01-01T00:00:00Z")
    {'until_ms': 1893456000000}
    """
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"cannot {action}: seconds must be a number (got {type(seconds).__name__})")
        if not 0 < seconds <= _MAX_SECONDS:
            raise ValueError(f"cannot {action}: seconds must be above 0 and at most {_MAX_SECONDS} (got {seconds})")
        return {"seconds": float(seconds)}
    if isinstance(when, str):
        try:
            when = _dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError as err:
            raise ValueError(f"cannot {action}: when is not ISO 8601 text (got {when!r})") from err
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(f"cannot {action}: when needs a time zone, e.g. datetime.now(timezone.utc) (got {when!r})")
        return {"until_ms": int(when.timestamp() * 1000)}
    if isinstance(when, (int, float)) and not isinstance(when, bool):
        if not 0 <= when < math.inf:
            raise ValueError(f"cannot {action}: when must be Unix seconds >= 0 (got {when})")
        return {"until_ms": int(when * 1000)}
    raise TypeError(f"cannot {action}: when must be a datetime, ISO text or Unix seconds (got {type(when).__name__})")


async def arm_wait(reason: str, due: dict[str, Any]) -> dict[str, Any]:
    """Set the timer of ``wait(reason, seconds=…)``; return the host's timer dict."""
    return await rpc.call_json("timers.at", {**due, "note": reason, "wait": True})


def _note(note: Any) -> str:
    if not isinstance(note, str):
        raise TypeError(f"cannot set timer: note must be a string (got {type(note).__name__})")
    if len(note) > 2000:
        raise ValueError(f"cannot set timer: note is over 2000 characters (got {len(note)})")
    return note


@api_class("timers", at="no timer was set", after="no timer was set", cancel="no timer was cancelled",
           list="nothing was read")
class Timers:
    """Durable timers. Bound in every cell as ``timers``."""

    async def at(self, when: Any, note: str = "") -> dict[str, Any]:
        """Set a timer that fires at ``when``; return it (``timer_id``, ``due``, ``state`` …).

        ``when`` is an aware ``datetime``, ISO 8601 text with an offset, or Unix seconds.
        The timer is durable when this returns. A time in the past fires at once.

        Raises ``TypeError``/``ValueError`` for a bad time or note, ``klbr.rpc.RpcError``
        when the host refuses.

        >>> t = await timers.at("2030-01-01T09:00:00+01:00", "new year's review")  # doctest: +SKIP
        """
        return await rpc.call_json("timers.at", {**due_params(when), "note": _note(note)})

    async def after(self, seconds: float, note: str = "") -> dict[str, Any]:
        """Set a timer that fires ``seconds`` from now (by the host's clock); return it.

        >>> t = await timers.after(3600, "check the deploy")  # doctest: +SKIP
        """
        return await rpc.call_json("timers.at", {**due_params(None, seconds=seconds), "note": _note(note)})

    async def cancel(self, timer_id: str) -> dict[str, Any]:
        """Cancel a pending timer; it never fires. Return it with ``cancelled`` (False when it
        had already fired or been cancelled).

        Raises ``klbr.rpc.RpcError`` (``not_found``) for an unknown id.
        """
        if not isinstance(timer_id, str) or not timer_id:
            raise TypeError(f"cannot cancel timer: timer_id must be a non-empty string (got {timer_id!r})")
        return await rpc.call_json("timers.cancel", {"timer_id": timer_id})

    async def list(self, all: bool = False) -> list[dict[str, Any]]:  # noqa: A002 - the documented name
        """The session's pending timers, newest first; with ``all=True`` the ended ones too."""
        return await rpc.call_json("timers.list", {"all": bool(all)})

    def __repr__(self) -> str:
        return "<timers: await timers.at(when, note), .after(seconds, note), .cancel(id), .list()>"


timers = Timers()
"""The one ``Timers`` object the prelude binds."""
