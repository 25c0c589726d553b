"""Tests of host RPC from cells: ``run`` and ``local.send`` over ``rpc`` frames."""

import base64
import unittest

from klbr import rpc
from tests.support import KernelCase


class RpcTest(KernelCase):
    async def _start(self, code: str) -> dict:
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        return await self.rpc_frame()

    async def test_run_sends_rpc_and_decodes_result(self) -> None:
        """`run()` sends workspace.run {argv, timeout_s, cwd} under its execute id and decodes bytes."""
        frame = await self._start("r = await run(('git', 'status'), timeout=5)\nr.exit_code, r.stdout, r.stderr, r.stdout_truncated, r.timed_out, r.ok")
        self.assertEqual(frame, {"kind": "rpc", "id": "w1", "parent": "e1", "method": "workspace.run",
                                 "params": {"argv": ["git", "status"], "timeout_s": 5, "cwd": None}})
        self.kernel.receive({"kind": "rpc_ok", "id": "w1", "result": {
            "exit_code": 0, "stdout_b64": base64.b64encode(b"clean\n").decode(), "stderr_b64": "",
            "stdout_truncated": True, "stderr_truncated": False, "timed_out": False, "duration_ms": 12}})
        self.assertEqual((await self.result_of())["value"], "(0, b'clean\\n', b'', True, False, True)")

    async def test_run_cwd_is_resolved_inside_root(self) -> None:
        """`run()` sends cwd as the absolute path inside the workspace."""
        import os
        os.mkdir(os.path.join(self.root, "sub"))
        frame = await self._start("await run(['ls'], cwd='sub')")
        self.assertEqual(frame["params"]["cwd"], os.path.join(self.root, "sub"))

    async def test_rpc_error_raises_in_the_cell(self) -> None:
        """`run()` raises RpcError with the host's code when the host answers rpc_error."""
        await self._start("await run(['nope'])")
        self.kernel.receive({"kind": "rpc_error", "id": "w1", "code": "not_found", "message": "no such program"})
        error = (await self.result_of())["error"]
        self.assertEqual((error["type"], error["message"]), ("RpcError", "workspace.run failed (not_found): no such program"))

    async def test_cancel_while_awaiting_rpc_sends_rpc_cancel(self) -> None:
        """`HostRpc.call()` sends rpc_cancel when the cell awaiting it is cancelled."""
        await self._start("await run(['sleep', '100'])")
        await self.call({"kind": "cancel", "id": "k1", "target": "e1"})
        await self.kernel.idle()
        self.assertEqual(self.wire.of_kind("rpc_cancel"), [{"kind": "rpc_cancel", "id": "w1"}])
        self.assertEqual(self.wire.reply("e1")["result"]["outcome"], "cancelled")
        self.assertFalse(self.kernel.rpc.resolve({"kind": "rpc_ok", "id": "w1", "result": {}}))  # no call left waiting

    async def test_late_rpc_reply_is_ignored(self) -> None:
        """`HostRpc.resolve()` ignores a reply for an unknown or cancelled call, without replying."""
        before = len(self.wire.frames)
        self.kernel.receive({"kind": "rpc_ok", "id": "w99", "result": {}})
        await self.kernel.idle()
        self.assertEqual(len(self.wire.frames), before)

    async def test_run_refuses_shell_string_and_bad_argv(self) -> None:
        """`run()` refuses a shell string, an empty argv, non-str items and a bad timeout, sending nothing."""
        await self.init()
        cases = {
            "run('ls -la')": ("TypeError", "cannot run: run takes argv, not a shell string (got 'ls -la')"),
            "run([])": ("ValueError", "cannot run: argv is empty (got [])"),
            "run(['ls', 3])": ("TypeError", "cannot run: every argv item must be a str (got 3)"),
            "run(['ls'], timeout=0)": ("ValueError", "cannot run: timeout must be a number of seconds in (0, 86400] (got 0)"),
            "run(['ls'], timeout=86401)": ("ValueError", None),
            "run(['ls'], cwd='/')": ("WorkspaceEscape", None),
        }
        for n, (code, (kind, message)) in enumerate(cases.items()):
            reply = await self.call({"kind": "execute", "id": f"e{n}", "cell": "c", "code": f"await {code}"})
            error = reply["result"]["error"]
            self.assertEqual(error["type"], kind, code)
            if message:
                self.assertEqual(error["message"], message)
        self.assertEqual(self.wire.of_kind("rpc"), [])

    async def test_local_send_returns_receipt(self) -> None:
        """`local.send()` sends local.send {text} and returns the host's {send_id, seq}."""
        frame = await self._start("await local.send('hello')")
        self.assertEqual((frame["method"], frame["params"]), ("local.send", {"text": "hello"}))
        self.kernel.receive({"kind": "rpc_ok", "id": frame["id"], "result": {"send_id": "snd_1", "seq": 4}})
        self.assertEqual((await self.result_of())["value"], "{'send_id': 'snd_1', 'seq': 4}")

    async def test_local_send_passes_its_key(self) -> None:
        """`local.send(text, key=...)` sends the key with the text; a bad key is refused locally."""
        frame = await self._start("await local.send('hello', key='greet-1')")
        self.assertEqual(frame["params"], {"text": "hello", "key": "greet-1"})
        receipt = {"send_id": "snd_1", "seq": 4, "ordinal": 1, "duplicate": True}
        self.kernel.receive({"kind": "rpc_ok", "id": frame["id"], "result": receipt})
        self.assertIn("'duplicate': True", (await self.result_of())["value"])
        bad = await self.call({"kind": "execute", "id": "e2", "cell": "c", "code": "await local.send('x', key='')"})
        self.assertEqual(bad["result"]["error"]["message"], "cannot send: key must be a string of 1-200 characters (got '')")

    async def test_local_send_refuses_empty_and_non_text(self) -> None:
        """`local.send()` refuses empty or non-string text before asking the host."""
        await self.init()
        empty = await self.call({"kind": "execute", "id": "e1", "cell": "c", "code": "await local.send('  ')"})
        number = await self.call({"kind": "execute", "id": "e2", "cell": "c", "code": "await local.send(5)"})
        huge = await self.call({"kind": "execute", "id": "e3", "cell": "c", "code": "await local.send('x' * 1_000_001)"})
        self.assertEqual(empty["result"]["error"]["message"], "cannot send: text is empty (got only whitespace)")
        self.assertEqual(number["result"]["error"]["message"], "cannot send: text must be a string (got int)")
        self.assertEqual(huge["result"]["error"]["message"], "cannot send: text is over 1000000 characters (got 1000001)")
        self.assertEqual(self.wire.of_kind("rpc"), [])


class RpcOutsideCellTest(unittest.IsolatedAsyncioTestCase):
    async def test_call_outside_a_cell_is_refused(self) -> None:
        """`HostRpc.call()` refuses a call with no running cell to attribute it to."""
        sent: list = []
        client = rpc.HostRpc(sent.append)
        with self.assertRaisesRegex(RuntimeError, r"^cannot call host rpc local.send: only a running cell or hook may call it \(got neither\)$"):
            await client.call("local.send", {"text": "x"})
        self.assertEqual(sent, [])

    async def test_call_without_host_is_refused(self) -> None:
        """`rpc.call()` refuses when no host is bound."""
        rpc.bind(None)
        with self.assertRaisesRegex(RuntimeError, "no host is connected"):
            await rpc.call("workspace.run", {})


if __name__ == "__main__":
    unittest.main()
