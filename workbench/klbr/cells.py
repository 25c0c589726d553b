"""Running one cell: the work behind an ``execute`` request, testable without frames.

``await run_cell(code, ns)`` compiles ``code`` with top-level ``await`` allowed, runs it
in the namespace ``ns`` (which persists between cells) and returns a ``CellResult``. When
the last statement is an expression its value is returned as a ``repr``, like a REPL
(``None`` gives no value). ``print`` output of the cell is captured per cell.

Outcomes: ``ok``; ``error`` when the cell raised (with type, message and a traceback
without klbr's own frames); ``cancelled`` when the cell's task was cancelled. Calling
``wait(reason)`` ends the cell with outcome ``ok`` and ``wait == {"reason": reason}``:
waiting ends the cell and the turn, and the next turn starts from a new wake.
``wait(reason, seconds=…)`` (or ``until=…``) first sets a durable timer through the host,
so ``wait`` also carries its ``timer_id`` and ``due_at``; the timer's firing is that wake.

A call of klbr's API that the cell made and never awaited (``local.send("hi")`` without
``await``) did nothing: the cell's outcome is then ``error`` with the message
``"local.send was not awaited: nothing was sent"`` (``klbr.awaited``), and a ``wait()`` in it
does not end the turn.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import io
import itertools
import linecache
import os
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

from klbr.awaited import Made, discard, tracking, unawaited
from klbr.capture import DEFAULT_OUTPUT_CAP, CellOutput, StreamSink, current_output, install
from klbr.display import current_displays
from klbr.frames import cut_to_size

__all__ = ["CellResult", "WaitRequested", "format_exception", "run_cell", "wait"]

_KLBR_DIR = os.path.dirname(os.path.abspath(__file__))
_VALUE_CAP = 1024 * 1024
# An error's message and traceback, in the bytes they take in a frame. Small enough that a draft's
# 56 failing tests still fit one reply; the message cap is the smaller so the traceback keeps its frames.
_MESSAGE_CAP = 16 * 1024
_TRACEBACK_CAP = 64 * 1024
_cell_numbers = itertools.count(1)


class WaitRequested(BaseException):
    """Raised by ``wait()`` to end the running cell; the turn ends and waits for a wake.

    It derives from ``BaseException`` so that ``except Exception`` in a cell does not
    swallow it. ``timer`` is the host's ``timers.at`` parameters when the wait has a time.
    """

    def __init__(self, reason: str = "", timer: dict[str, Any] | None = None) -> None:
        """Carry the ``reason`` the cell gave for waiting, and the timer to set, if any."""
        super().__init__(reason)
        self.reason = reason
        self.timer = timer


def wait(reason: str = "", *, seconds: float | None = None, until: Any = None) -> None:
    """End this cell and the turn, and wait for the next input, timer or job completion.

    Nothing after the call runs. The cell's reply has outcome ``ok`` and
    ``wait == {"reason": reason}``. Waiting costs nothing: no model call happens until a
    new wake arrives.

    With ``seconds`` (a positive number) or ``until`` (an aware ``datetime``, an ISO 8601
    text with its offset, or Unix seconds) the host first writes a durable timer; it fires
    once at that time (also after a restart) and wakes you with an input from ``timer``,
    even if nobody writes. The reply's ``wait`` then has ``timer_id`` and ``due_at`` too.

    Raises ``TypeError`` when ``reason`` is not a string, ``ValueError`` for a bad time or
    both ``seconds`` and ``until``.

    >>> wait("asked the owner which branch to use")  # doctest: +SKIP
    >>> wait("check the build again", seconds=600)  # doctest: +SKIP
    """
    if not isinstance(reason, str):
        raise TypeError(f"cannot wait: reason must be a string (got {type(reason).__name__})")
    if seconds is not None and until is not None:
        raise ValueError("cannot wait: give seconds or until, not both (got both)")
    timer = None
    if seconds is not None or until is not None:
        from klbr.timers import due_params

        timer = due_params(until, seconds=seconds, action="wait")
    raise WaitRequested(reason, timer)


@dataclass
class CellResult:
    """The result of one cell, shaped like the ``execute`` reply.

    ``outcome`` is ``ok``, ``error`` or ``cancelled``; ``value`` the ``repr`` of a final
    expression or ``None``; ``error`` ``None`` or ``{type, message, traceback}``; ``wait``
    ``None`` or ``{reason}``; ``displays`` what ``display()`` showed, each ``{mime, data_b64}``.
    """

    outcome: str
    value: str | None = None
    stdout: str = ""
    stderr: str = ""
    error: dict[str, str] | None = None
    wait: dict[str, str] | None = None
    duration_ms: int = 0
    displays: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The ``ok.result`` object of an ``execute`` reply (``displays`` only when there are some)."""
        result = asdict(self)
        if not self.displays:
            del result["displays"]
        return result


