"""The workbench kernel: one table of request handlers and the loop that serves frames.

Every host request gets exactly one reply, ``ok`` or ``error``, with its ``id``, even when
its handler raised. Handlers validate the frame, call a plain function and return the
``ok`` result; a ``RequestError`` becomes an ``error`` with its code, anything else an
``error`` with code ``internal`` and a traceback. An unknown ``kind`` gets
``unknown_kind``. ``execute`` requests wait in the cell queue (one cell at a time, in
arrival order) while ``cancel``, ``ping`` and ``hook`` are answered at once.

A reader thread reads frames and hands them to the event loop. A framing failure is
answered with one ``error`` frame (id ``""``, code ``frame_invalid``) and the process
exits non-zero; end of input exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import threading
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from klbr import rpc, skills, workspace
from klbr.capture import DEFAULT_OUTPUT_CAP, install
from klbr.cell_queue import CellJob, CellQueue
from klbr.cells import CellResult, format_exception, run_cell
from klbr.errors import RequestError
from klbr.frames import DEFAULT_MAX_FRAME_BYTES, FrameChannel, FrameError, FrameTooLarge
from klbr.hooks import call_hook
from klbr.prelude import build_namespace, prelude_names

__all__ = ["HANDLERS", "Generation", "Handler", "Kernel", "main", "serve"]

Handler = Callable[["Kernel", dict[str, Any]], Awaitable[Any]]
"""A request handler: validates the frame and returns the ``ok`` result, or raises."""

FrameWriter = Callable[[dict[str, Any]], None]

RPC_REPLY_KINDS = frozenset({"rpc_ok", "rpc_error"})
_EXIT_GRACE_S = 5.0
_CLOSE_GRACE_S = 2.0


@dataclass
class Generation:
    """What ``init`` fixed for this process: ids, workspace root, behaviour and namespace."""

    generation: int
    session: Any
    root: str
    behavior: dict[str, Any] | None
    ns: dict[str, Any]


class Kernel:
    """Dispatches host frames to ``HANDLERS`` and writes replies with ``write(frame)``."""

    def __init__(self, write: FrameWriter, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        """Reply through ``write``; cap each cell's captured streams to fit one frame."""
        self._write = write
        self.output_cap = min(DEFAULT_OUTPUT_CAP, max_frame_bytes // 8)
        self.rpc = rpc.HostRpc(write)
        rpc.bind(self.rpc)
        self.cells = CellQueue(self._run_job)
        self.state: Generation | None = None
        self.on_stop: Callable[[int], None] = lambda code: None
        self._tasks: set[asyncio.Task[None]] = set()

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
            self._error("", RequestError("invalid_request", f"cannot handle request: id must be a string (got {request_id!r})"))
            return
        try:
            if not isinstance(kind, str):
                raise RequestError("invalid_request", f"cannot handle request {request_id}: kind must be a string (got {kind!r})")
            handler = HANDLERS.get(kind)
            if handler is None:
                known = ", ".join(sorted(HANDLERS))
                raise RequestError("unknown_kind", f"cannot handle request {request_id}: unknown kind {kind!r} (known: {known})")
            result = await handler(self, frame)
        except RequestError as err:
            self._error(request_id, err)
        except asyncio.CancelledError:
            self._error(request_id, RequestError("internal", f"cannot finish {kind}: the workbench is shutting down"))
        except Exception as exc:  # noqa: BLE001 - every request is answered, whatever happened
            detail = format_exception(exc)
            self._error(request_id, RequestError("internal", f"cannot handle {kind}: {detail['type']}: {detail['message']}", detail["traceback"]))
        else:
            self._reply({"kind": "ok", "id": request_id, "result": result})

    def _reply(self, frame: dict[str, Any]) -> None:
        try:
            self._write(frame)
        except (FrameTooLarge, TypeError, ValueError) as exc:
            reason = str(exc) if isinstance(exc, FrameTooLarge) else f"result is not JSON ({exc})"
            self._error(frame["id"], RequestError("internal", f"cannot reply to request {frame['id']}: {reason}"))

    def _error(self, request_id: str, err: RequestError) -> None:
        frame: dict[str, Any] = {"kind": "error", "id": request_id, "code": err.code, "message": err.message}
        if err.traceback:
            frame["traceback"] = err.traceback
        try:
            self._write(frame)
        except FrameTooLarge:
            frame.pop("traceback", None)
            frame["message"] = err.message[:4096]
            self._write(frame)

    def _stream(self, request_id: str, name: str, text: str) -> None:
        try:
            self._write({"kind": "stream", "id": request_id, "name": name, "text": text})
        except FrameTooLarge:
            pass  # live output is lossy; the final reply carries the capture

    async def _run_job(self, job: CellJob) -> CellResult:
        assert self.state is not None, "cells are only queued after init"
        return await run_cell(
            job.code,
            self.state.ns,
            name=f"<cell {job.cell_id}>",
            sink=lambda name, text: self._stream(job.request_id, name, text),
            output_cap=self.output_cap,
        )

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


def _field(frame: dict[str, Any], name: str, kind: type, action: str) -> Any:
    value = frame.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        got = "nothing" if name not in frame else f"{type(value).__name__} {value!r}"[:120]
        raise RequestError("invalid_request", f"cannot {action}: {name} must be {kind.__name__} (got {got})")
    return value


def _behavior(value: Any, action: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("revision"), str) or not isinstance(value.get("path"), str):
        raise RequestError("invalid_request", f"cannot {action}: behavior must be null or {{revision, path}} strings (got {value!r})"[:400])
    return {"revision": value["revision"], "path": value["path"]}


async def handle_init(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Bind the workspace, skills and behaviour of this generation and build the namespace."""
    generation = _field(frame, "generation", int, "init")
    root = _field(frame, "workspace", str, "init")
    skills_payload = _field(frame, "skills", dict, "init")
    behavior = _behavior(frame.get("behavior"), "init")
    if "session" not in frame:
        raise RequestError("invalid_request", "cannot init: session is required (got nothing)")
    if kernel.state is not None:
        raise RequestError("invalid_request", f"cannot init: generation {kernel.state.generation} is already initialised (got generation {generation})")
    if not os.path.isabs(root) or not os.path.isdir(root):
        raise RequestError("invalid_request", f"cannot init: workspace must be an absolute directory path (got {root!r})")
    try:
        skills._install(skills_payload)
    except ValueError as err:
        raise RequestError("invalid_request", f"cannot init: {err}") from err
    bound = workspace.bind(root)
    ns = build_namespace()
    kernel.state = Generation(generation, frame["session"], bound.root, behavior, ns)
    return {"pid": os.getpid(), "python": platform.python_version(), "prelude": prelude_names(ns)}


async def handle_execute(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Queue one cell and return its result once it has run (or was cancelled)."""
    cell_id = _field(frame, "cell", str, "execute cell")
    code = _field(frame, "code", str, "execute cell")
    if kernel.state is None:
        raise RequestError("invalid_request", f"cannot execute cell {cell_id}: the workbench is not initialised (got no init)")
    result = await kernel.cells.submit(CellJob(frame["id"], cell_id, code))
    return result.to_json()


async def handle_cancel(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Cancel the running or a queued ``execute``; ``{cancelled: False}`` if there is none."""
    target = _field(frame, "target", str, "cancel")
    return {"cancelled": kernel.cells.cancel(target)}


async def handle_hook(kernel: Kernel, frame: dict[str, Any]) -> Any:
    """Run a behaviour hook; ``behavior`` in the frame overrides the release from ``init``."""
    name = _field(frame, "name", str, "run hook")
    args = _field(frame, "args", dict, f"run hook {name}")
    if "behavior" in frame:
        behavior = _behavior(frame["behavior"], f"run hook {name}")
    else:
        behavior = kernel.state.behavior if kernel.state else None
    return await call_hook(name, args, behavior)


async def handle_ping(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Answer ``{}``: the loop is alive."""
    return {}


async def handle_shutdown(kernel: Kernel, frame: dict[str, Any]) -> dict[str, Any]:
    """Answer ``{}`` and then stop the process with exit status 0."""
    asyncio.get_running_loop().call_soon(kernel.on_stop, 0)
    return {}


HANDLERS: dict[str, Handler] = {
    "init": handle_init,
    "execute": handle_execute,
    "cancel": handle_cancel,
    "hook": handle_hook,
    "ping": handle_ping,
    "shutdown": handle_shutdown,
}
"""Every host request kind and its handler; built once, at import."""


def _read_frames(channel: FrameChannel, loop: asyncio.AbstractEventLoop, kernel: Kernel, stop: Callable[[int], None]) -> None:
    code = 0
    try:
        while True:
            frame = channel.read()
            if frame is None:
                break
            loop.call_soon_threadsafe(kernel.receive, frame)
    except (FrameError, OSError) as err:
        code = 2
        channel.write({"kind": "error", "id": "", "code": "frame_invalid", "message": str(err)})
    try:
        loop.call_soon_threadsafe(stop, code)
    except RuntimeError:
        return  # the loop has already finished
    # A cell blocking the loop must not keep a dead or broken channel's process alive.
    threading.Event().wait(_EXIT_GRACE_S)
    os._exit(code)


async def serve(channel: FrameChannel) -> int:
    """Serve frames from ``channel`` until end of input, ``shutdown`` or a framing failure.

    Returns the exit status: 0 for end of input or ``shutdown``, 2 for a framing failure.
    """
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[int] = loop.create_future()

    def stop(code: int) -> None:
        if not stopped.done():
            stopped.set_result(code)

    kernel = Kernel(channel.write, max_frame_bytes=channel.max_frame_bytes)
    kernel.on_stop = stop
    reader = threading.Thread(target=_read_frames, args=(channel, loop, kernel, stop), name="klbr-frames", daemon=True)
    reader.start()
    code = await stopped
    await kernel.close()
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the workbench on this process's stdin/stdout: ``python3 -m klbr [--max-frame-bytes N]``."""
    parser = argparse.ArgumentParser(prog="python3 -m klbr", description="The klbr workbench (speaks frames on stdio).")
    parser.add_argument("--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME_BYTES, help="frame size limit in bytes")
    args = parser.parse_args(argv)
    if args.max_frame_bytes < 64:
        parser.error(f"cannot start: --max-frame-bytes must be at least 64 (got {args.max_frame_bytes})")
    channel = FrameChannel.from_stdio(args.max_frame_bytes)
    install()
    return asyncio.run(serve(channel))
