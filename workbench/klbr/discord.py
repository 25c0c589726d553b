"""``discord``: the agent's messages and reactions in Discord channels, through the host's
outbox, and its explicit social decisions.

``await discord.send(text)`` does not post anything itself: the host writes an outbox row
(``pending``) and answers at once; one sender in the daemon posts rows in order per channel.
In a turn that answers Discord input, a send replies to (``message_reference``) the newest
input it answers in that channel; that input's reply state is consumed only once the reply is
``confirmed``. ``await discord.react(message, emoji)`` adds a reaction the same way,
``await discord.typing()`` shows "typing…" (best effort, never queued), and
``await ignore(input_id, reason)`` records that you read an input and chose not to answer.
These are coroutines: without ``await`` nothing is queued (and the cell ends in an error).

A send or reaction is queued once. Each carries an idempotency key: the ``key`` you give,
else one derived from this turn, the channel (and the message answered or reacted to) and the
text or emoji. The same send again in the same turn (a cell run again after an error or a
restart) queues nothing and returns the first receipt with ``duplicate: True``: one outbox
row, one nonce, one message in Discord. A ``key`` holds across the whole session; distinct
keys send the same text twice.

Ask ``await discord.status(outbox_id)`` what became of a row:

- ``pending``: written, not yet sent (or waiting out a rate limit: Discord's 429 means it was
  not processed, so the same row is tried again, and the attempt counted);
- ``attempting``: the request is on its way;
- ``confirmed``: Discord has the message (``remote_id``); never posted again;
- ``failed``: Discord refused it (an HTTP 4xx other than 429, e.g. no permission); not posted;
- ``unknown``: no clear answer (timeout, network error, server error, or a restart during
  the request). It is never blindly resent: the host reconciles it by its ``nonce`` (a
  re-post with the same nonce inside Discord's nonce window returns the original; outside it
  the channel's recent messages are searched) and it becomes ``confirmed``, or stays
  ``unknown`` with every try listed in ``tries`` for you or the owner to decide.
"""

from __future__ import annotations

from typing import Any

from klbr import rpc
from klbr.awaited import api, api_class
from klbr.local import check_key, check_text

__all__ = ["Discord", "discord", "ignore"]

_MAX_TEXT = 2000


def _snowflake(name: str, value: object) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not text.isdigit() or not 1 <= len(text) <= 20:
        raise ValueError(f"cannot send to discord: {name} must be a Discord id of 1-20 digits (got {value!r})")
    return text


def _anchor(value: object) -> str | bool:
    if value is False:
        return False
    if isinstance(value, str) and value.startswith("in_"):
        return value
    return _snowflake("reply_to", value)


@api_class("discord", send="nothing was sent", react="no reaction was added",
           typing="no typing was shown", status="nothing was read")
