"""Calls of klbr's API that a cell makes and never awaits are the cell's error, never a silent no-op."""

import asyncio
import inspect
import unittest
import warnings

from klbr import rpc
from klbr.awaited import api
from klbr.cells import run_cell
from klbr.discord import discord
from klbr.jobs import jobs
from klbr.llm import llm
from klbr.local import local
from klbr.workspace import open_file, run


class Host:
    """A host that answers every RPC with ``{"ok": True}`` and remembers the methods called."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    async def call(self, method: str, params: dict) -> dict:
        self.methods.append(method)
        return {"ok": True}


@api("demo.ping", "nothing was pinged")
async def ping() -> str:
    return "pong"


def namespace() -> dict:
    return {"local": local, "discord": discord, "open_file": open_file, "run": run, "jobs": jobs, "llm": llm,
            "ping": ping, "asyncio": asyncio}


class UnawaitedTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.host = Host()
        rpc.bind(self.host)  # type: ignore[arg-type]

    async def asyncTearDown(self) -> None:
        rpc.bind(None)

    async def test_local_send_without_await_is_an_error_naming_it(self) -> None:
        """`local.send("x")` without await: outcome error, "local.send was not awaited: nothing was sent"."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = await run_cell('local.send("x")\nprint("after")', namespace(), name="<cell u1>")
        self.assertEqual(result.outcome, "error")
        assert result.error is not None
        self.assertEqual(result.error["type"], "NotAwaited")
        self.assertEqual(result.error["message"], "local.send was not awaited: nothing was sent")
        self.assertEqual(
            result.error["traceback"],
            '<cell u1>, line 1: local.send was not awaited: nothing was sent; write "await local.send(...)"\n',
        )
        self.assertEqual(result.stdout, "after\n")
        self.assertEqual(self.host.methods, [], "nothing reached the host")
        self.assertEqual([str(w.message) for w in caught if w.category is RuntimeWarning], [],
                         "the coroutine was closed, not left to warn")

    async def test_each_call_is_named_with_its_own_consequence(self) -> None:
        """Several forgotten calls are each named, in order, with what did not happen."""
        code = 'discord.send("hi")\nf = open_file("a.txt")\nrun(["ls"])\njobs.start("1")\nllm("q")'
        result = await run_cell(code, namespace())
        assert result.error is not None
        self.assertEqual(result.error["message"].split("\n"), [
            "discord.send was not awaited: nothing was sent",
            "open_file was not awaited: no file was opened",
            "run was not awaited: the program did not run",
            "jobs.start was not awaited: no job was started",
            "llm was not awaited: the model was not asked",
        ])

    async def test_awaited_and_scheduled_calls_are_fine(self) -> None:
        """Awaited calls, tasks and gather are not reported; the host got each one."""
        code = ("await local.send('a')\n"
                "t = asyncio.create_task(local.send('b'))\n"
                "await asyncio.gather(ping(), discord.send('c'))\n"
                "await t\n"
                "[await ping() for _ in range(600)][-1]")
        result = await run_cell(code, namespace())
        self.assertEqual((result.outcome, result.value), ("ok", "'pong'"))
        self.assertEqual(self.host.methods, ["local.send", "local.send", "discord.send"])

    async def test_a_last_expression_coroutine_is_reported(self) -> None:
        """A forgotten call as the cell's final expression is reported too."""
        result = await run_cell("ping()", namespace())
        self.assertIsNone(result.value, "the coroutine is not shown as the cell's value")
        assert result.error is not None
        self.assertEqual(result.error["message"], "demo.ping was not awaited: nothing was pinged")

    async def test_a_raising_cell_keeps_its_error_and_lists_the_calls(self) -> None:
        """A cell that raised keeps its exception; the forgotten calls are added to its traceback."""
        result = await run_cell('local.send("x")\nraise KeyError("k")', namespace(), name="<cell u2>")
        assert result.error is not None
        self.assertEqual(result.error["type"], "KeyError")
        self.assertIn("Also, calls that were never awaited:\n<cell u2>, line 1: local.send was not awaited: "
                      "nothing was sent", result.error["traceback"])

    async def test_wait_with_a_forgotten_call_does_not_end_the_turn(self) -> None:
        """`local.send("bye")` then `wait()`: an error, and no wait."""
        ns = namespace()
        ns["wait"] = __import__("klbr.cells", fromlist=["wait"]).wait
        result = await run_cell('local.send("bye")\nwait("done")', ns)
        self.assertEqual(result.outcome, "error")
        self.assertIsNone(result.wait)

    async def test_api_functions_stay_coroutine_functions(self) -> None:
        """Marked functions are still coroutine functions to inspect and help()."""
        for function in (local.send, discord.send, open_file, run, jobs.start, llm, ping):
            self.assertTrue(inspect.iscoroutinefunction(function), function)
        self.assertEqual(str(inspect.signature(local.send)), "(text: 'str', key: 'str | None' = None) -> 'dict[str, Any]'")
        self.assertIn("Send ``text``", local.send.__doc__ or "")

    async def test_outside_a_cell_nothing_is_noted(self) -> None:
        """A coroutine made outside a cell is neither noted nor closed."""
        coro = ping()
        self.assertEqual(inspect.getcoroutinestate(coro), inspect.CORO_CREATED)
        self.assertEqual(await coro, "pong")


if __name__ == "__main__":
    unittest.main()
