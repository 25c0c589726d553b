"""``discord``: the agent's messages to Discord channels, through the host's outbox.

``await discord.send(text)`` does not post anything itself: the host writes an outbox row
(``pending``) and answers at once; one sender in the daemon posts rows in order. Ask
``await discord.status(outbox_id)`` what became of a message:

- ``pending``: written, not yet sent;
- ``attempting``: the request is on its way;
- ``confirmed``: Discord answered with a message id (``remote_id``);
- ``failed``: Discord refused it (an HTTP 4xx, e.g. no permission); it was not posted;
- ``unknown``: no clear answer (timeout, network error, server error, or a restart during
  the request). It may or may not have been posted, and it is never retried by itself,
  because a retry could post it twice. Look at the channel before sending it again.
"""

from __future__ import annotations

from typing import Any

from klbr import rpc

__all__ = ["Discord", "discord"]

_MAX_TEXT = 2000


def _snowflake(name: str, value: object) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not text.isdigit() or not 1 <= len(text) <= 20:
        raise ValueError(f"cannot send to discord: {name} must be a Discord id of 1-20 digits (got {value!r})")
    return text


class Discord:
    """Discord channels of the configuration. Bound in every cell as ``discord``."""

    async def send(self, text: str, channel: str | int | None = None,
                   reply_to: str | int | None = None) -> dict[str, Any]:
        """Queue ``text`` (at most 2000 characters) for a Discord channel; return ``{outbox_id, state}``.

        With ``channel=None`` the message goes to the Discord channel of the inputs this turn
        answers (their conversation ``discord:<channel id>``); otherwise ``channel`` must be
        one of the configured channel ids. ``reply_to`` is the id of a message to answer.

        The receipt's ``state`` is ``"pending"``: the row is durable, not yet posted. Use
        ``await discord.status(receipt["outbox_id"])`` to learn the outcome.

        Raises ``TypeError``/``ValueError`` for bad arguments, and ``klbr.rpc.RpcError`` when
        the host refuses, e.g. when Discord is not configured or the channel is not one of
        the configured ones.

        >>> receipt = await discord.send("Deployed.")  # doctest: +SKIP
        """
        if not isinstance(text, str):
            raise TypeError(f"cannot send to discord: text must be a string (got {type(text).__name__})")
        if not text.strip():
            raise ValueError("cannot send to discord: text is empty (got only whitespace)")
        if len(text) > _MAX_TEXT:
            raise ValueError(f"cannot send to discord: text is over {_MAX_TEXT} characters (got {len(text)})")
        params: dict[str, Any] = {"text": text}
        if channel is not None:
            params["channel"] = _snowflake("channel", channel)
        if reply_to is not None:
            params["reply_to"] = _snowflake("reply_to", reply_to)
        return await self._call("discord.send", params)

    async def status(self, outbox_id: str) -> dict[str, Any]:
        """Return what is known of a queued message: ``{outbox_id, state, attempts, remote_id, error, channel_id}``.

        ``state`` is one of ``pending``, ``attempting``, ``confirmed``, ``failed`` or
        ``unknown`` (see ``help(klbr.discord)``). Raises ``klbr.rpc.RpcError`` for an id the
        host does not know.

        >>> (await discord.status(receipt["outbox_id"]))["state"]  # doctest: +SKIP
        'confirmed'
        """
        if not isinstance(outbox_id, str) or not outbox_id:
            raise TypeError(f"cannot read discord send status: outbox_id must be a non-empty string (got {outbox_id!r})")
        return await self._call("discord.status", {"outbox_id": outbox_id})

    @staticmethod
    async def _call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        result = await rpc.call(method, params)
        if not isinstance(result, dict):
            raise RuntimeError(f"{method}: host replied with a non-object (got {type(result).__name__})")
        return result

    def __repr__(self) -> str:
        return "<discord: await discord.send(text, channel=None, reply_to=None); await discord.status(outbox_id)>"


discord = Discord()
"""The one ``Discord`` object the prelude binds."""
