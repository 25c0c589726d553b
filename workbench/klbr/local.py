"""``local``: the agent's speech to the local conversation.

Assistant text is a scratchpad; only ``await local.send(text)`` reaches the person. The
host records the message durably before it answers, so a returned receipt means the
message is published. ``local.send`` is a coroutine: without ``await`` nothing is sent (and
the cell ends in an error that says so).

A send happens once. Each one carries an idempotency key: the ``key`` you give, else one
derived from this turn, the conversation and the text. Sending the same text to the same
conversation again in the same turn (a cell run again after an error or a restart) sends
nothing and returns the first receipt with ``duplicate: True``. To say the same words twice
in one turn, give each send its own ``key``.
"""

from __future__ import annotations

from typing import Any

from klbr import rpc
from klbr.awaited import api

__all__ = ["Local", "check_key", "check_text", "local"]

_MAX_TEXT = 1_000_000


def check_text(text: Any, action: str, *, max_chars: int) -> str:
    """``text`` when it is a non-blank string of at most ``max_chars`` characters.

    Raises ``TypeError``/``ValueError`` whose message starts "cannot <action>:".
    """
    if not isinstance(text, str):
        raise TypeError(f"cannot {action}: text must be a string (got {type(text).__name__})")
    if not text.strip():
        raise ValueError(f"cannot {action}: text is empty (got only whitespace)")
    if len(text) > max_chars:
        raise ValueError(f"cannot {action}: text is over {max_chars} characters (got {len(text)})")
    return text


def check_key(key: Any, action: str) -> str:
    """``key`` when it is an idempotency key: a string of 1-200 characters; else ``ValueError``."""
    if not isinstance(key, str) or not 1 <= len(key) <= 200:
        raise ValueError(f"cannot {action}: key must be a string of 1-200 characters (got {key!r})")
    return key


class Local:
    """The local conversation. Bound in every cell as ``local``.

    ``send`` is a coroutine: ``await local.send(text)``, or nothing is sent. A send happens
    once: the same text again in the same turn sends nothing and returns the first receipt
    with ``duplicate: True``; a ``key`` makes the rule hold across the session.
    """

    @api("local.send", "nothing was sent")
    async def send(self, text: str, key: str | None = None) -> dict[str, Any]:
        """Send ``text`` (markdown) to the local conversation; return a receipt.

        The receipt is ``{send_id, seq, ordinal, duplicate}``: ``send_id`` identifies the
        durable send record, ``seq`` is its position in the session's record sequence and
        ``ordinal`` its place among this cell's effects. This is the only way to speak:
        printing, the cell's value and assistant text are never delivered.

        A send happens once: without ``key``, a second send of the same text to the same
        conversation in the same turn publishes nothing and returns the first send's
        receipt with ``duplicate: True`` (a cell run again after an error or a restart does
        not repeat it). With ``key`` the rule holds across the whole session instead: a
        second send with the same key, in any turn, publishes nothing. Distinct keys send
        the same text twice.

        Raises ``TypeError``/``ValueError`` for text that is not a non-empty string of at
        most 1,000,000 characters or a key that is not a string of 1-200 characters, and
        ``klbr.rpc.RpcError`` when the host refuses the send.

        >>> receipt = await local.send("Build is green; pushed nothing.")  # doctest: +SKIP
        >>> again = await local.send("Deployed.", key="deploy-42")  # doctest: +SKIP
        """
        params: dict[str, Any] = {"text": check_text(text, "send", max_chars=_MAX_TEXT)}
        if key is not None:
            params["key"] = check_key(key, "send")
        return await rpc.call_object("local.send", params, action="send")

    def __repr__(self) -> str:
        return "<local conversation: await local.send(text)>"


local = Local()
"""The one ``Local`` object the prelude binds."""
