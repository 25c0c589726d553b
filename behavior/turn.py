"""turn.next: what happens after a model reply without tool calls.

Contract. The host calls ``next(**args)`` at the end of a model step whose reply called no
tool, with keyword arguments describing the turn: ``session``, ``consumed_local`` (the turn
answers an input from the local UI), ``replied_with_text`` (the reply had text, which is
scratchpad and reaches nobody), ``sent`` (how many ``local.send`` the turn made so far) and
``reminders`` (how many reminders this hook gave in the turn so far). Return
``{"action": "wait"}`` to end the turn (the next turn starts only from a new wake: input,
timer or job completion) or ``{"action": "continue"}`` to call the model again within the
same turn; a continue may carry ``"reminder": "<text>"``, which the host records
(``turn.reminded``) and sends as the next request's last message.

Failure. If this hook raises or returns anything else, the host ends the turn as if it had
returned ``{"action": "wait"}``: a failing policy never causes an idle inference loop.
"""

REMINDER = (
    "[runtime] Your reply reached nobody: assistant text is a scratchpad, and the person who "
    "wrote sees only what a cell sends. To answer, call the python tool with "
    "`await local.send(\"…\")`; call `wait()` when you are done."
)


def next(  # noqa: A001 - the hook's name
    continue_requested: bool = False,
    consumed_local: bool = False,
    replied_with_text: bool = False,
    sent: int = 0,
    reminders: int = 0,
    **context: object,
) -> dict:
    """Wait; continue once with a reminder when a local message got no send.

    A reply of text only, or of nothing at all (small models on some servers answer with an
    empty message), reaches nobody. Speech stays explicit: the reminder asks the model to
    send, it never sends for it, and it is given once a turn, so a model that only writes
    text (or nothing) ends its turn after it.

    >>> next()
    {'action': 'wait'}
    >>> next(continue_requested=True)
    {'action': 'continue'}
    >>> next(consumed_local=True, replied_with_text=True)["action"]
    'continue'
    >>> next(consumed_local=True, replied_with_text=True, reminders=1)
    {'action': 'wait'}
    >>> next(consumed_local=True, replied_with_text=True, sent=1)
    {'action': 'wait'}
    >>> next(consumed_local=True)["action"]
    'continue'
    """
    if continue_requested is True:
        return {"action": "continue"}
    if consumed_local is True and sent == 0 and reminders == 0:
        return {"action": "continue", "reminder": REMINDER}
    return {"action": "wait"}