class Discord:
    """Discord channels of the configuration. Bound in every cell as ``discord``.

    Every method is a coroutine: ``await`` it, or nothing happens. A send or reaction is
    queued once: repeated in the same turn with the same text (or emoji) and destination, it
    queues nothing and returns the first receipt with ``duplicate: True``; a ``key`` makes
    the rule hold across the session. See ``help(klbr.discord)`` for the delivery states.
    """

    async def send(self, text: str, channel: str | int | None = None,
                   reply_to: str | int | bool | None = None, key: str | None = None) -> dict[str, Any]:
        """Queue ``text`` (at most 2000 characters) for a Discord channel; return ``{outbox_id, state, duplicate}``.

        With ``channel=None`` the message goes to the Discord channel of the inputs this turn
        answers (their conversation ``discord:<channel id>``); otherwise ``channel`` must be
        one of the configured channel ids or a thread of one. ``reply_to`` is the message to
        answer: a message id or an input id (``in_…``); by default the newest input this turn
        answers in that channel; ``False`` for none.

        The receipt's ``state`` is ``"pending"``: the row is durable, not yet posted. Use
        ``await discord.status(receipt["outbox_id"])`` to learn the outcome.

        Queued once: the same text to the same channel and anchor again in this turn queues
        nothing and returns the first row's receipt with ``duplicate: True``. With ``key``
        (1-200 characters) a second send of that key in the session queues nothing.

        Raises ``TypeError``/``ValueError`` for bad arguments, and ``klbr.rpc.RpcError`` when
        the host refuses, e.g. when Discord is not configured or the channel is not one of
        the configured ones.

        >>> receipt = await discord.send("Deployed.")  # doctest: +SKIP
        """
        params: dict[str, Any] = {"text": check_text(text, "send to discord", max_chars=_MAX_TEXT)}
        if channel is not None:
            params["channel"] = _snowflake("channel", channel)
        if reply_to is not None:
            params["reply_to"] = _anchor(reply_to)
        if key is not None:
            params["key"] = check_key(key, "send to discord")
        return await rpc.call_object("discord.send", params)

    async def react(self, message: str | int, emoji: str, channel: str | int | None = None,
                    key: str | None = None) -> dict[str, Any]:
        """Queue a reaction ``emoji`` (``"👍"``, or ``"name:id"`` for a custom one) on ``message``.

        ``message`` is an input id (``in_…``: its channel is known) or a message id (in
        ``channel``, by default this turn's). Returns ``{outbox_id, state, duplicate}`` like
        ``send``, and is queued once the same way (``key`` likewise).

        >>> await discord.react(input_id, "👀")  # doctest: +SKIP
        """
        if not isinstance(emoji, str) or not emoji or len(emoji) > 100:
            raise ValueError(f"cannot react on discord: emoji must be 1-100 characters (got {emoji!r})")
        target = message if isinstance(message, str) and message.startswith("in_") else _snowflake("message", message)
        params: dict[str, Any] = {"message": target, "emoji": emoji}
        if channel is not None:
            params["channel"] = _snowflake("channel", channel)
        if key is not None:
            params["key"] = check_key(key, "react on discord")
        return await rpc.call_object("discord.react", params)

    async def typing(self, channel: str | int | None = None) -> dict[str, Any]:
        """Show "typing…" in ``channel`` (by default this turn's) for a few seconds.

        Best effort: returns ``{ok, error}`` and is never queued or retried.
        """
        params: dict[str, Any] = {} if channel is None else {"channel": _snowflake("channel", channel)}
        return await rpc.call_object("discord.typing", params)

    async def status(self, outbox_id: str) -> dict[str, Any]:
        """Return what is known of a queued row: ``{outbox_id, kind, state, attempts, remote_id, error,
        channel_id, reply_to, input_id, nonce, tries}``; ``tries`` lists what reconciliation did.

        ``state`` is one of ``pending``, ``attempting``, ``confirmed``, ``failed`` or
        ``unknown`` (see ``help(klbr.discord)``). Raises ``klbr.rpc.RpcError`` for an id the
        host does not know.

        >>> (await discord.status(receipt["outbox_id"]))["state"]  # doctest: +SKIP
        'confirmed'
        """
        if not isinstance(outbox_id, str) or not outbox_id:
            raise TypeError(f"cannot read discord send status: outbox_id must be a non-empty string (got {outbox_id!r})")
        return await rpc.call_object("discord.status", {"outbox_id": outbox_id})

    def __repr__(self) -> str:
        return ("<discord: await discord.send(text, channel=None, reply_to=None, key=None); "
                "await discord.react(message, emoji, key=None); await discord.typing(); "
                "await discord.status(outbox_id)>")


discord = Discord()
"""The one ``Discord`` object the prelude binds."""


@api("ignore", "nothing was recorded")
async def ignore(input_id: str, reason: str) -> dict[str, Any]:
    """Record that you read input ``input_id`` of this turn and chose not to answer it, and why.

    The host appends ``input.ignored`` for the turn's frame; nothing is sent.

    >>> await ignore(input_id, "small talk between others")  # doctest: +SKIP
    """
    if not isinstance(input_id, str) or not input_id.startswith("in_"):
        raise ValueError(f"cannot ignore input: input_id must be an input id (got {input_id!r})")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 500:
        raise ValueError(f"cannot ignore input: reason must be 1-500 characters (got {reason!r})")
    return await rpc.call_object("input.ignore", {"input": input_id, "reason": reason})
