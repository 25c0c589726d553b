"""Behaviour hooks: editable Python policy functions, loaded from a behaviour release.

Hook names map to files and functions of the release directory:

    attention.plan   -> attention.py : plan
    model.plan       -> model.py     : plan
    context.prepare  -> context.py   : prepare
    turn.next        -> turn.py      : next

A hook is called with the request's ``args`` as keyword arguments; it may be a plain or
an ``async`` function and must return a JSON-serialisable value. Modules are imported
under a name keyed by the release revision, so a new revision is always a fresh import
and a cell or hook pinned to the old one keeps the old code. Any failure raises
``RequestError`` with code ``hook_failed``; the host then falls back to a safe default.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import sys
from types import ModuleType
from typing import Any

from klbr.cells import format_exception
from klbr.errors import RequestError

__all__ = ["HOOKS", "call_hook", "load_hook"]

HOOKS: dict[str, tuple[str, str]] = {
    "attention.plan": ("attention.py", "plan"),
    "model.plan": ("model.py", "plan"),
    "context.prepare": ("context.py", "prepare"),
    "turn.next": ("turn.py", "next"),
}
"""Each hook name's file (in the release directory) and function name."""

_modules: dict[str, ModuleType] = {}


def _module_name(revision: str, path: str, filename: str) -> str:
    key = hashlib.sha256(f"{revision}\0{os.path.realpath(path)}".encode()).hexdigest()[:20]
    return f"klbr_behavior_{key}.{filename.removesuffix('.py')}"


def _failed(name: str, reason: str, exc: BaseException | None = None) -> RequestError:
    trace = format_exception(exc)["traceback"] if exc is not None else None
    return RequestError("hook_failed", f"cannot run hook {name}: {reason}", trace)


def load_hook(name: str, behavior: dict[str, Any]) -> Any:
    """Return the hook function ``name`` from release ``behavior`` (``{revision, path}``).

    Raises ``RequestError`` (``hook_failed``) for an unknown name, a missing file or
    function, or a module that fails to import.
    """
    if name not in HOOKS:
        raise _failed(name, f"unknown hook name (got {name!r}; known: {', '.join(HOOKS)})")
    filename, function = HOOKS[name]
    revision, path = behavior.get("revision"), behavior.get("path")
    if not isinstance(revision, str) or not isinstance(path, str):
        raise _failed(name, f"behavior needs string revision and path (got {behavior!r})")
    source = os.path.join(path, filename)
    module_name = _module_name(revision, path, filename)
    module = _modules.get(module_name)
    if module is None:
        if not os.path.isfile(source):
            raise _failed(name, f"hook file is missing (got {source})")
        module = ModuleType(module_name)
        module.__file__ = source
        sys.modules[module_name] = module  # dataclasses and pickling look modules up here
        try:
            # Compiled by hand: a release directory is immutable, so no __pycache__ is written.
            with open(source, encoding="utf-8") as handle:
                code = compile(handle.read(), source, "exec", dont_inherit=True)
            exec(code, module.__dict__)  # noqa: S102 - running the release's hook is the point
        except BaseException as exc:  # noqa: BLE001 - a broken hook file is the hook's failure
            sys.modules.pop(module_name, None)
            raise _failed(name, f"importing {source} raised {type(exc).__name__}: {exc}", exc) from exc
        _modules[module_name] = module
    fn = getattr(module, function, None)
    if not callable(fn):
        raise _failed(name, f"{source} defines no function {function}() (got {type(fn).__name__})")
    return fn


async def call_hook(name: str, args: dict[str, Any], behavior: dict[str, Any] | None) -> Any:
    """Load and call hook ``name`` with ``args`` as keywords; return its JSON value.

    Raises ``RequestError`` (``hook_failed``) when no release is bound, when loading fails,
    when the hook raises (with its traceback) or when it returns a non-JSON value.

    >>> await call_hook("model.plan", {"session": {}}, {"revision": "r1", "path": "behavior"})  # doctest: +SKIP
    {'route': 'main'}
    """
    if behavior is None:
        raise _failed(name, "no behavior release is bound (got null)")
    fn = load_hook(name, behavior)
    try:
        result = fn(**args)
        if inspect.isawaitable(result):
            result = await result
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # noqa: BLE001 - any failure of policy code is hook_failed
        raise _failed(name, f"hook raised {type(exc).__name__}: {exc}", exc) from exc
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _failed(name, f"hook returned a value that is not JSON ({exc})") from exc
    return result
