"""Tests of the kernel dispatcher, fed plain dicts: one reply per request, always."""

import asyncio
import os
import tempfile
import unittest
from collections import Counter
from unittest import mock

from klbr import kernel as kernel_module
from tests.support import KernelCase, until


class DispatchTest(KernelCase):
    async def test_unknown_kind_gets_error_naming_it(self) -> None:
        """`dispatch()` answers an unknown kind with unknown_kind naming the kind."""
        reply = await self.call({"kind": "reboot", "id": "r1"})
        self.assertEqual(reply["code"], "unknown_kind")
        self.assertTrue(reply["message"].startswith("cannot handle request r1: unknown kind 'reboot'"))
        self.assertEqual(len(self.wire.frames), 1)

    async def test_missing_kind_is_invalid_request(self) -> None:
        """`dispatch()` answers a frame without a string kind with invalid_request."""
        reply = await self.call({"id": "r1", "kind": 7})
        self.assertEqual(reply, {"kind": "error", "id": "r1", "code": "invalid_request",
                                 "message": "cannot handle request r1: kind must be a string (got 7)"})

    async def test_non_string_id_is_answered_with_empty_id(self) -> None:
        """`dispatch()` answers a request whose id is not a string with id "" (there is no other)."""
        await self.kernel.dispatch({"kind": "ping", "id": 5})
        self.assertEqual(self.wire.frames[0]["id"], "")
        self.assertEqual(self.wire.frames[0]["code"], "invalid_request")

    async def test_host_only_kind_from_worker_side_is_unknown(self) -> None:
        """`dispatch()` refuses worker kinds sent to it (`stream`, `rpc`) as unknown."""
        for kind in ("stream", "rpc", "ok"):
            reply = await self.call({"kind": kind, "id": f"x-{kind}"})
            self.assertEqual(reply["code"], "unknown_kind")

    async def test_execute_before_init_is_refused(self) -> None:
        """`handle_execute()` refuses a cell before init."""
        reply = await self.call({"kind": "execute", "id": "e1", "cell": "c1", "code": "1"})
        self.assertEqual(reply["message"], "cannot execute cell c1: the workbench is not initialised (got no init)")

    async def test_execute_fields_are_validated(self) -> None:
        """`handle_execute()` refuses a missing or non-string code or cell with invalid_request."""
        await self.init()
        missing = await self.call({"kind": "execute", "id": "e1", "cell": "c1"})
        wrong = await self.call({"kind": "execute", "id": "e2", "cell": 3, "code": "1"})
        self.assertEqual(missing["message"], "cannot execute cell: code must be str (got nothing)")
        self.assertEqual(wrong["message"], "cannot execute cell: cell must be str (got int 3)")

    async def test_cancel_and_hook_fields_are_validated(self) -> None:
        """`handle_cancel()` and `handle_hook()` refuse malformed fields with invalid_request."""
        replies = [
            await self.call({"kind": "cancel", "id": "c1"}),
            await self.call({"kind": "hook", "id": "h1", "name": "turn.next"}),
            await self.call({"kind": "hook", "id": "h2", "name": "turn.next", "args": {}, "behavior": {"path": 1}}),
        ]
        self.assertEqual([r["code"] for r in replies], ["invalid_request"] * 3)
        self.assertEqual(replies[1]["message"], "cannot run hook turn.next: args must be dict (got nothing)")

    async def test_handler_exception_gets_internal_and_loop_goes_on(self) -> None:
        """`dispatch()` answers a handler that raised with internal and a traceback, then keeps serving."""
        async def broken(kernel, frame):  # noqa: ANN001
            raise ZeroDivisionError("boom")

        with mock.patch.dict(kernel_module.HANDLERS, {"ping": broken}):
            reply = await self.call({"kind": "ping", "id": "p1"})
        self.assertEqual((reply["code"], reply["message"]), ("internal", "cannot handle ping: ZeroDivisionError: boom"))
        self.assertIn("ZeroDivisionError: boom", reply["traceback"])
        self.assertEqual(await self.call({"kind": "ping", "id": "p2"}), {"kind": "ok", "id": "p2", "result": {}})

    async def test_run_cell_fault_gets_internal_and_next_cell_runs(self) -> None:
        """`handle_execute()` answers a fault of the cell machinery with internal; the queue goes on."""
        await self.init()

        async def faulty(*args, **kwargs):  # noqa: ANN002, ANN003
            raise RuntimeError("machinery")

        with mock.patch.object(kernel_module, "run_cell", faulty):
            broken = await self.call({"kind": "execute", "id": "e1", "cell": "c1", "code": "1"})
        fine = await self.call({"kind": "execute", "id": "e2", "cell": "c2", "code": "1 + 1"})
        self.assertEqual(broken["code"], "internal")
        self.assertEqual(fine["result"]["value"], "2")

    async def test_exactly_one_reply_per_id(self) -> None:
        """`dispatch()` writes exactly one ok/error for every request id, failing or not."""
        await self.init()
        frames = [
            {"kind": "execute", "id": "a", "cell": "c1", "code": "print('x')\n1/0"},
            {"kind": "execute", "id": "b", "cell": "c2", "code": "wait('w')"},
            {"kind": "nope", "id": "c"},
            {"kind": "ping", "id": "d"},
            {"kind": "cancel", "id": "e", "target": "zzz"},
            {"kind": "execute", "id": "f", "cell": 1},
            {"kind": "hook", "id": "g", "name": "model.plan", "args": {}},
            {"kind": "init", "id": "h", "generation": 2, "session": "s", "workspace": self.root, "skills": {}},
        ]
        for frame in frames:
            self.send(frame)
        await self.kernel.idle()
        counts = Counter(f["id"] for f in self.wire.frames if f["kind"] in ("ok", "error"))
        self.assertEqual(counts, Counter({i: 1 for i in "abcdefgh"} | {"t1": 1}))
        self.assertEqual(self.wire.reply("a")["result"]["outcome"], "error")
        self.assertEqual(self.wire.reply("g")["code"], "hook_failed")
        self.assertEqual(self.wire.reply("h")["code"], "invalid_request")

    async def test_stream_frames_carry_the_execute_id_and_precede_the_reply(self) -> None:
        """`handle_execute()` sends live output tagged with its id, all before the final reply."""
        await self.init()
        code = "import asyncio\nprint('one')\nawait asyncio.sleep(0)\nprint('two')"
        await self.call({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        kinds = [(f["kind"], f["id"]) for f in self.wire.frames[1:]]
        self.assertEqual(kinds[-1], ("ok", "e1"))
        self.assertTrue(all(k == ("stream", "e1") for k in kinds[:-1]))
        self.assertEqual("".join(f["text"] for f in self.wire.of_kind("stream")), "one\ntwo\n")

    async def test_oversize_reply_becomes_internal_error(self) -> None:
        """`dispatch()` answers internal when the ok reply would be over the frame limit."""
        self.kernel = kernel_module.Kernel(self.wire.write, max_frame_bytes=4096)
        self.wire.max_frame_bytes = 4096
        await self.init()
        reply = await self.call({"kind": "execute", "id": "e1", "cell": "c1", "code": "'x' * 10000"})
        self.assertEqual(reply["code"], "internal")
        self.assertIn("cannot reply to request e1", reply["message"])

    async def test_oversize_error_reply_says_its_message_was_cut(self) -> None:
        """`dispatch()` answers an error whose message and traceback are over the frame limit with one
        reply whose message is cut to fit and says so, instead of no reply (or a silent cut)."""
        release = self.enterContext(tempfile.TemporaryDirectory())
        with open(os.path.join(release, "turn.py"), "w") as f:
            f.write("def next(**kw):\n    raise ValueError('y' * 20_000)\n")
        # 4 KiB: even the old fallback (the message's first 4096 characters) was over the limit, so
        # there was no reply; 16 KiB: the fallback fitted, but the message was cut silently.
        for limit in (4096, 16 * 1024):
            await self.kernel.close()
            self.kernel = kernel_module.Kernel(self.wire.write, max_frame_bytes=limit)
            self.wire.max_frame_bytes = limit
            await self.init(behavior={"revision": "long", "path": release})
            reply = await self.call({"kind": "hook", "id": f"h{limit}", "name": "turn.next", "args": {}})
            self.assertEqual((reply["kind"], reply["code"]), ("error", "hook_failed"))
            self.assertTrue(reply["message"].startswith("cannot run hook turn.next: hook raised ValueError: yyy"))
            self.assertRegex(reply["message"], r"y\.\.\. \[klbr: message truncated, \d+ more characters\]$")
            self.assertNotIn("traceback", reply)

    async def test_control_character_output_keeps_the_cell_outcome_within_the_frame(self) -> None:
        """`handle_execute()` cuts output of control characters (6 bytes each in JSON) to fit the
        frame and keeps the cell's outcome, instead of replacing the reply with internal."""
        await self.init()
        code = (
            "import sys\n"
            "class R:\n"
            "    def __repr__(self): return '\\x00' * 3_000_000\n"
            "print('\\x00' * 3_000_000)\n"
            "print('\\x01' * 3_000_000, file=sys.stderr)\n"
            "R()"
        )
        reply = await self.call({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        self.assertEqual(reply["kind"], "ok", reply.get("message"))
        result = reply["result"]
        self.assertEqual(result["outcome"], "ok")
        self.assertTrue(result["stdout"].startswith("\x00" * 1000))
        self.assertRegex(result["stdout"], r"\[klbr: output truncated, \d+ more bytes not kept\]\n$")
        self.assertTrue(result["stderr"].startswith("\x01" * 1000))
        self.assertRegex(result["stderr"], r"\[klbr: output truncated, \d+ more bytes not kept\]\n$")
        self.assertRegex(result["value"], r"\[klbr: repr truncated, \d+ more characters\]$")

    async def test_huge_exception_message_keeps_the_cell_outcome_within_the_frame(self) -> None:
        """`handle_execute()` cuts a raised exception's huge message and traceback to fit the frame
        and keeps the cell's outcome error, instead of replacing the reply with internal."""
        await self.init()
        for n, (spelled, char, count) in enumerate((("\\x00", "\x00", 2_000_000), ("x", "x", 9_000_000))):
            code = f"raise ValueError('{spelled}' * {count})"
            reply = await self.call({"kind": "execute", "id": f"e{n}", "cell": f"c{n}", "code": code})
            self.assertEqual(reply["kind"], "ok", reply.get("message"))
            result = reply["result"]
            self.assertEqual((result["outcome"], result["error"]["type"]), ("error", "ValueError"))
            message, trace = result["error"]["message"], result["error"]["traceback"]
            self.assertTrue(message.startswith(char * 1000))
            self.assertRegex(message, r"\.\.\. \[klbr: message truncated, \d+ more characters\]$")
            self.assertIn(f"    {code}\nValueError: ", trace)  # the failing line, then the cut message
            self.assertRegex(trace, r"\[klbr: message truncated, \d+ more characters\]\n$")

    async def test_exception_whose_str_raises_keeps_the_cell_outcome(self) -> None:
        """`handle_execute()` answers a cell that raised an exception whose `__str__` raises with
        outcome error and the exception's type, instead of internal (or, when `__str__` raises the
        exception itself, no reply at all)."""
        await self.init()
        for n, (body, failure) in enumerate((("raise RuntimeError('broken')", "RuntimeError: broken"), ("raise self", "E"))):
            code = f"class E(Exception):\n    def __str__(self):\n        {body}\nraise E()"
            reply = await self.call({"kind": "execute", "id": f"e{n}", "cell": f"c{n}", "code": code})
            self.assertEqual(reply["kind"], "ok", reply.get("message"))
            error = reply["result"]["error"]
            self.assertEqual((reply["result"]["outcome"], error["type"]), ("error", "E"))
            self.assertEqual(error["message"], f"<exception str() failed: {failure}>")
            self.assertTrue(error["traceback"].endswith("    raise E()\nE: <exception str() failed>\n"))

    async def test_shutdown_replies_then_stops_with_zero(self) -> None:
        """`handle_shutdown()` replies {} and then asks the loop to stop with status 0."""
        stops: list[int] = []
        self.kernel.on_stop = stops.append
        reply = await self.call({"kind": "shutdown", "id": "s1"})
        await until(lambda: stops == [0], "stop requested")
        self.assertEqual(reply["result"], {})


class InitTest(KernelCase):
    async def test_init_replies_pid_python_and_prelude(self) -> None:
        """`handle_init()` replies {pid, python, prelude, fingerprint} with every prelude name."""
        result = (await self.init())["result"]
        self.assertIsInstance(result["pid"], int)
        self.assertRegex(result["python"], r"^3\.\d+\.\d+")
        self.assertEqual(
            result["prelude"],
            ["agent", "behavior", "code", "delete", "discord", "display", "history", "hooks", "ignore", "jobs", "llm", "local", "ls",
             "open_file", "read_artifact", "run", "search", "skills", "timers", "wait", "workspace"],
        )
        self.assertEqual(set(result["fingerprint"]), {"executable", "version", "interpreter", "package"})
        self.assertRegex(result["fingerprint"]["package"], r"^[0-9a-f]{64}$")

    async def test_init_refuses_bad_fields(self) -> None:
        """`handle_init()` refuses a bad generation, workspace, skills, behavior or session."""
        base = {"kind": "init", "generation": 1, "session": "s", "workspace": self.root, "skills": {}, "behavior": None}
        cases = {
            "generation": ({"generation": True}, "cannot init: generation must be int (got bool True)"),
            "relative": ({"workspace": "ws"}, "cannot init: workspace must be an absolute directory path (got 'ws')"),
            "missing": ({"workspace": self.root + "/nope"}, None),
            "skills": ({"skills": {"bodies": {"a": 1}}}, "cannot init: cannot load skills: bodies must map ids to strings (got a non-string entry)"),
            "behavior": ({"behavior": {"revision": "r"}}, None),
        }
        for label, (change, message) in cases.items():
            reply = await self.call({**base, **change, "id": label})
            self.assertEqual(reply["code"], "invalid_request", label)
            if message:
                self.assertEqual(reply["message"], message)
        no_session = {k: v for k, v in base.items() if k != "session"}
        self.assertEqual((await self.call({**no_session, "id": "s"}))["message"], "cannot init: session is required (got nothing)")
        self.assertIsNone(self.kernel.state)

    async def test_second_init_is_refused(self) -> None:
        """`handle_init()` refuses a second init: one generation per process."""
        await self.init()
        reply = await self.call({"kind": "init", "generation": 2, "session": "s", "workspace": self.root, "skills": {}, "behavior": None})
        self.assertEqual(reply["message"], "cannot init: generation 1 is already initialised (got 2)")

    async def test_prelude_names_are_bound_in_cells(self) -> None:
        """`handle_init()` binds the prelude so a cell can use it without imports."""
        await self.init()
        code = "import klbr.workspace as w\nsorted(n for n in w.PRELUDE_NAMES if callable(globals()[n])), (await workspace.current()).root"
        reply = await self.call({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        self.assertEqual(reply["result"]["value"], repr((["delete", "ls", "open_file", "run", "search"], self.root)))


class QueueTest(KernelCase):
    async def test_cells_run_one_at_a_time_in_arrival_order(self) -> None:
        """`handle_execute()` runs cells in arrival order, never two at once."""
        await self.init()
        self.kernel.state.ns["log"] = []
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "import asyncio\nlog.append('1a')\nawait asyncio.sleep(0)\nlog.append('1b')"})
        self.send({"kind": "execute", "id": "e2", "cell": "c2", "code": "log.append('2')"})
        self.send({"kind": "execute", "id": "e3", "cell": "c3", "code": "log.append('3')\nlog"})
        self.assertEqual((await self.result_of("e3"))["value"], "['1a', '1b', '2', '3']")

    async def _block_first_cell(self) -> asyncio.Event:
        await self.init()
        ns = self.kernel.state.ns
        ns["started"], ns["release"] = asyncio.Event(), asyncio.Event()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "started.set()\nawait release.wait()\n'done'"})
        await until(ns["started"].is_set, "first cell started")
        return ns["release"]

    async def test_cancel_running_cell(self) -> None:
        """`handle_cancel()` cancels the running cell: {cancelled: true}, its reply says cancelled."""
        await self._block_first_cell()
        cancel = await self.call({"kind": "cancel", "id": "k1", "target": "e1"})
        self.assertEqual(cancel["result"], {"cancelled": True})
        self.assertEqual(self.wire.reply("e1")["result"]["outcome"], "cancelled")

    async def test_cancel_while_a_timed_wait_arms_its_timer(self) -> None:
        """`handle_cancel()` during a timed ``wait()``'s timer RPC: the cell ends cancelled, no wait."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "wait('later', seconds=60)"})
        self.assertEqual((await self.rpc_frame())["method"], "timers.at")
        cancel = await self.call({"kind": "cancel", "id": "k1", "target": "e1"})
        self.assertEqual(cancel["result"], {"cancelled": True})
        result = await self.result_of()
        self.assertEqual((result["outcome"], result["wait"], result["error"]), ("cancelled", None, None))

    async def test_cancel_queued_cell_never_runs_it(self) -> None:
        """`handle_cancel()` drops a queued cell: it is answered cancelled and its code never runs."""
        release = await self._block_first_cell()
        self.send({"kind": "execute", "id": "e2", "cell": "c2", "code": "ran = True"})
        cancel = self.send({"kind": "cancel", "target": "e2"})
        await until(lambda: len(self.wire.replies("e2")) == 1, "queued cell answered")
        self.assertEqual(self.wire.reply("e2")["result"]["outcome"], "cancelled")
        release.set()
        self.assertEqual(await self.result_of(cancel), {"cancelled": True})
        self.assertEqual(self.wire.reply("e1")["result"]["value"], "'done'")
        self.assertNotIn("ran", self.kernel.state.ns)

    async def test_cancel_unknown_or_finished_is_false(self) -> None:
        """`handle_cancel()` answers {cancelled: false} for an unknown or finished target."""
        await self.init()
        await self.call({"kind": "execute", "id": "e1", "cell": "c1", "code": "1"})
        finished = await self.call({"kind": "cancel", "id": "k1", "target": "e1"})
        unknown = await self.call({"kind": "cancel", "id": "k2", "target": "nope"})
        self.assertEqual((finished["result"], unknown["result"]), ({"cancelled": False}, {"cancelled": False}))

    async def test_ping_is_answered_while_a_cell_runs(self) -> None:
        """`handle_ping()` is answered while a cell waits, ahead of the cell's own reply."""
        release = await self._block_first_cell()
        ping = self.send({"kind": "ping"})
        await until(lambda: len(self.wire.replies(ping)) == 1, "ping answered")
        self.assertEqual(self.wire.replies("e1"), [])
        release.set()
        self.assertEqual((await self.result_of())["outcome"], "ok")


if __name__ == "__main__":
    unittest.main()
