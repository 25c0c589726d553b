"""Tests of ``behavior``: each SDK call is one host RPC with the documented params."""

import os
import tempfile
import unittest

from klbr.behavior import behavior
from klbr.fingerprint import package_hash
from tests.support import KernelCase


class BehaviorTest(KernelCase):
    async def test_draft_edit_test_activate_speaks_one_rpc_each(self) -> None:
        """`Draft.activate()` publishes once, then activates at the draft's base epoch."""
        await self.init()
        code = "\n".join([
            "d = await behavior.draft()",
            "await d.write('turn.py', 'x')",
            "report = await d.test()",
            "epoch = await d.activate()",
            "(repr(d), report.ok, str(report), epoch, d.release)",
        ])
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        draft = await self.answer_rpc(0, {"draft_id": "dr1", "base_release": "a" * 64, "base_epoch": 3})
        self.assertEqual((draft["method"], draft["params"]), ("behavior.draft", {}))
        write = await self.answer_rpc(1, {})
        self.assertEqual((write["method"], write["params"]),
                         ("behavior.write", {"draft_id": "dr1", "path": "turn.py", "text": "x"}))
        test = await self.answer_rpc(2, {"ok": False, "checks": [
            {"hook": "turn.next", "ok": False, "detail": "returned 42"}]})
        self.assertEqual((test["method"], test["params"]), ("behavior.test", {"draft_id": "dr1"}))
        publish = await self.answer_rpc(3, {"release_id": "b" * 64})
        self.assertEqual(publish["method"], "behavior.publish")
        activate = await self.answer_rpc(4, {"epoch": 4, "release_id": "b" * 64})
        self.assertEqual((activate["method"], activate["params"]),
                         ("behavior.activate", {"release_id": "b" * 64, "expected_epoch": 3}))
        value = (await self.result_of())["value"]
        self.assertIn("<draft dr1 of release aaaaaaaaaaaa at epoch 3>", value)
        self.assertIn("False", value)
        self.assertIn("FAIL turn.next: returned 42", value)
        self.assertIn(", 4, 'bbbb", value)

    async def test_write_refuses_non_text_without_rpc(self) -> None:
        """`Draft.write()` refuses bytes before any frame is sent."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1",
                   "code": "from klbr.behavior import Draft\nd = Draft({'draft_id': 'x', 'base_release': 'r', 'base_epoch': 1})\nawait d.write('a.py', b'x')"})
        error = (await self.result_of())["error"]
        self.assertEqual((error["type"], error["message"]), ("TypeError", "cannot write a.py: text must be a string (got bytes)"))
        self.assertEqual(self.wire.of_kind("rpc"), [])

    async def test_rollback_and_status(self) -> None:
        """`behavior.rollback()` and `behavior.status()` are single RPCs."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "(await behavior.status())['epoch'], await behavior.rollback()"})
        status = await self.answer_rpc(0, {"release_id": "a" * 64, "epoch": 2, "last_good": "a" * 64})
        self.assertEqual(status["method"], "behavior.status")
        rollback = await self.answer_rpc(1, {"epoch": 3, "release_id": "c" * 64})
        self.assertEqual(rollback["method"], "behavior.rollback")
        self.assertEqual((await self.result_of())["value"], "(2, 3)")


