"""``local``: the agent's speech to the local conversation.

Assistant text is a scratchpad; only ``await local.send(text)`` reaches the person. The
host records the message durably before it answers, so a returned receipt means the
message is published.
"""

from __future__ import annotations

from typing import Any

from klbr import rpc

__all__ = ["Local", "local"]

_MAX_TEXT = 1_000_000


class Local:
    """The local conversation. Bound in every cell as ``local``."""

    async def send(self, text: str, key: str | None = None) -> dict[str, Any]:
        """Send ``text`` (markdown) to the local conversation; return a receipt.

        The receipt is ``{send_id, seq, ordinal, duplicate}``: ``send_id`` identifies the
        durable send record, ``seq`` is its position in the session's record sequence and
        ``ordinal`` its place among this cell's effects. This is the only way to speak:
        printing, the cell's value and assistant text are never delivered.

        With ``key`` the send is idempotent within the session: a second send with the same
        key publishes nothing and returns the first send's receipt with ``duplicate: True``.
        Use it for a message that must go out once even if the cell is run again after a
        restart.

        Raises ``TypeError``/``ValueError`` for text that is not a non-empty string of at
        most 1,000,000 characters or a key that is not a string of 1-200 characters, and
        ``klbr.rpc.RpcError`` when the host refuses the send.

        >>> receipt = await local.send("Build is green; pushed nothing.")  # doctest: +SKIP
        >>> again = await local.send("Deployed.", key="deploy-42")  # doctest: +SKIP
        """
        if not isinstance(text, str):
            raise TypeError(f"cannot send: text must be a string (got {type(text).__name__})")
        if not text.strip():
            raise ValueError("cannot send: text is empty (got only whitespace)")
        if len(text) > _MAX_TEXT:
            raise ValueError(f"cannot send: text is over {_MAX_TEXT} characters (got {len(text)})")
        params: dict[str, Any] = {"text": text}
        if key is not None:
            if not isinstance(key, str) or not 1 <= len(key) <= 200:
                raise ValueError(f"cannot send: key must be a string of 1-200 characters (got {key!r})")
            params["key"] = key
        result = await rpc.call("local.send", params)
        if not isinstance(result, dict):
            raise RuntimeError(f"cannot send: host replied with a non-object (got {type(result).__name__})")
        return result

    def __repr__(self) -> str:
        return "<local conversation: await local.send(text)>"


local = Local()
"""The one ``Local`` object the prelude binds."""
