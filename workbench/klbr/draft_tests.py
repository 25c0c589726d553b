"""Tests staged in a behaviour draft: the host runs them on ``d.test()`` and before ``publish()``.

A draft's tests are the files ``tests/test_*.py`` directly in the draft, run in name order. In
each file every top-level function whose name starts with ``test_`` (defined in that file) is
one test, called with no arguments; it may be plain or ``async``. A test passes when it
returns and fails when it raises: ``assert`` is the usual way. A file that fails to import
fails as a whole. A failing test blocks publication like a failing hook, with its error,
traceback and output in the diagnostics.

In a test file:

- ``hook(name)`` is bound: the function the draft serves hook ``name`` with, exactly as the
  host loads it (``hooks.json`` respected), e.g. ``hook("turn.next")(sent=1)``.
- The draft's own files import by name: the draft and its ``tests/`` directory are on
  ``sys.path`` while the tests run (``import turn``; a helper ``tests/cases.py`` as
  ``import cases``).
- Only the standard library is there. The tests run in the host's throwaway test worker,
  confined like a hook: the draft is read-only, there is no network, and no host RPC
  (``local.send``, ``run``, ...) can be called.

Bounds: each test may run ``timeout`` seconds (the host sets 10) and the whole run 60 seconds;
at most ``max_tests`` tests run (the host sets 56: a draft with more fails, naming the ones not
run); each test's output is kept up to 4 KiB per stream. The tests share one process, after the
host's fixture calls of every hook.

A file ``tests/test_turn.py``::

    def test_waits_by_default():
        assert hook("turn.next")() == {"action": "wait"}

    async def test_reminds_once():
        reply = hook("turn.next")(consumed_local=True, replied_with_text=True)
        assert reply["action"] == "continue", reply
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import time
from types import ModuleType
from typing import Any, Callable

from klbr.capture import CellOutput, current_output
from klbr.cells import format_exception
from klbr.hooks import load_hook

__all__ = ["OUTPUT_CAP", "hook", "run_tests"]

OUTPUT_CAP = 4096
"""The bytes of each stream one test's output keeps."""

_current: dict[str, Any] | None = None


def hook(name: str) -> Callable[..., Any]:
    """The function the draft under test serves hook ``name`` with (bound in every test file).

    Raises ``klbr.errors.RequestError`` (``hook_failed``) when the hook cannot be loaded, and
    ``RuntimeError`` outside a test run.
    """
    if _current is None:
        raise RuntimeError(f"cannot load hook {name}: no draft's tests are running")
    return load_hook(name, _current)


async def run_tests(behavior: dict[str, Any], *, timeout: float, max_tests: int) -> dict[str, Any]:
    """Run the ``tests/test_*.py`` of the tree ``behavior`` (``{revision, path}``).

    Returns ``{"tests": [...]}``, one ``{name, ok, duration_ms, output, error}`` per test
    function, named ``tests/<file>::<function>``, and one per file that failed to import,
    named ``tests/<file>``. ``error`` is ``{type, message, traceback}`` or ``None``. A tree
    without ``tests/`` has no tests. ``sys.path``, ``sys.modules`` and bytecode writing are
    restored afterwards.
    """
    global _current
    root = behavior["path"]
    tests_dir = os.path.join(root, "tests")
    files = sorted(
        name for name in (os.listdir(tests_dir) if os.path.isdir(tests_dir) else [])
        if name.startswith("test_") and name.endswith(".py") and os.path.isfile(os.path.join(tests_dir, name))
    )
    results: list[dict[str, Any]] = []
    saved = (list(sys.path), set(sys.modules), sys.dont_write_bytecode)
    # The tree is what gets published: nothing may be written into it, not even __pycache__.
    sys.dont_write_bytecode = True
    sys.path[:0] = [tests_dir, root]
    _current = behavior
    skipped: list[str] = []
    try:
        for filename in files:
            rel = f"tests/{filename}"
            if len(results) >= max_tests:
                skipped.append(rel)
                continue
            loaded = _load(os.path.join(tests_dir, filename), len(results))
            if isinstance(loaded, dict):
                results.append({"name": rel, **loaded})
                continue
            for function_name, function in _test_functions(loaded):
                name = f"{rel}::{function_name}"
                if len(results) >= max_tests:
                    skipped.append(name)
                    continue
                results.append({"name": name, **await _run_one(function, timeout)})
    finally:
        _current = None
        sys.path[:] = saved[0]
        for module in set(sys.modules) - saved[1]:
            del sys.modules[module]
        sys.dont_write_bytecode = saved[2]
    if skipped:
        results.append(_not_run(skipped, max_tests))
    return {"tests": results}


def _load(path: str, n: int) -> ModuleType | dict[str, Any]:
    """Import one test file with ``hook`` bound; a failure is that file's result."""
    module = ModuleType(f"klbr_draft_test_{n}_{os.path.basename(path)[:-3]}")
    module.__file__ = path
    module.__dict__["hook"] = hook
    sys.modules[module.__name__] = module
    output = CellOutput(cap=OUTPUT_CAP)
    token = current_output.set(output)
    started = time.monotonic()
    try:
        with open(path, encoding="utf-8") as handle:
            exec(compile(handle.read(), path, "exec", dont_inherit=True), module.__dict__)  # noqa: S102 - the draft's own test
        return module
    except BaseException as exc:  # noqa: BLE001 - a broken test file is that file's failure
        return _result(started, output, format_exception(exc))
    finally:
        current_output.reset(token)
        output.close()


def _test_functions(module: ModuleType) -> list[tuple[str, Callable[..., Any]]]:
    return [
        (name, value)
        for name, value in module.__dict__.items()
        if name.startswith("test_") and inspect.isfunction(value) and value.__module__ == module.__name__
    ]


async def _run_one(function: Callable[..., Any], timeout: float) -> dict[str, Any]:
    """Call one test with its own output capture; a plain one runs in a thread, so a timeout holds."""
    output = CellOutput(cap=OUTPUT_CAP)
    token = current_output.set(output)
    started = time.monotonic()
    error: dict[str, str] | None = None
    try:
        if inspect.iscoroutinefunction(function):
            await asyncio.wait_for(function(), timeout)
        else:
            value = await asyncio.wait_for(asyncio.to_thread(function), timeout)
            if inspect.isawaitable(value):
                await asyncio.wait_for(value, timeout)
    except asyncio.TimeoutError:
        error = {"type": "TimeoutError", "message": f"the test ran longer than {timeout:g} s", "traceback": ""}
    except BaseException as exc:  # noqa: BLE001 - anything a test raises is its failure
        if isinstance(exc, asyncio.CancelledError) and asyncio.current_task().cancelling():  # type: ignore[union-attr]
            raise
        error = format_exception(exc)
    finally:
        current_output.reset(token)
        output.close()
    return _result(started, output, error)


def _result(started: float, output: CellOutput, error: dict[str, str] | None) -> dict[str, Any]:
    return {
        "ok": error is None,
        "duration_ms": round((time.monotonic() - started) * 1000, 3),
        "output": output.text("stdout") + output.text("stderr"),
        "error": error,
    }


def _not_run(skipped: list[str], max_tests: int) -> dict[str, Any]:
    """One failing result for every test past ``max_tests``: a draft's tests all run, or it fails."""
    shown = ", ".join(skipped[:5]) + (", ..." if len(skipped) > 5 else "")
    message = f"a draft runs at most {max_tests} tests; {len(skipped)} more were not run ({shown})"
    error = {"type": "NotRun", "message": message, "traceback": ""}
    return {"name": "tests", "ok": False, "duration_ms": 0, "output": "", "error": error}