class HooksSdkTest(KernelCase):
    async def test_bind_a_cell_function_copies_its_source_into_the_draft(self) -> None:
        """`hooks.bind()` with a def writes its source to bound/<hook>.py, then binds it, in the last draft."""
        await self.init()
        self.send({"kind": "execute", "id": "e0", "cell": "c0", "code": "d = await behavior.draft()"})
        await self.answer_rpc(0, {"draft_id": "dr1", "base_release": "a" * 64, "base_epoch": 1})
        await self.kernel.idle()
        code = "def decide(**context):\n    return {'action': 'stop'}\n\nawait hooks.bind('turn.next', decide)"
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        write = await self.answer_rpc(1, {})
        self.assertEqual((write["method"], write["params"]["draft_id"], write["params"]["path"]),
                         ("behavior.write", "dr1", "bound/turn_next.py"))
        self.assertEqual(write["params"]["text"], "def decide(**context):\n    return {'action': 'stop'}\n")
        bind = await self.answer_rpc(2, {"target": "bound/turn_next.py:decide", "bindings": {}})
        self.assertEqual((bind["method"], bind["params"]),
                         ("hooks.bind", {"draft_id": "dr1", "hook": "turn.next", "target": "bound/turn_next.py:decide"}))
        self.assertEqual((await self.result_of())["value"], "'bound/turn_next.py:decide'")

    async def test_bind_refuses_a_lambda_and_no_draft_without_rpc(self) -> None:
        """`hooks.bind()` refuses a lambda and a call with no draft before any frame is sent."""
        behavior.last_draft = None  # one process is one generation; tests share the object
        await self.init()
        no_draft = await self.execute("await hooks.bind('turn.next', 'x.py:f')")
        self.assertIn("no draft given and none taken", no_draft["error"]["message"])
        a_lambda = await self.execute("await hooks.bind('turn.next', lambda: 1, draft='dr1')", "e2")
        self.assertIn("pass a def function", a_lambda["error"]["message"])
        self.assertEqual(self.wire.of_kind("rpc"), [])

    async def test_test_trace_and_release_are_single_rpcs(self) -> None:
        """`hooks.test()` replays a trace id or takes args; `trace()` and `release()` read what the host keeps."""
        await self.init()
        code = "\n".join([
            "r = await hooks.test('turn.next', 'tr_1', draft='dr1')",
            "r2 = await hooks.test('model.plan', {'session': {}})",
            "t = await hooks.trace('fr_1')",
            "p = await hooks.release()",
            "(r.ok, r.output, r2.ok, len(t), p['release_id'], str(r).splitlines()[0])",
        ])
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        one = await self.answer_rpc(0, {"ok": True, "hook": "turn.next", "release_id": "draft-x", "output": {"action": "stop"},
                                     "error": None, "duration_ms": 3, "trace_id": "tr_2"})
        self.assertEqual((one["method"], one["params"]),
                         ("hooks.test", {"hook": "turn.next", "trace_id": "tr_1", "draft_id": "dr1"}))
        two = await self.answer_rpc(1, {"ok": False, "hook": "model.plan", "release_id": "a" * 64, "output": None,
                                     "error": {"code": "hook_failed", "message": "m", "traceback": "tb"}, "duration_ms": 1})
        self.assertEqual(two["params"], {"hook": "model.plan", "args": {"session": {}}})
        trace = await self.answer_rpc(2, {"traces": [{"id": "tr_3"}, {"id": "tr_4"}]})
        self.assertEqual((trace["method"], trace["params"]), ("hooks.trace", {"target": "fr_1"}))
        release = await self.answer_rpc(3, {"release_id": "b" * 64, "frame_id": "fr_1"})
        self.assertEqual(release["method"], "hooks.release")
        value = (await self.result_of())["value"]
        self.assertIn("(True, {'action': 'stop'}, False, 2, 'bbbb", value)
        self.assertIn("turn.next on draft-x: ok in 3 ms", value)

    async def test_candidates_and_diagnostics(self) -> None:
        """`behavior.candidates()` and `Draft.diagnostics()` read the kept failed candidates."""
        await self.init()
        code = "from klbr.behavior import Draft\nd = Draft({'draft_id': 'dr1', 'base_release': 'r', 'base_epoch': 1})\n(len(await behavior.candidates()), len(await d.diagnostics()))"
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        every = await self.answer_rpc(0, {"candidates": [{"id": "cd_1"}, {"id": "cd_2"}]})
        self.assertEqual((every["method"], every["params"]), ("behavior.candidates", {}))
        one = await self.answer_rpc(1, {"candidates": [{"id": "cd_1"}]})
        self.assertEqual(one["params"], {"draft_id": "dr1"})
        self.assertEqual((await self.result_of())["value"], "(2, 1)")


class FingerprintTest(KernelCase):
    async def test_fingerprint_request_reports_loaded_and_current(self) -> None:
        """`handle_fingerprint()` answers what was loaded and what is on disk, equal when nothing changed."""
        reply = await self.call({"kind": "fingerprint", "id": "f1"})
        loaded, current = reply["result"]["loaded"], reply["result"]["current"]
        self.assertEqual(loaded, current)
        self.assertEqual(loaded["package"], package_hash())
        self.assertRegex(loaded["interpreter"], r"^\d+:\d+:\d+$")

    def test_package_hash_follows_content(self) -> None:
        """`package_hash()` changes with a file's bytes and ignores __pycache__."""
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "a.py"), "w") as f:
                f.write("x = 1\n")
            first = package_hash(tmp)
            os.makedirs(os.path.join(tmp, "__pycache__"))
            with open(os.path.join(tmp, "__pycache__", "a.py"), "w") as f:
                f.write("ignored")
            self.assertEqual(package_hash(tmp), first)
            with open(os.path.join(tmp, "a.py"), "w") as f:
                f.write("x = 2\n")
            self.assertNotEqual(package_hash(tmp), first)


if __name__ == "__main__":
    unittest.main()
