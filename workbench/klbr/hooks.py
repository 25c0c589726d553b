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

A release may bind a hook to another function with a ``hooks.json`` file at its root,
``{"turn.next": "policy/turn.py:decide"}``: each key a hook name, each value a relative
``.py`` path inside the release and a function name. ``hooks.bind`` in a cell writes it.

The ``hooks`` object bound in every cell (``help(hooks)``, the class ``Hooks``) binds,
tests and traces hooks through host RPCs.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from klbr import rpc
from klbr.awaited import api_class
from klbr.cells import format_exception
from klbr.errors import RequestError

__all__ = ["BINDINGS_FILE", "HOOKS", "UNCHANGED", "HookTest", "Hooks", "call_hook", "hooks", "load_hook", "read_bindings"]

HOOKS: dict[str, tuple[str, str]] = {
    "attention.plan": ("attention.py", "plan"),
    "model.plan": ("model.py", "plan"),
    "context.prepare": ("context.py", "prepare"),
    "turn.next": ("turn.py", "next"),
}
"""Each hook name's file (in the release directory) and function name."""

BINDINGS_FILE = "hooks.json"
"""The file of a release that binds hook names to other functions."""

_TARGET = re.compile(r"^(?P<file>[A-Za-z0-9_][A-Za-z0-9_./-]*\.py):(?P<function>[A-Za-z_][A-Za-z0-9_]*)$")

_modules: dict[str, ModuleType] = {}
_bindings: dict[str, dict[str, tuple[str, str]]] = {}


