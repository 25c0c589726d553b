"""The workbench kernel: one table of request handlers and the dispatcher that answers frames.

Every host request gets exactly one reply, ``ok`` or ``error``, with its ``id``, even when
its handler raised. Handlers validate the frame, call a plain function and return the
``ok`` result; a ``RequestError`` becomes an ``error`` with its code, anything else an
``error`` with code ``internal`` and a traceback. An unknown ``kind`` gets
``unknown_kind``. ``execute`` requests wait in the cell queue (one cell at a time, in
arrival order) while ``cancel``, ``ping`` and ``hook`` are handled at once; ``cancel``
reaches the running cell, a queued cell or a running hook.

``klbr.serve`` connects a ``Kernel`` to the process's stdio.
"""

from __future__ import annotations

import asyncio
import contextlib
import marshal
import os
import platform
import sys
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from klbr import draft_tests, fingerprint, rpc, skills, workspace
from klbr.capture import DEFAULT_OUTPUT_CAP
from klbr.cell_queue import CellJob, CellQueue
from klbr.cells import CellResult, format_exception, run_cell
from klbr.errors import RequestError
from klbr.frames import DEFAULT_MAX_FRAME_BYTES, FrameTooLarge, cut_to_size, encode_frame
from klbr.hooks import UNCHANGED, call_hook
from klbr.prelude import build_namespace

__all__ = ["HANDLERS", "Generation", "Handler", "Kernel"]

Handler = Callable[["Kernel", dict[str, Any]], Awaitable[Any]]
"""A request handler: validates the frame and returns the ``ok`` result, or raises."""

RPC_REPLY_KINDS = frozenset({"rpc_ok", "rpc_error"})
_CLOSE_GRACE_S = 2.0
_FALLBACK_MESSAGE_CAP = 4096  # bytes in the frame, for an error reply that was over the limit
_NOTE_ROOM = 64  # "... [klbr: message truncated, N more characters]", whatever N is


@dataclass
class Generation:
    """What ``init`` fixed for this process: its generation, behaviour and namespace."""

    generation: int
    behavior: dict[str, Any] | None
    ns: dict[str, Any]


