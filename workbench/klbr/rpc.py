"""Host RPC: how a cell asks the host for an effect the host owns.

A call sends an ``rpc`` frame ``{id, parent, method, params}`` with a worker-minted id
(``w1``, ``w2``, ...) and the id of the ``execute`` or ``hook`` request it runs under, then waits for
the host's ``rpc_ok`` or ``rpc_error``. If the waiting task is cancelled, an
``rpc_cancel`` frame tells the host to clean up (kill the process group of a ``run``).

The kernel binds one ``HostRpc`` per process with ``bind()``; ``call()`` uses it.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from contextvars import ContextVar
from typing import Any, Callable, Coroutine

__all__ = [
    "HostRpc", "RpcError", "attributed_task", "bind", "call", "call_json", "call_object", "current_parent", "settle",
]

current_parent: ContextVar[str | None] = ContextVar("klbr_rpc_parent", default=None)


def attributed_task(coro: Coroutine[Any, Any, Any], request_id: str) -> asyncio.Task[Any]:
    """Start ``coro`` as a task whose host RPCs are attributed to ``request_id``."""
    context = contextvars.copy_context()
    context.run(current_parent.set, request_id)
    return asyncio.get_running_loop().create_task(coro, context=context)


async def settle(task: asyncio.Task[Any]) -> None:
    """Wait until ``task`` ends; when the waiter itself is cancelled, cancel ``task`` too.

    The task's own outcome (result, exception or cancellation) is left on it for the caller.
    """
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:
        task.cancel()
        raise
"""The id of the ``execute`` or ``hook`` request running in this context, else ``None``."""

FrameWriter = Callable[[dict[str, Any]], None]


class RpcError(Exception):
    """The host refused or failed an RPC; ``code`` is the host's stable error code."""

    def __init__(self, method: str, code: str, message: str) -> None:
        """Describe a failed ``method`` call with the host's ``code`` and ``message``."""
        super().__init__(f"{method} failed ({code}): {message}")
        self.method = method
        self.code = code
        self.host_message = message


class HostRpc:
    """Mints RPC ids, sends ``rpc`` frames and resolves them from the host's replies."""

    def __init__(self, write: FrameWriter) -> None:
        """Send frames with ``write(frame)``."""
        self._write = write
        self._ids = itertools.count(1)
        self._pending: dict[str, tuple[str, asyncio.Future[Any]]] = {}

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """Ask the host to perform ``method`` with ``params`` and return its result.

        Raises ``RpcError`` when the host answers ``rpc_error``, and ``RuntimeError`` when
        called outside a cell or hook (there is no request to attribute the effect to). On
        cancellation sends ``rpc_cancel`` and re-raises.
        """
        parent = current_parent.get()
        if parent is None:
            raise RuntimeError(
                f"cannot call host rpc {method}: only a running cell or hook may call it (got neither)"
            )
        rpc_id = f"w{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rpc_id] = (method, future)
        try:
            self._write({"kind": "rpc", "id": rpc_id, "parent": parent, "method": method, "params": params})
            return await future
        except asyncio.CancelledError:
            if future.cancelled() or not future.done():  # awaiting it cancels the future too
                self._write({"kind": "rpc_cancel", "id": rpc_id})
            raise
        finally:
            self._pending.pop(rpc_id, None)

    def resolve(self, frame: dict[str, Any]) -> bool:
        """Settle the call answered by an ``rpc_ok``/``rpc_error`` frame.

        Returns False when no call waits for that id (it was cancelled or never made).
        """
        entry = self._pending.get(frame.get("id", ""))
        if entry is None:
            return False
        method, future = entry
        if future.done():
            return False
        if frame.get("kind") == "rpc_ok":
            future.set_result(frame.get("result"))
        else:
            code = frame.get("code")
            message = frame.get("message")
            future.set_exception(
                RpcError(method, code if isinstance(code, str) else "internal", str(message or "no message"))
            )
        return True


_bound: HostRpc | None = None


def bind(client: HostRpc | None) -> None:
    """Make ``client`` the host RPC used by ``call()`` (``None`` unbinds)."""
    global _bound
    _bound = client


async def call(method: str, params: dict[str, Any]) -> Any:
    """Call ``method`` on the host through the bound ``HostRpc``.

    Raises ``RuntimeError`` when no host is connected, ``RpcError`` when the host refuses.
    """
    if _bound is None:
        raise RuntimeError(f"cannot call host rpc {method}: no host is connected (got no binding)")
    return await _bound.call(method, params)


async def call_object(method: str, params: dict[str, Any], *, action: str | None = None) -> dict[str, Any]:
    """Call ``method`` like ``call()`` and return its result, which must be a JSON object.

    Raises what ``call()`` raises, and ``RuntimeError`` for any other result, naming
    ``cannot <action>`` (or ``method`` when no action is given).
    """
    result = await call(method, params)
    if not isinstance(result, dict):
        where = method if action is None else f"cannot {action}"
        raise RuntimeError(f"{where}: host replied with a non-object (got {type(result).__name__})")
    return result


async def call_json(method: str, params: dict[str, Any]) -> Any:
    """Call ``method`` like ``call()`` and return its result, which must be a JSON object or list.

    Raises what ``call()`` raises, and ``RuntimeError`` naming ``method`` for any other result.
    """
    result = await call(method, params)
    if not isinstance(result, (dict, list)):
        raise RuntimeError(f"{method}: host replied with a {type(result).__name__}, not JSON")
    return result
