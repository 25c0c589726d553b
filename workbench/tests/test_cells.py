"""Tests of ``klbr.cells.run_cell``: the work behind ``execute``, without frames."""

import asyncio
import io
import sys
import unittest
from unittest import mock

from klbr.cells import CellResult, WaitRequested, run_cell, wait
from klbr.frames import encoded_size


class RunCellTest(unittest.IsolatedAsyncioTestCase):
    async def test_returns_repr_of_final_expression(self) -> None:
        """`run_cell()` returns the repr of a final expression, like a REPL."""
        result = await run_cell("x = 'a'\nx * 2", {})
        self.assertEqual(result.outcome, "ok")
        self.assertEqual(result.value, "'aa'")

    async def test_final_none_gives_no_value(self) -> None:
        """`run_cell()` gives value None when the final expression is None or a statement."""
        self.assertIsNone((await run_cell("None", {})).value)
        self.assertIsNone((await run_cell("y = 3", {})).value)

    async def test_namespace_persists(self) -> None:
        """`run_cell()` keeps names between cells of one namespace, and binds `_`."""
        ns: dict = {}
        await run_cell("def f(n):\n    return n + 1\ncounter = 41", ns)
        result = await run_cell("f(counter)", ns)
        self.assertEqual(result.value, "42")
        self.assertEqual((await run_cell("_ * 2", ns)).value, "84")

    async def test_top_level_await(self) -> None:
        """`run_cell()` runs top-level await, in statements and in the final expression."""
        ns: dict = {}
        result = await run_cell("import asyncio\nv = await asyncio.sleep(0, result=5)\nawait asyncio.sleep(0, result=v * 2)", ns)
        self.assertEqual((result.outcome, result.value), ("ok", "10"))
        comp = await run_cell("[await asyncio.sleep(0, result=i) for i in range(3)]", ns)
        self.assertEqual(comp.value, "[0, 1, 2]")

    async def test_exception_gives_error_with_trimmed_traceback(self) -> None:
        """`run_cell()` reports an exception as outcome error with a traceback of cell frames only."""
        result = await run_cell("def g():\n    raise KeyError('missing')\n\ng()", {}, name="<cell c9>")
        self.assertEqual(result.outcome, "error")
        assert result.error is not None
        self.assertEqual(result.error["type"], "KeyError")
        self.assertEqual(result.error["message"], "'missing'")
        trace = result.error["traceback"]
        self.assertIn('File "<cell c9>", line 4, in <module>', trace)
        self.assertIn("raise KeyError('missing')", trace)
        self.assertNotIn("cells.py", trace)

    async def test_traceback_shows_the_line_python_ran(self) -> None:
        """`run_cell()`'s traceback quotes the failing line even after a form feed or U+2028 in
        the code, which Python does not count as line breaks."""
        code = "note = 'a\u2028b\x0cc'\nraise ValueError(note)"
        result = await run_cell(code, {}, name="<cell c8>")
        assert result.error is not None
        trace = result.error["traceback"]
        self.assertIn('File "<cell c8>", line 2, in <module>', trace)
        self.assertIn("raise ValueError(note)", trace)

    async def test_syntax_error_has_no_klbr_frames(self) -> None:
        """`run_cell()` reports a syntax error with the cell's line and no klbr frames."""
        result = await run_cell("x = (1 +", {}, name="<cell s1>")
        assert result.error is not None
        self.assertEqual(result.error["type"], "SyntaxError")
        self.assertIn("<cell s1>", result.error["traceback"])
        self.assertNotIn("klbr", result.error["traceback"])

    async def test_system_exit_does_not_escape(self) -> None:
        """`run_cell()` turns SystemExit and KeyboardInterrupt into outcome error."""
        for code, kind in (("raise SystemExit(3)", "SystemExit"), ("raise KeyboardInterrupt", "KeyboardInterrupt")):
            result = await run_cell(code, {})
            self.assertEqual(result.outcome, "error")
            assert result.error is not None
            self.assertEqual(result.error["type"], kind)

    async def test_output_is_captured_per_cell(self) -> None:
        """`run_cell()` captures print output per cell, and nothing leaks into the next cell."""
        ns: dict = {}
        first = await run_cell("import sys\nprint('one')\nprint('err', file=sys.stderr)", ns)
        second = await run_cell("print('two')", ns)
        self.assertEqual((first.stdout, first.stderr), ("one\n", "err\n"))
        self.assertEqual((second.stdout, second.stderr), ("two\n", ""))

    async def test_output_of_a_leftover_task_does_not_join_a_later_cell(self) -> None:
        """`run_cell()` sends output of a task an earlier cell left running to the original stream."""
        ns: dict = {}
        await run_cell("import asyncio\ngate = asyncio.Event()\nasync def late():\n    await gate.wait()\n    print('late')\nt = asyncio.create_task(late())", ns)
        original = io.StringIO()
        with mock.patch.object(sys.stdout, "_fallback", original):
            result = await run_cell("gate.set()\nawait t\nprint('mine')", ns)
        self.assertEqual(result.stdout, "mine\n")
        self.assertEqual(original.getvalue(), "late\n")

    async def test_output_is_capped_with_marker(self) -> None:
        """`run_cell()` caps each stream and says how many bytes it dropped."""
        result = await run_cell("print('x' * 100, end='')", {}, output_cap=10)
        self.assertTrue(result.stdout.startswith("x" * 10))
        self.assertIn("output truncated, 90 more bytes not kept", result.stdout)

    async def test_output_cap_counts_control_characters_as_the_frame_does(self) -> None:
        """`run_cell()` caps a stream in the bytes it takes in a frame: a control character is 6."""
        result = await run_cell("print('\\x00' * 100, end='')", {}, output_cap=60)
        self.assertTrue(result.stdout.startswith("\x00" * 10 + "\n[klbr"))
        self.assertIn("output truncated, 90 more bytes not kept", result.stdout)

    async def test_value_cap_counts_control_characters_as_the_frame_does(self) -> None:
        """`run_cell()` cuts a repr of control characters to 1 MiB as the frame carries it."""
        code = "class R:\n    def __repr__(self): return '\\x01' * 1_000_000\nR()"
        result = await run_cell(code, {})
        self.assertIsNotNone(result.value)
        kept = result.value.split("...")[0]
        self.assertEqual(kept, "\x01" * (1024 * 1024 // 6))
        self.assertTrue(result.value.endswith(f"[klbr: repr truncated, {1_000_000 - len(kept)} more characters]"))

    async def test_error_cap_keeps_the_start_of_the_message_and_the_end_of_the_traceback(self) -> None:
        """`run_cell()` cuts an error's message to its start and its traceback to its end (the
        failing line), each saying what it cut, in the bytes they take in a frame."""
        code = (
            "error = None\n"
            "for step in range(200):\n"
            "    try:\n"
            "        raise ValueError(f'step {step} ' + 'z' * 1000) from error\n"
            "    except ValueError as caught:\n"
            "        error = caught\n"
            "raise KeyError('\\x00' * 100_000) from error"
        )
        result = await run_cell(code, {})
        self.assertEqual((result.outcome, result.error["type"]), ("error", "KeyError"))
        message, trace = result.error["message"], result.error["traceback"]
        self.assertTrue(message.startswith("'" + "\\x00" * 1000))  # str() of a KeyError is its repr
        self.assertRegex(message, r"\.\.\. \[klbr: message truncated, \d+ more characters\]$")
        self.assertLessEqual(encoded_size(message), 16 * 1024 + 100)
        self.assertRegex(trace, r"^\[klbr: traceback truncated, \d+ earlier characters not kept\]\n")
        self.assertIn("ValueError: step 199 zzz", trace)
        self.assertIn("raise KeyError('\\x00' * 100_000) from error\nKeyError: '\\x00", trace)
        self.assertLessEqual(encoded_size(trace), 64 * 1024 + 100)

    async def test_live_batches_arrive_before_return(self) -> None:
        """`run_cell()` hands every live batch to the sink before it returns, in order."""
        batches: list[tuple[str, str]] = []
        code = "import asyncio, sys\nprint('a')\nawait asyncio.sleep(0)\nprint('b', file=sys.stderr)\nprint('c')"
        result = await run_cell(code, {}, sink=lambda name, text: batches.append((name, text)))
        joined = {name: "".join(t for n, t in batches if n == name) for name in ("stdout", "stderr")}
        self.assertEqual(joined, {"stdout": "a\nc\n", "stderr": "b\n"})
        self.assertEqual(result.stdout, "a\nc\n")

    async def test_wait_ends_the_cell(self) -> None:
        """`run_cell()` ends a cell at wait() with outcome ok and the reason, running nothing after it."""
        ns = {"wait": wait}
        result = await run_cell("print('before')\nwait('need input')\nprint('after')", ns)
        self.assertEqual(result.outcome, "ok")
        self.assertEqual(result.wait, {"reason": "need input"})
        self.assertEqual(result.stdout, "before\n")

    async def test_wait_is_not_swallowed_by_except_exception(self) -> None:
        """`wait()` raises a BaseException that `except Exception` in a cell does not catch."""
        result = await run_cell("try:\n    wait()\nexcept Exception:\n    print('swallowed')", {"wait": wait})
        self.assertEqual((result.wait, result.stdout), ({"reason": ""}, ""))
        self.assertTrue(issubclass(WaitRequested, BaseException) and not issubclass(WaitRequested, Exception))

    async def test_wait_refuses_non_string_reason(self) -> None:
        """`wait()` refuses a reason that is not a string, as an error of the cell."""
        result = await run_cell("wait(5)", {"wait": wait})
        assert result.error is not None
        self.assertEqual(result.error["type"], "TypeError")
        self.assertEqual(result.error["message"], "cannot wait: reason must be a string (got int)")

    async def test_cancelled_task_gives_cancelled(self) -> None:
        """`run_cell()` returns outcome cancelled when its task is cancelled mid-await."""
        ns: dict = {"started": asyncio.Event()}
        task = asyncio.create_task(run_cell("started.set()\nawait asyncio.Event().wait()", {**ns, "asyncio": asyncio}))
        await ns["started"].wait()
        task.cancel()
        result = await task
        self.assertIsInstance(result, CellResult)
        self.assertEqual(result.outcome, "cancelled")

    async def test_cancelled_cell_closes_the_calls_it_never_awaited(self) -> None:
        """`run_cell()` cancelled mid-await closes a klbr call it made and never awaited, silently."""
        from klbr.local import local

        ns: dict = {"started": asyncio.Event(), "asyncio": asyncio, "local": local}
        task = asyncio.create_task(run_cell("pending = local.send('hi')\nstarted.set()\nawait asyncio.Event().wait()", ns))
        await ns["started"].wait()
        task.cancel()
        self.assertEqual((await task).outcome, "cancelled")
        self.assertIsNone(ns["pending"].cr_frame, "the never-awaited call is closed")

    async def test_repr_failure_is_an_error(self) -> None:
        """`run_cell()` reports a final value whose repr raises as outcome error."""
        code = "class Bad:\n    def __repr__(self):\n        raise RuntimeError('no repr')\nBad()"
        result = await run_cell(code, {})
        assert result.error is not None
        self.assertEqual((result.outcome, result.error["message"]), ("error", "no repr"))

    async def test_exception_whose_str_raises_is_the_cells_error(self) -> None:
        """`run_cell()` reports an exception whose `__str__` raises as the cell's error, its message
        naming the str() failure and its traceback ending as Python's own does."""
        code = "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('broken')\nraise E()"
        result = await run_cell(code, {}, name="<cell b1>")
        self.assertEqual(result.outcome, "error")
        assert result.error is not None
        self.assertEqual(result.error["type"], "E")
        self.assertEqual(result.error["message"], "<exception str() failed: RuntimeError: broken>")
        self.assertIn('File "<cell b1>", line 4, in <module>', result.error["traceback"])
        self.assertTrue(result.error["traceback"].endswith("raise E()\nE: <exception str() failed>\n"))

    async def test_final_value_whose_repr_raises_an_exception_whose_str_raises_is_an_error(self) -> None:
        """`run_cell()` reports a final value whose repr raises an exception with a broken `__str__`
        as outcome error, without a value."""
        code = (
            "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('broken')\n"
            "class Bad:\n    def __repr__(self):\n        raise E()\nBad()"
        )
        result = await run_cell(code, {})
        assert result.error is not None
        self.assertEqual((result.outcome, result.value, result.error["type"]), ("error", None, "E"))
        self.assertEqual(result.error["message"], "<exception str() failed: RuntimeError: broken>")

    async def test_exception_whose_str_raises_itself_is_the_cells_error(self) -> None:
        """`run_cell()` reports an exception whose `__str__` raises that same exception, or returns no
        string, as the cell's error."""
        for body, failure in (("raise self", "E"), ("return 5", "TypeError: __str__ returned non-string (type int)")):
            code = f"class E(Exception):\n    def __str__(self):\n        {body}\nraise E()"
            result = await run_cell(code, {})
            assert result.error is not None
            self.assertEqual((result.outcome, result.error["type"]), ("error", "E"))
            self.assertEqual(result.error["message"], f"<exception str() failed: {failure}>")

    async def test_outside_a_cell_writes_go_to_the_original_stream(self) -> None:
        """`run_cell()` leaves writes made outside any cell to the stream that was there before."""
        await run_cell("1", {})
        original = io.StringIO()
        with mock.patch.object(sys.stdout, "_fallback", original):
            print("outside")
        self.assertEqual(original.getvalue(), "outside\n")

    async def test_thread_started_by_cell_writes_to_original_stream(self) -> None:
        """`run_cell()` does not capture a plain thread's output (it has no cell context)."""
        original = io.StringIO()
        with mock.patch.object(sys.stdout, "_fallback", original):
            result = await run_cell("import threading\nt = threading.Thread(target=print, args=('thread',))\nt.start()\nt.join()", {})
        self.assertEqual((result.stdout, original.getvalue()), ("", "thread\n"))

    async def test_to_thread_output_is_captured(self) -> None:
        """`run_cell()` captures output of `asyncio.to_thread` work, which runs in the cell's context."""
        result = await run_cell("import asyncio\nawait asyncio.to_thread(print, 'worker')", {})
        self.assertEqual(result.stdout, "worker\n")


if __name__ == "__main__":
    unittest.main()