def read_bindings(path: str) -> dict[str, tuple[str, str]]:
    """The ``hooks.json`` bindings of the release at ``path``: hook name -> (file, function).

    A release without the file binds nothing. Raises ``ValueError`` naming what is wrong
    with a file that is not a JSON object of known hook names and ``file.py:function``
    targets inside the release.

    >>> read_bindings("/nonexistent")
    {}
    """
    source = os.path.join(path, BINDINGS_FILE)
    if not os.path.isfile(source):
        return {}
    try:
        with open(source, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{BINDINGS_FILE} is not JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{BINDINGS_FILE} must be an object (got {type(raw).__name__})")
    bound: dict[str, tuple[str, str]] = {}
    for name, target in raw.items():
        if name not in HOOKS:
            raise ValueError(f"{BINDINGS_FILE} names an unknown hook (got {name!r}; known: {', '.join(HOOKS)})")
        # As the host reads it (runtime/behavior/_bindings.ts): the whole text, at most 256 characters.
        match = _TARGET.fullmatch(target) if isinstance(target, str) and len(target) <= 256 else None
        parts = match.group("file").split("/") if match else []
        if match is None or any(part in ("", ".", "..") or part.startswith(".") for part in parts):
            raise ValueError(f"{BINDINGS_FILE} binds {name} to a target that is not file.py:function inside the release (got {target!r})")
        bound[name] = (match.group("file"), match.group("function"))
    return bound


def _target(name: str, revision: str, path: str) -> tuple[str, str]:
    key = f"{revision}\0{os.path.realpath(path)}"
    bound = _bindings.get(key)
    if bound is None:
        try:
            bound = read_bindings(path)
        except ValueError as exc:
            raise _failed(name, str(exc)) from exc
        _bindings[key] = bound
    return bound.get(name, HOOKS[name])


def _module_name(revision: str, path: str, filename: str) -> str:
    """The module name of ``filename`` in a release: one per file, readable in tracebacks.

    The readable part maps ``a/b.py`` and ``a.b.py`` alike, so the key hashes the file too.
    """
    key = hashlib.sha256(f"{revision}\0{os.path.realpath(path)}\0{filename}".encode()).hexdigest()[:20]
    return f"klbr_behavior_{key}.{filename.removesuffix('.py').replace('/', '.')}"


def _failed(name: str, reason: str, exc: BaseException | None = None) -> RequestError:
    """``hook_failed`` for ``reason``; with ``exc``, followed by its type and (cut) message, and its traceback."""
    if exc is None:
        return RequestError("hook_failed", f"cannot run hook {name}: {reason}")
    detail = format_exception(exc)
    message = f"cannot run hook {name}: {reason} {detail['type']}: {detail['message']}"
    return RequestError("hook_failed", message, detail["traceback"])


def load_hook(name: str, behavior: dict[str, Any]) -> Any:
    """Return the hook function ``name`` from release ``behavior`` (``{revision, path}``).

    The function is the one ``hooks.json`` binds, else the default of ``HOOKS``. Raises
    ``RequestError`` (``hook_failed``) for an unknown name, a bad ``hooks.json``, a missing
    file or function, or a module that fails to import.
    """
    if name not in HOOKS:
        raise _failed(name, f"unknown hook name (got {name!r}; known: {', '.join(HOOKS)})")
    revision, path = behavior.get("revision"), behavior.get("path")
    if not isinstance(revision, str) or not isinstance(path, str):
        raise _failed(name, f"behavior needs string revision and path (got {behavior!r})")
    filename, function = _target(name, revision, path)
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
            raise _failed(name, f"importing {source} raised", exc) from exc
        _modules[module_name] = module
    fn = getattr(module, function, None)
    if not callable(fn):
        raise _failed(name, f"{source} defines no function {function}() (got {type(fn).__name__})")
    return fn


UNCHANGED = object()
"""What ``call_hook`` returns for a value equal to its ``unchanged_if``."""


async def call_hook(
    name: str, args: dict[str, Any], behavior: dict[str, Any] | None, *, unchanged_if: Any = None
) -> Any:
    """Load and call hook ``name`` with ``args`` as keywords; return its JSON value.

    With ``unchanged_if`` (a JSON value), a value equal to it returns ``UNCHANGED`` instead.
    Raises ``RequestError`` (``hook_failed``) when no release is
    bound, when loading fails, when the hook raises (with its traceback) or when it returns a
    non-JSON value.

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
        raise _failed(name, "hook raised", exc) from exc
    if unchanged_if is not None and result == unchanged_if:
        return UNCHANGED  # equal to JSON, so JSON: the caller has it already
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise _failed(name, f"hook returned a value that is not JSON ({exc})") from exc
    return result


def _draft_id(draft: Any) -> str:
    if draft is None:
        from klbr.behavior import behavior  # noqa: PLC0415 - behavior imports nothing of hooks

        draft = behavior.last_draft
        if draft is None:
            raise RuntimeError("cannot bind: no draft given and none taken in this kernel (take one with await behavior.draft())")
    draft_id = getattr(draft, "id", draft)
    if not isinstance(draft_id, str):
        raise TypeError(f"cannot use draft: pass a Draft or a draft id (got {type(draft).__name__})")
    return draft_id


def _changed(draft: Any, draft_id: str) -> None:
    """Forget the release a ``Draft`` of ``draft_id`` published: a bind changes its tree, so
    ``Draft.activate()`` publishes (and tests) it again instead of activating the old tree."""
    from klbr.behavior import behavior  # noqa: PLC0415 - behavior imports nothing of hooks

    for known in (draft, behavior.last_draft):
        if getattr(known, "id", None) == draft_id and hasattr(known, "release"):
            known.release = None


def _function_source(hook: str, function: Callable[..., Any]) -> tuple[str, str]:
    name = getattr(function, "__name__", "")
    if not inspect.isfunction(function) or name == "<lambda>":
        raise TypeError(f"cannot bind {hook}: pass a def function or 'file.py:function' (got {type(function).__name__} {name})")
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as exc:
        raise TypeError(f"cannot bind {hook}: the source of {name}() cannot be read ({exc})") from exc
    return source, name


@dataclass(frozen=True)
class HookTest:
    """What the host found when it ran one hook on one input in a throwaway worker.

    ``ok`` is true when the hook answered within its contract. ``output`` is what it
    returned, ``error`` ``{code, message, traceback}`` or ``None``, ``trace_id`` the
    durable trace of this run (``await hooks.trace(trace_id)``).
    """

    ok: bool
    hook: str
    release: str
    output: Any = None
    error: dict[str, Any] | None = None
    duration_ms: float = 0.0
    trace_id: str | None = None

    def __str__(self) -> str:
        head = f"{self.hook} on {self.release[:20]}: {'ok' if self.ok else 'FAILED'} in {self.duration_ms:.0f} ms"
        if self.error:
            return f"{head}\n  {self.error.get('message', '')}\n{self.error.get('traceback') or ''}".rstrip()
        return f"{head}\n  returned {json.dumps(self.output)[:400]}"


@api_class("hooks", bind="nothing was bound", test="nothing was tested", trace="nothing was read",
           release="nothing was read")
class Hooks:
    """Your policy hooks: bind a function to one in a draft, test one, read what ran.

    Bound in every cell as ``hooks``::

        d = await behavior.draft()
        def decide(**context):
            return {"action": "wait"}
        await hooks.bind("turn.next", decide, draft=d)     # or "policy.py:decide"
        print(await hooks.test("turn.next", {"session": {"id": "x"}}, draft=d))
        print(await hooks.test("turn.next", "tr_…", draft=d))  # a recorded input
        for t in await hooks.trace():                      # this turn's hook calls
            print(t["hook"], t["release_id"][:12], t["error"])

    A bound function is copied into the draft by its source: it sees the draft's modules,
    not your heap. Every call the runtime makes to a hook leaves a trace (hook, release,
    inputs, output, duration, error); ``hook.failed`` and frame records name them.
    """

    async def bind(self, name: str, function: Callable[..., Any] | str, *, draft: Any = None) -> str:
        """Declare which function serves hook ``name`` in ``draft`` (default: the last one taken).

        ``function`` is ``"file.py:function"`` inside the draft, or a ``def`` function whose
        source is copied into ``bound/<hook>.py``. Returns the binding, e.g.
        ``"bound/turn_next.py:decide"``. Test the draft afterwards: a binding is checked
        when the hook is loaded, not here.
        """
        if name not in HOOKS:
            raise ValueError(f"cannot bind: unknown hook name (got {name!r}; known: {', '.join(HOOKS)})")
        draft_id = _draft_id(draft)
        _changed(draft, draft_id)
        if isinstance(function, str):
            target = function
        else:
            source, function_name = _function_source(name, function)
            path = f"bound/{name.replace('.', '_')}.py"
            await rpc.call("behavior.write", {"draft_id": draft_id, "path": path, "text": source})
            target = f"{path}:{function_name}"
        params = {"draft_id": draft_id, "hook": name, "target": target}
        result = await rpc.call_object("hooks.bind", params, action="bind")
        return str(result["target"])

    async def test(self, name: str, fixture: Any = None, *, draft: Any = None, release: str | None = None) -> HookTest:
        """Run hook ``name`` once on ``fixture`` in a throwaway worker; nothing is changed.

        ``fixture`` is the arguments (a dict), a trace id or trace whose recorded inputs are
        replayed, or ``None`` for the host's standard fixture. The hook comes from ``draft``,
        else ``release``, else the release this cell's turn is pinned to.
        """
        params: dict[str, Any] = {"hook": name}
        if isinstance(fixture, dict) and isinstance(fixture.get("id"), str) and "inputs" in fixture:
            params["trace_id"] = fixture["id"]
        elif isinstance(fixture, str):
            params["trace_id"] = fixture
        elif isinstance(fixture, dict):
            params["args"] = fixture
        elif fixture is not None:
            raise TypeError(f"cannot test {name}: fixture must be a dict, a trace or a trace id (got {type(fixture).__name__})")
        if draft is not None:
            params["draft_id"] = _draft_id(draft)
        if release is not None:
            params["release_id"] = release
        result = await rpc.call_object("hooks.test", params, action="test hook")
        return HookTest(
            ok=bool(result.get("ok")), hook=str(result.get("hook")), release=str(result.get("release_id")),
            output=result.get("output"), error=result.get("error"),
            duration_ms=float(result.get("duration_ms") or 0), trace_id=result.get("trace_id"),
        )

    async def trace(self, target: Any = None) -> Any:
        """Invocation traces: a frame id gives a list (its turn's hook calls, oldest first),
        a trace id gives one trace, ``None`` gives this turn's. Each trace is a dict with
        ``id, hook, release_id, frame_id, origin, inputs, output, error, duration_ms, at``;
        inputs or output over the size bound read ``{"truncated": True, "bytes": n, "head": …}``.
        """
        if target is not None and not isinstance(target, str):
            target = getattr(target, "id", target)
        result = await rpc.call_object("hooks.trace", {"target": target}, action="read traces")
        return result["traces"] if "traces" in result else result["trace"]

    async def release(self) -> dict[str, Any]:
        """The release this cell's hooks are pinned to: ``{release_id, frame_id}``.

        A turn keeps the release its frame recorded until it ends; an activation during the
        turn applies from the next frame.
        """
        return await rpc.call_object("hooks.release", {}, action="read the pinned release")

    def __repr__(self) -> str:
        return "<hooks: await hooks.bind(name, fn, draft=d), .test(name, fixture), .trace(frame), .release()>"


hooks = Hooks()
"""The one ``Hooks`` object the prelude binds."""
