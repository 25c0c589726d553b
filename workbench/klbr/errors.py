"""The one error type a request handler raises to refuse a request with a stable code."""

from __future__ import annotations

__all__ = ["RequestError", "REQUEST_ERROR_CODES"]

REQUEST_ERROR_CODES = frozenset({"unknown_kind", "invalid_request", "hook_failed", "internal"})
"""Every code an ``error`` reply may carry, besides ``frame_invalid`` for a bad frame."""


class RequestError(Exception):
    """A request was refused; the dispatcher answers it with an ``error`` frame.

    ``code`` is one of ``REQUEST_ERROR_CODES``; callers branch on it, never on the text.
    The message reads "cannot <action>: <reason> (got <value>)". ``traceback`` is the
    formatted traceback of the failure behind it, when there is one.

    >>> raise RequestError("invalid_request", "cannot execute cell: code must be a string (got int)")
    Traceback (most recent call last):
    klbr.errors.RequestError: cannot execute cell: code must be a string (got int)
    """

    def __init__(self, code: str, message: str, traceback: str | None = None) -> None:
        """Create a refusal with a stable ``code``, a message and an optional traceback."""
        if code not in REQUEST_ERROR_CODES:
            raise ValueError(f"cannot create request error: unknown code (got {code!r})")
        super().__init__(message)
        self.code = code
        self.message = message
        self.traceback = traceback
