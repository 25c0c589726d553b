"""Coroutines of klbr's API that a cell creates and never awaits.

Every function of klbr's API that asks the host for something (``local.send``,
``discord.send``, ``open_file``, ``run``, ``llm``, ``agent``, ``jobs.start``, …) is a
coroutine function: calling it only makes a coroutine, and nothing happens until that is
awaited. ``local.send("hi")`` without ``await`` sends nothing.

``@api(name, nothing)`` marks such a function and ``@api_class(prefix, **nothing)`` every
public coroutine method of a class. While a cell runs (inside ``tracking()``) each coroutine
they make is noted with the cell line that made it; at the cell's end ``unawaited()`` closes
the ones that never started and describes each as ``"<name> was not awaited: <nothing>"``,
e.g. ``"local.send was not awaited: nothing was sent"``. The cell's outcome is then ``error``
(``klbr.cells``). A coroutine handed to ``asyncio.create_task`` or ``gather`` has started by
then and is not reported. Outside a cell nothing is noted.

>>> @api("demo.ping", "nothing was pinged")
... async def ping() -> str:
...     return "pong"
>>> with tracking() as made:
...     forgotten = ping()
>>> [m.message for m in asyncio.run(unawaited(made))]
['demo.ping was not awaited: nothing was pinged']
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import sys
import types
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Iterator, TypeVar

__all__ = ["CoroutineFunction", "Made", "api", "api_class", "discard", "tracking", "unawaited"]

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

DEFAULT_NOTHING = "it did not run"
"""What an un-awaited call did, when its marker does not say more precisely."""

_PRUNE_FROM = 512


@dataclass
class Made:
    """One coroutine of klbr's API made in the running cell."""

    name: str
    nothing: str
    coro: Coroutine[Any, Any, Any]
    filename: str
    line: int

    @property
    def message(self) -> str:
        """``"<name> was not awaited: <nothing>"``, e.g. ``"local.send was not awaited: nothing was sent"``."""
        return f"{self.name} was not awaited: {self.nothing}"


class _Noted(list):  # type: ignore[type-arg] - a list of Made with a pruning threshold
    prune_at = _PRUNE_FROM


_noted: ContextVar[_Noted | None] = ContextVar("klbr_api_coroutines", default=None)
"""The list of the running cell (its task and the tasks it starts), else ``None``."""


def _note(made: Made) -> None:
    noted = _noted.get()
    if noted is None:
        return
    noted.append(made)
    if len(noted) > noted.prune_at:
        # Keep only what has not started; a long loop of awaited calls stays small.
        noted[:] = [m for m in noted if _unstarted(m.coro)]
        noted.prune_at = max(_PRUNE_FROM, 2 * len(noted))


def _unstarted(coro: Coroutine[Any, Any, Any]) -> bool:
    return inspect.getcoroutinestate(coro) == inspect.CORO_CREATED


class CoroutineFunction:
    """A coroutine function of klbr's API that notes each coroutine it makes in the running cell.

    It is a coroutine function to ``inspect``, ``help()`` and ``doctest`` (``async send(...)``,
    with the signature and docstring of the function it wraps) and binds as a method.
    """

    def __init__(self, function: Callable[..., Any], name: str, nothing: str) -> None:
        functools.update_wrapper(self, function)
        self.__code__ = function.__code__
        self.__defaults__ = function.__defaults__
        self.__kwdefaults__ = function.__kwdefaults__
        self.api_name = name
        self.nothing = nothing

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        coro = self.__wrapped__(*args, **kwargs)  # type: ignore[attr-defined]
        if _noted.get() is not None:
            caller = sys._getframe(1)
            _note(Made(self.api_name, self.nothing, coro, caller.f_code.co_filename, caller.f_lineno))
        return coro

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self) -> str:
        return f"<coroutine function {self.api_name}>"


def api(name: str, nothing: str = DEFAULT_NOTHING) -> Callable[[F], F]:
    """Mark the coroutine function ``name`` of klbr's API; ``nothing`` says what an
    un-awaited call did not do (``"nothing was sent"``)."""

    def decorate(function: F) -> F:
        return CoroutineFunction(function, name, nothing)  # type: ignore[return-value]

    return decorate


def api_class(prefix: str, **nothing: str) -> Callable[[C], C]:
    """Mark every public coroutine method of a class as ``<prefix>.<method>``; keyword
    arguments name what an un-awaited call of a method did not do."""

    def decorate(cls: C) -> C:
        for attr, value in list(vars(cls).items()):
            if attr.startswith("_") or not inspect.iscoroutinefunction(value):
                continue
            setattr(cls, attr, api(f"{prefix}.{attr}", nothing.get(attr, DEFAULT_NOTHING))(value))
        return cls

    return decorate


@contextlib.contextmanager
def tracking() -> Iterator[list[Made]]:
    """Note the API coroutines made inside the block (one cell) in the list it yields."""
    noted = _Noted()
    token = _noted.set(noted)
    try:
        yield noted
    finally:
        _noted.reset(token)


def discard(made: list[Made]) -> None:
    """Close the noted coroutines that never started (a cancelled cell's), reporting nothing."""
    for m in made:
        if _unstarted(m.coro):
            m.coro.close()


async def unawaited(made: list[Made]) -> list[Made]:
    """Close and return the noted coroutines that never started, oldest first.

    A coroutine given to ``asyncio.create_task`` starts at the loop's next turn: one turn is
    let pass before a coroutine counts as never awaited.
    """
    if not any(_unstarted(m.coro) for m in made):
        return []
    await asyncio.sleep(0)
    missed = [m for m in made if _unstarted(m.coro)]
    for m in missed:
        m.coro.close()  # closed before it started: no "never awaited" warning, nothing done
    return missed
