"""context.prepare: the last edit of the messages sent to the model.

Contract. The host calls ``prepare(messages=[...], **args)`` with the provider messages it
is about to send (OpenAI chat format, system message first) and other keyword arguments
describing the turn. Return the list of messages to send. Keep every tool call paired with
its tool result: a provider rejects a sequence that breaks a pair.

Failure. If this hook raises, returns something that is not a list of messages or is not
JSON, the host sends the messages it built, unchanged, and records the failure.
"""


def prepare(messages: list[dict], **context: object) -> list[dict]:
    """Return the messages unchanged.

    >>> prepare([{"role": "user", "content": "hi"}])
    [{'role': 'user', 'content': 'hi'}]
    """
    return messages