def _is_klbr_frame(filename: str) -> bool:
    return os.path.dirname(os.path.abspath(filename)) == _KLBR_DIR


def _trim(te: traceback.TracebackException, seen: set[int]) -> None:
    if id(te) in seen:
        return
    seen.add(id(te))
    kept = [f for f in te.stack if not _is_klbr_frame(f.filename)]
    if kept:
        te.stack = traceback.StackSummary.from_list(kept)
    if isinstance(getattr(te, "_str", None), str):  # the message the traceback ends with; no public way to cut it
        te._str = _cap_message(te._str)
    for other in (te.__cause__, te.__context__, *(getattr(te, "exceptions", None) or [])):
        if other is not None:
            _trim(other, seen)


def format_exception(exc: BaseException) -> dict[str, str]:
    """Describe ``exc`` as ``{type, message, traceback}`` without klbr's own frames.

    When every frame is klbr's (a fault in klbr itself), the frames are all kept. So that the
    reply carrying it fits its frame, the message keeps its start (16 KiB, in the bytes it
    takes in a frame: ``klbr.frames.encoded_size``) and the traceback its end (64 KiB), where
    the failing line is; each says what it cut. When ``str(exc)`` itself raises, the message
    is ``<exception str() failed: RuntimeError: broken>`` (naming that error) and the traceback
    ends as Python's does, ``E: <exception str() failed>``.
    """
    te = traceback.TracebackException.from_exception(exc)
    _trim(te, set())
    trace = "".join(te.format())
    return {"type": type(exc).__name__, "message": _cap_message(_str_of(exc)), "traceback": _cap_traceback(trace)}


def _str_of(exc: BaseException) -> str:
    """``str(exc)``, or what made it fail: libraries do ship exceptions whose ``__str__`` raises."""
    try:
        return str(exc)
    except BaseException as failure:  # noqa: BLE001 - the error being described must still be reported
        try:
            detail = f"{type(failure).__name__}: {failure}"
        except BaseException:  # noqa: BLE001 - e.g. a __str__ that raises its own exception
            detail = type(failure).__name__
        return f"<exception str() failed: {detail}>"


def _cap_message(text: str) -> str:
    kept = cut_to_size(text, _MESSAGE_CAP)
    if len(kept) == len(text):
        return text
    return kept + f"... [klbr: message truncated, {len(text) - len(kept)} more characters]"


def _cap_traceback(text: str) -> str:
    # Each character's size in a frame is its own, so the longest end that fits is the
    # longest start of the reversed text that fits.
    kept = cut_to_size(text[::-1], _TRACEBACK_CAP)[::-1]
    if len(kept) == len(text):
        return text
    if "\n" in kept[:-1]:
        kept = kept[kept.index("\n") + 1 :]  # start at a whole line
    return f"[klbr: traceback truncated, {len(text) - len(kept)} earlier characters not kept]\n" + kept


def _cap_value(text: str) -> str:
    kept = cut_to_size(text, _VALUE_CAP)  # bytes in the frame: a control character takes up to 6
    if len(kept) == len(text):
        return text
    return kept + f"... [klbr: repr truncated, {len(text) - len(kept)} more characters]"


