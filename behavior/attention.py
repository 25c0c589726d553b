"""attention.plan: which pending inputs the next turn consumes, and where replies go.

Contract. The host calls ``plan(inputs=[...], session={...})`` after it has admitted new
input. ``inputs`` are the pending inputs in admission order; each is an object with at
least ``id`` and, when known, ``conversation`` (its immutable conversation identity),
``source`` and ``text``. ``session`` describes the session (its id and state).

Return ``{"consume": [input ids], "routing": {...}}``. The host records one attention
frame that consumes exactly the listed ids (they must be pending inputs) with this
routing, and acknowledges those inputs because of that frame. Inputs not listed stay
pending for a later plan. An empty ``consume`` starts no turn.

Failure. If this hook raises, returns something that is not JSON or names an id that is
not pending, the host records the failure and consumes nothing: every input stays pending
and the operator path keeps working. Admission never waits for this hook.
"""


def plan(inputs: list[dict], session: dict) -> dict:
    """Consume every pending input as one frame; route to their conversations, in order.

    >>> plan([{"id": "in_1", "conversation": "local"}], {"id": "default"})
    {'consume': ['in_1'], 'routing': {'conversations': ['local']}}
    """
    consume = [item["id"] for item in inputs]
    conversations: list[str] = []
    for item in inputs:
        conversation = item.get("conversation")
        if conversation is not None and conversation not in conversations:
            conversations.append(conversation)
    return {"consume": consume, "routing": {"conversations": conversations}}
