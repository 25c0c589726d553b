"""Tests of ``behavior``: each SDK call is one host RPC with the documented params."""

import unittest

from tests.support import KernelCase, until


class BehaviorTest(KernelCase):
    async def _rpc(self, index: int) -> dict:
        await until(lambda: len(self.wire.of_kind("rpc")) > index, f"rpc frame {index} sent")
        return self.wire.of_kind("rpc")[index]

    async def _answer(self, index: int, result: dict) -> dict:
        frame = await self._rpc(index)
        self.kernel.receive({"kind": "rpc_ok", "id": frame["id"], "result": result})
        return frame

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
        draft = await self._answer(0, {"draft_id": "dr1", "base_release": "a" * 64, "base_epoch": 3})
        self.assertEqual((draft["method"], draft["params"]), ("behavior.draft", {}))
        write = await self._answer(1, {})
        self.assertEqual((write["method"], write["params"]),
                         ("behavior.write", {"draft_id": "dr1", "path": "turn.py", "text": "x"}))
        test = await self._answer(2, {"ok": False, "checks": [
            {"hook": "turn.next", "ok": False, "detail": "returned 42"}]})
        self.assertEqual((test["method"], test["params"]), ("behavior.test", {"draft_id": "dr1"}))
        publish = await self._answer(3, {"release_id": "b" * 64})
        self.assertEqual(publish["method"], "behavior.publish")
        activate = await self._answer(4, {"epoch": 4, "release_id": "b" * 64})
        self.assertEqual((activate["method"], activate["params"]),
                         ("behavior.activate", {"release_id": "b" * 64, "expected_epoch": 3}))
        await self.kernel.idle()
        value = self.wire.reply("e1")["result"]["value"]
        self.assertIn("<draft dr1 of release aaaaaaaaaaaa at epoch 3>", value)
        self.assertIn("False", value)
        self.assertIn("FAIL turn.next: returned 42", value)
        self.assertIn(", 4, 'bbbb", value)

    async def test_write_refuses_non_text_without_rpc(self) -> None:
        """`Draft.write()` refuses bytes before any frame is sent."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1",
                   "code": "from klbr.behavior import Draft\nd = Draft({'draft_id': 'x', 'base_release': 'r', 'base_epoch': 1})\nawait d.write('a.py', b'x')"})
        await self.kernel.idle()
        error = self.wire.reply("e1")["result"]["error"]
        self.assertEqual((error["type"], error["message"]), ("TypeError", "cannot write a.py: text must be a string (got bytes)"))
        self.assertEqual(self.wire.of_kind("rpc"), [])

    async def test_rollback_and_status(self) -> None:
        """`behavior.rollback()` and `behavior.status()` are single RPCs."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "(await behavior.status())['epoch'], await behavior.rollback()"})
        status = await self._answer(0, {"release_id": "a" * 64, "epoch": 2, "last_good": "a" * 64})
        self.assertEqual(status["method"], "behavior.status")
        rollback = await self._answer(1, {"epoch": 3, "release_id": "c" * 64})
        self.assertEqual(rollback["method"], "behavior.rollback")
        await self.kernel.idle()
        self.assertEqual(self.wire.reply("e1")["result"]["value"], "(2, 3)")


if __name__ == "__main__":
    unittest.main()
