"""The worker's copy of the messages ``context.prepare`` was last given.

The host sends ``context.prepare``'s messages as a delta of the list this worker keeps:
``{"id", "base", "parts"}``, where each part is ``{"copy": [start, end]}`` (a run of the kept
list, end exclusive) or ``{"add": [message, ...]}`` (new messages), concatenated in order. A
``base`` of ``None`` means every part is ``add``. The worker keeps the rebuilt list under
``id`` for the next request.

The kept list is never an object a hook sees: each call gives the hook a fresh deep copy
(``marshal``: the messages are decoded JSON, so only dicts, lists, strings, numbers, booleans
and ``None``), so a hook that edits its argument in place edits only its own copy. When the
hook returns a list equal to the kept one, the reply is ``{"unchanged": True}`` and the host
uses its own messages.
"""

from __future__ import annotations

import marshal
from typing import Any

from klbr.errors import RequestError

__all__ = ["KeptMessages"]


def _invalid(reason: str) -> RequestError:
    return RequestError("invalid_request", f"cannot run hook context.prepare: {reason}")


class KeptMessages:
    """The last messages list of ``context.prepare``, private to the worker.

    >>> kept = KeptMessages()
    >>> given, original = kept.rebuild({"id": "a", "base": None, "parts": [{"add": [{"role": "user"}]}]})
    >>> given == original and given is not original and given[0] is not original[0]
    True
    >>> kept.rebuild({"id": "b", "base": "a", "parts": [{"copy": [0, 1]}, {"add": [1]}]})[0]
    [{'role': 'user'}, 1]
    """

    def __init__(self) -> None:
        self.id: str | None = None
        self._messages: list[Any] = []

    def rebuild(self, delta: Any) -> tuple[list[Any], list[Any]]:
        """Apply ``delta`` to the kept list; return a fresh copy for the hook and the kept list.

        The kept list must not be changed or handed on. Raises ``RequestError``
        (``invalid_request``) for a malformed delta or a ``base`` that is not the kept list;
        the kept list is then forgotten.
        """
        try:
            messages = self._apply(delta)
        except RequestError:
            self.id, self._messages = None, []
            raise
        self.id, self._messages = delta["id"], messages
        return marshal.loads(marshal.dumps(messages)), messages

    def _apply(self, delta: Any) -> list[Any]:
        if not isinstance(delta, dict) or not isinstance(delta.get("id"), str):
            raise _invalid(f"messages must be {{id, base, parts}} (got {type(delta).__name__})")
        base, parts = delta.get("base"), delta.get("parts")
        if base is not None and base != self.id:
            raise _invalid(f"the messages' base is not the list this worker keeps (got {base!r}, kept {self.id!r})")
        if not isinstance(parts, list):
            raise _invalid(f"messages.parts must be a list (got {type(parts).__name__})")
        kept = self._messages if base is not None else []
        messages: list[Any] = []
        for part in parts:
            if isinstance(part, dict) and isinstance(part.get("add"), list):
                messages.extend(part["add"])  # decoded from the frame: JSON, and ours alone
                continue
            run = part.get("copy") if isinstance(part, dict) else None
            if (
                not isinstance(run, list)
                or len(run) != 2
                or not all(type(n) is int for n in run)
                or not 0 <= run[0] <= run[1] <= len(kept)
            ):
                raise _invalid(f"a part is neither add nor a copy within {len(kept)} kept messages (got {part!r})")
            messages.extend(kept[run[0] : run[1]])
        return messages
