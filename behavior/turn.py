"""turn.next: what happens after a cell ends a step of the turn.

Contract. The host calls ``next(**args)`` at the end of a model step whose cells did not
call ``wait()``, with keyword arguments describing the turn (for example ``session``, the
last cell's ``outcome`` and ``continue_requested``). Return ``{"action": "wait"}`` to
end the turn (the next turn starts only from a new wake: input, timer or job completion)
or ``{"action": "continue"}`` to call the model again within the same turn.

Failure. If this hook raises or returns anything else, the host ends the turn as if it had
returned ``{"action": "wait"}``: a failing policy never causes an idle inference loop.
"""


def next(continue_requested: bool = False, **context: object) -> dict:  # noqa: A001 - the hook's name
    """Wait, unless the turn says it asked to continue.

    >>> next()
    {'action': 'wait'}
    >>> next(continue_requested=True)
    {'action': 'continue'}
    """
    return {"action": "continue" if continue_requested is True else "wait"}