def _compile(code: str, filename: str) -> tuple[Any, Any]:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(code, filename, "exec", flags | ast.PyCF_ONLY_AST, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec", flags, dont_inherit=True)
    expr = compile(last, filename, "eval", flags, dont_inherit=True) if last is not None else None
    return body, expr


async def _evaluate(code_obj: Any, ns: dict[str, Any]) -> Any:
    result = eval(code_obj, ns)  # noqa: S307 - running the agent's cell is the point
    if code_obj.co_flags & inspect.CO_COROUTINE:
        result = await result
    return result


async def _arm_wait(result: CellResult, waited: WaitRequested) -> None:
    """Set the durable timer of a timed ``wait()`` before the cell replies; a refusal is the
    cell's error, so no turn ends waiting for a timer that does not exist."""
    from klbr.timers import arm_wait

    try:
        armed = await arm_wait(waited.reason, waited.timer or {})
    except asyncio.CancelledError:
        result.outcome, result.wait = "cancelled", None
    except BaseException as exc:  # noqa: BLE001 - reported as the cell's error
        result.outcome, result.wait, result.error = "error", None, format_exception(exc)
    else:
        assert result.wait is not None
        result.wait.update(timer_id=armed["timer_id"], due_at=armed["due_at"])


async def _run_code(code: str, filename: str, ns: dict[str, Any], result: CellResult) -> None:
    body, expr = _compile(code, filename)
    await _evaluate(body, ns)
    if expr is not None:
        value = await _evaluate(expr, ns)
        if value is not None:
            ns["_"] = value
            result.value = _cap_value(repr(value))


def _report_unawaited(result: CellResult, missed: list[Made]) -> bool:
    """Make calls of klbr's API that were never awaited the cell's error; True if any were.

    A cell that ended ``ok`` (or in ``wait()``) becomes an ``error`` (without a value) whose
    message names each call, e.g. ``"local.send was not awaited: nothing was sent"``; a cell
    that already raised keeps its error, with the calls added to its traceback.
    """
    if not missed:
        return False
    lines = [f'{m.filename}, line {m.line}: {m.message}; write "await {m.name}(...)"' for m in missed]
    if result.outcome == "error" and result.error is not None:
        result.error["traceback"] += "\nAlso, calls that were never awaited:\n" + "\n".join(lines) + "\n"
        return True
    result.outcome, result.wait, result.value = "error", None, None
    result.error = {
        "type": "NotAwaited",
        "message": "\n".join(m.message for m in missed),
        "traceback": "\n".join(lines) + "\n",
    }
    return True


async def run_cell(
    code: str,
    ns: dict[str, Any],
    *,
    name: str | None = None,
    sink: StreamSink | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
) -> CellResult:
    """Run ``code`` in namespace ``ns`` and return its ``CellResult``; never raises for
    anything the cell does.

    ``name`` names the cell in tracebacks (default ``<cell N>``). ``sink(stream, text)``
    receives live output batches, all before this returns. ``output_cap`` caps each
    captured stream in the bytes it takes in a frame (``klbr.frames.encoded_size``). A
    final expression's value is also bound to ``_``.

    >>> asyncio.run(run_cell("x = 2\\nx * 21", {})).value
    '42'
    """
    install()
    filename = name or f"<cell {next(_cell_numbers)}>"
    # Split as Python counts lines (\n, \r\n, \r), not as ``str.splitlines`` (which also
    # splits at form feeds and U+2028): a traceback then quotes the line that ran.
    linecache.cache[filename] = (len(code), None, io.StringIO(code, newline=None).readlines(), filename)
    output = CellOutput(output_cap, sink)
    token = current_output.set(output)
    shown: list[dict[str, str]] = []
    displays_token = current_displays.set(shown)
    started = time.monotonic()
    result = CellResult("ok")
    waited: WaitRequested | None = None
    try:
        with tracking() as made:
            try:
                await _run_code(code, filename, ns, result)
            except WaitRequested as wait_request:
                waited = wait_request
                result.wait = {"reason": waited.reason}
            if not _report_unawaited(result, await unawaited(made)) and waited and waited.timer:
                await _arm_wait(result, waited)
    except asyncio.CancelledError:
        result.outcome, result.wait = "cancelled", None
        discard(made)  # what the cancelled code made and never started, closed without a report
    except BaseException as exc:  # noqa: BLE001 - a cell's SystemExit must not end the kernel
        if isinstance(exc, SyntaxError):
            exc.__traceback__ = None  # the compiler's frames are klbr's, not the cell's
        result.outcome = "error"
        result.error = format_exception(exc)
        _report_unawaited(result, await unawaited(made))
    finally:
        current_output.reset(token)
        current_displays.reset(displays_token)
        output.close()
    result.stdout = output.text("stdout")
    result.stderr = output.text("stderr")
    result.duration_ms = int((time.monotonic() - started) * 1000)
    result.displays = shown
    return result