class Kernel:
    """Dispatches host frames to ``HANDLERS`` and writes replies with ``write(frame)``."""

    def __init__(self, write: rpc.FrameWriter, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        """Reply through ``write``; cap each cell's captured streams to fit one frame."""
        self._write = write
        self._max_frame_bytes = max_frame_bytes
        self.output_cap = min(DEFAULT_OUTPUT_CAP, max_frame_bytes // 8)
        self.rpc = rpc.HostRpc(write)
        rpc.bind(self.rpc)
        self.cells = CellQueue(self._run_job)
        self.state: Generation | None = None
        self.on_stop: Callable[[int], None] = lambda code: None
        self._tasks: set[asyncio.Task[None]] = set()
        self._hooks: dict[str, asyncio.Task[Any]] = {}

    def receive(self, frame: dict[str, Any]) -> None:
        """Start handling one decoded frame (called on the event loop)."""
        task = asyncio.get_running_loop().create_task(self.dispatch(frame))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def dispatch(self, frame: dict[str, Any]) -> None:
        """Handle one frame: settle an RPC, or run its handler and reply exactly once."""
        kind, request_id = frame.get("kind"), frame.get("id")
        if kind in RPC_REPLY_KINDS:
            self.rpc.resolve(frame)
            return
        if not isinstance(request_id, str):
            self._error("", _invalid(f"cannot handle request: id must be a string (got {request_id!r})"))
            return
        try:
            if not isinstance(kind, str):
                raise _invalid(f"cannot handle request {request_id}: kind must be a string (got {kind!r})")
            handler = HANDLERS.get(kind)
            if handler is None:
                raise RequestError(
                    "unknown_kind",
                    f"cannot handle request {request_id}: unknown kind {kind!r} "
                    f"(known: {', '.join(sorted(HANDLERS))})",
                )
            result = await handler(self, frame)
        except RequestError as err:
            self._error(request_id, err)
        except asyncio.CancelledError:
            message = f"cannot finish {kind}: the workbench is shutting down"
            self._error(request_id, RequestError("internal", message))
        except Exception as exc:  # noqa: BLE001 - every request is answered, whatever happened
            detail = format_exception(exc)
            message = f"cannot handle {kind}: {detail['type']}: {detail['message']}"
            self._error(request_id, RequestError("internal", message, detail["traceback"]))
        else:
            self._reply({"kind": "ok", "id": request_id, "result": result})

    def _reply(self, frame: dict[str, Any]) -> None:
        try:
            self._write(frame)
        except (FrameTooLarge, TypeError, ValueError) as exc:
            reason = str(exc) if isinstance(exc, FrameTooLarge) else f"result is not JSON ({exc})"
            message = f"cannot reply to request {frame['id']}: {reason}"
            self._error(frame["id"], RequestError("internal", message))

    def _error(self, request_id: str, err: RequestError) -> None:
        frame: dict[str, Any] = {
            "kind": "error", "id": request_id, "code": err.code, "message": err.message,
        }
        if err.traceback:
            frame["traceback"] = err.traceback
        try:
            self._write(frame)
        except FrameTooLarge:
            frame.pop("traceback", None)
            frame["message"] = self._fitted(frame, err.message)
            self._write(frame)

    def _fitted(self, frame: dict[str, Any], message: str) -> str:
        """``message`` cut to fit the error ``frame`` (at most 4 KiB), saying what it cut."""
        rest = len(encode_frame({**frame, "message": ""}, sys.maxsize)) - 4  # measured, not sent
        budget = min(_FALLBACK_MESSAGE_CAP, self._max_frame_bytes - rest - _NOTE_ROOM)
        kept = cut_to_size(message, budget)
        if len(kept) == len(message):
            return message
        return kept + f"... [klbr: message truncated, {len(message) - len(kept)} more characters]"

    def _stream(self, request_id: str, name: str, text: str) -> None:
        with contextlib.suppress(FrameTooLarge):  # live output is lossy; the final reply carries the capture
            self._write({"kind": "stream", "id": request_id, "name": name, "text": text})

    async def _run_job(self, job: CellJob) -> CellResult:
        assert self.state is not None, "cells are only queued after init"
        return await run_cell(
            job.code,
            self.state.ns,
            name=f"<cell {job.cell_id}>",
            sink=lambda name, text: self._stream(job.request_id, name, text),
            output_cap=self.output_cap,
        )

    async def run_hook(
        self, request_id: str, name: str, args: dict[str, Any], behavior: Any, unchanged_if: Any = None
    ) -> Any:
        """Run hook ``name`` in a task of its own that ``cancel_hook(request_id)`` can cancel.

        RPCs the hook makes are attributed to ``request_id``. A value equal to
        ``unchanged_if`` answers ``UNCHANGED``. Raises ``RequestError`` (``hook_failed``) when
        the hook fails or is cancelled.
        """
        task = rpc.attributed_task(call_hook(name, args, behavior, unchanged_if=unchanged_if), request_id)
        self._hooks[request_id] = task
        try:
            await rpc.settle(task)
        finally:
            self._hooks.pop(request_id, None)
        if task.cancelled():
            raise RequestError("hook_failed", f"cannot run hook {name}: cancelled by the host")
        return task.result()

    def cancel_hook(self, request_id: str) -> bool:
        """Cancel the running hook of ``request_id``; False when there is none."""
        task = self._hooks.get(request_id)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def idle(self) -> None:
        """Wait until every frame received so far has been handled and answered."""
        for _ in range(1000):
            if not self._tasks:
                return
            await asyncio.wait(set(self._tasks))

    async def close(self) -> None:
        """Cancel running and queued cells and give their replies a bounded moment."""
        self.cells.close()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=_CLOSE_GRACE_S)


def _invalid(message: str) -> RequestError:
    return RequestError("invalid_request", message)


def _field(frame: dict[str, Any], name: str, kind: type, action: str) -> Any:
    value = frame.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        got = "nothing" if name not in frame else f"{type(value).__name__} {value!r}"[:120]
        raise _invalid(f"cannot {action}: {name} must be {kind.__name__} (got {got})")
    return value


def _behavior(value: Any, action: str) -> dict[str, Any] | None:
    if value is None:
        return None
    fields = value if isinstance(value, dict) else {}
    if not (isinstance(fields.get("revision"), str) and isinstance(fields.get("path"), str)):
        got = repr(value)[:200]
        raise _invalid(f"cannot {action}: behavior must be null or {{revision, path}} strings (got {got})")
    return {"revision": value["revision"], "path": value["path"]}


async def handle_init(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Bind the workspace, skills and behaviour of this generation and build the namespace.

    The reply carries the fingerprint of what this process loaded (``klbr.fingerprint``).
    """
    generation = _field(frame, "generation", int, "init")
    root = _field(frame, "workspace", str, "init")
    skills_payload = _field(frame, "skills", dict, "init")
    behavior = _behavior(frame.get("behavior"), "init")
    if "session" not in frame:
        raise _invalid("cannot init: session is required (got nothing)")
    if kernel.state is not None:
        current = kernel.state.generation
        raise _invalid(f"cannot init: generation {current} is already initialised (got {generation})")
    if not os.path.isabs(root) or not os.path.isdir(root):
        raise _invalid(f"cannot init: workspace must be an absolute directory path (got {root!r})")
    try:
        skills._install(skills_payload)
    except ValueError as err:
        raise _invalid(f"cannot init: {err}") from err
    deny = frame.get("deny", [])
    if not isinstance(deny, list) or not all(isinstance(d, str) and os.path.isabs(d) for d in deny):
        raise _invalid(f"cannot init: deny must be a list of absolute paths (got {deny!r:.200})")
    workspace.bind(root, deny)
    ns = build_namespace()
    kernel.state = Generation(generation, behavior, ns)
    return {
        "pid": os.getpid(),
        "python": platform.python_version(),
        "prelude": sorted(name for name in ns if not name.startswith("_")),
        "fingerprint": fingerprint.LOADED,
    }


async def handle_execute(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Queue one cell and return its result once it has run (or was cancelled)."""
    cell_id = _field(frame, "cell", str, "execute cell")
    code = _field(frame, "code", str, "execute cell")
    if kernel.state is None:
        raise _invalid(f"cannot execute cell {cell_id}: the workbench is not initialised (got no init)")
    result = await kernel.cells.submit(CellJob(frame["id"], cell_id, code))
    return result.to_json()


async def handle_cancel(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Cancel the running or a queued ``execute``, or a running ``hook``.

    Answers ``{cancelled: False}`` when the target is unknown or already finished.
    """
    target = _field(frame, "target", str, "cancel")
    return {"cancelled": kernel.cells.cancel(target) or kernel.cancel_hook(target)}


async def handle_hook(kernel: Kernel, frame: dict[str, Any]) -> Any:
    """Run a behaviour hook; ``behavior`` in the frame overrides the release from ``init``."""
    name = _field(frame, "name", str, "run hook")
    args = _field(frame, "args", dict, f"run hook {name}")
    if "behavior" in frame:
        behavior = _behavior(frame["behavior"], f"run hook {name}")
    else:
        behavior = kernel.state.behavior if kernel.state else None
    if "messages" not in frame:
        return await kernel.run_hook(frame["id"], name, args, behavior)
    # context.prepare's messages: the hook gets its own deep copy (they are decoded JSON, so
    # only dicts, lists, strings, numbers, booleans and None), and an answer equal to what the
    # host sent is ``{unchanged: True}``, so the host uses its own messages.
    if name != "context.prepare":
        raise _invalid(f"cannot run hook {name}: only context.prepare takes messages (got {name})")
    sent = frame["messages"]
    if not isinstance(sent, list):
        raise _invalid(f"cannot run hook {name}: messages must be a list (got {type(sent).__name__})")
    given = marshal.loads(marshal.dumps(sent))
    result = await kernel.run_hook(frame["id"], name, {**args, "messages": given}, behavior, sent)
    return {"unchanged": True} if result is UNCHANGED else {"value": result}


async def handle_test(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Run the ``tests/test_*.py`` of the draft in ``behavior``; answer ``{tests: [...]}``.

    ``timeout_ms`` bounds each test, ``max_tests`` their number (``klbr.draft_tests``).
    """
    behavior = _behavior(frame.get("behavior"), "run draft tests")
    if behavior is None:
        raise _invalid("cannot run draft tests: behavior is required (got null)")
    timeout_ms = _field(frame, "timeout_ms", int, "run draft tests")
    max_tests = _field(frame, "max_tests", int, "run draft tests")
    if timeout_ms <= 0 or max_tests <= 0:
        raise _invalid(f"cannot run draft tests: timeout_ms and max_tests must be positive (got {timeout_ms}, {max_tests})")
    return await draft_tests.run_tests(behavior, timeout=timeout_ms / 1000, max_tests=max_tests)


async def handle_ping(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Answer ``{}``: the loop is alive."""
    return {}


async def handle_fingerprint(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Answer ``{loaded, current}``: the fingerprint taken at start and one taken now."""
    return {"loaded": fingerprint.LOADED, "current": fingerprint.current()}


async def handle_shutdown(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Answer ``{}`` and then stop the process with exit status 0."""
    asyncio.get_running_loop().call_soon(kernel.on_stop, 0)
    return {}


HANDLERS: dict[str, Handler] = {
    "init": handle_init,
    "execute": handle_execute,
    "cancel": handle_cancel,
    "hook": handle_hook,
    "test": handle_test,
    "ping": handle_ping,
    "fingerprint": handle_fingerprint,
    "shutdown": handle_shutdown,
}
"""Every host request kind and its handler; built once, at import."""
