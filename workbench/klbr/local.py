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

    async def send(self, text: str) -> dict[str, Any]:
        """Send ``text`` (markdown) to the local conversation; return ``{send_id, seq}``.

        ``send_id`` identifies the durable send record and ``seq`` is its position in the
        session's record sequence. This is the only way to speak: printing, the cell's
        value and assistant text are never delivered.

        Raises ``TypeError``/``ValueError`` for text that is not a non-empty string of at
        most 1,000,000 characters, and ``klbr.rpc.RpcError`` when the host refuses the send.

        >>> receipt = await local.send("Build is green; pushed nothing.")  # doctest: +SKIP
        """
        if not isinstance(text, str):
            raise TypeError(f"cannot send: text must be a string (got {type(text).__name__})")
        if not text.strip():
            raise ValueError("cannot send: text is empty (got only whitespace)")
        if len(text) > _MAX_TEXT:
            raise ValueError(f"cannot send: text is over {_MAX_TEXT} characters (got {len(text)})")
        result = await rpc.call("local.send", {"text": text})
        if not isinstance(result, dict):
            raise RuntimeError(f"cannot send: host replied with a non-object (got {type(result).__name__})")
        return result

    def __repr__(self) -> str:
        return "<local conversation: await local.send(text)>"


local = Local()
"""The one ``Local`` object the prelude binds."""
