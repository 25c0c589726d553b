"""attention.plan: which pending inputs the next turn consumes, and where replies go.

Contract. The host calls ``plan(inputs=[...], session={...})`` after it has admitted new
input. ``inputs`` are the pending inputs in admission order; each is an object with at
least ``id`` and, when known, ``conversation`` (its immutable conversation identity),
``source_kind``, ``author`` and ``body``. A Discord input's ``body`` is an object: ``text``,
``message_id``, ``channel_id``, ``dm`` (a direct message), ``mentioned`` (the bot is
mentioned), ``reply_to`` (``{message_id, to_bot}`` or ``None``), ``thread_of`` and
``attachments``. ``session`` describes the session (its id and state).

Return ``{"consume": [input ids], "ignore": [{"id", "reason"}], "routing": {...}}``. The
host records one attention frame that takes exactly the listed ids (they must be pending
inputs) with this routing and acknowledges them because of that frame. A turn answers the
consumed inputs; ignored ones are taken with their reasons recorded in the frame and given to
no turn, and a frame of ignored inputs only makes no model request at all. Inputs not listed
stay pending for a later plan. ``ignore`` may be left out. An input no plan takes for longer than the configured
age (``KLBR_INPUT_EXPIRE_MS``, default a day) ends ``expired``, with an ``input.expired``
record.

Failure. If this hook raises, returns something that is not JSON or names an id that is
not pending, the host records the failure and consumes nothing: every input stays pending
and the operator path keeps working. Admission never waits for this hook.
"""

AMBIENT = "ambient: a Discord message that does not mention the bot, is not a direct message and does not reply to it"


def addressed(item: dict) -> bool:
    """Whether an input asks for an answer: anything not from Discord, and on Discord a
    mention of the bot, a direct message or a reply to one of its messages.

    >>> addressed({"source_kind": "local"})
    True
    >>> addressed({"source_kind": "discord", "body": {"text": "hi all", "mentioned": False, "dm": False, "reply_to": None}})
    False
    >>> addressed({"source_kind": "discord", "body": {"text": "hey", "mentioned": True}})
    True
    >>> addressed({"source_kind": "discord", "body": {"text": "ok", "reply_to": {"message_id": "9", "to_bot": True}}})
    True
    """
    if item.get("source_kind") != "discord":
        return True
    body = item.get("body")
    if not isinstance(body, dict):
        return True  # an input admitted before Discord bodies carried these fields
    reply = body.get("reply_to") or {}
    return bool(body.get("mentioned") or body.get("dm") or reply.get("to_bot"))


def plan(inputs: list[dict], session: dict) -> dict:
    """Answer what is addressed to the bot as one frame; read ambient Discord talk in silence.

    >>> plan([{"id": "in_1", "conversation": "local"}], {"id": "default"})
    {'consume': ['in_1'], 'routing': {'conversations': ['local']}}
    >>> plan([{"id": "in_2", "source_kind": "discord", "conversation": "discord:5", "body": {"mentioned": False}}], {})["ignore"][0]["id"]
    'in_2'
    """
    consume: list[str] = []
    ignore: list[dict] = []
    conversations: list[str] = []
    for item in inputs:
        if not addressed(item):
            ignore.append({"id": item["id"], "reason": AMBIENT})
            continue
        consume.append(item["id"])
        conversation = item.get("conversation")
        if conversation is not None and conversation not in conversations:
            conversations.append(conversation)
    result: dict = {"consume": consume, "routing": {"conversations": conversations}}
    if ignore:
        result["ignore"] = ignore
    return result
