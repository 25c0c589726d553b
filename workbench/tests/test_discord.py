"""Tests of ``discord``: each call is one host RPC with the documented params."""

import unittest

from tests.support import KernelCase


class DiscordTest(KernelCase):
    async def test_send_speaks_one_rpc_and_returns_the_receipt(self) -> None:
        """`discord.send()` sends text, channel and reply_to as strings and returns the host's receipt."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1",
                   "code": "await discord.send('hi', channel=123, reply_to='456')"})
        frame = await self.rpc_frame(0)
        self.assertEqual((frame["method"], frame["params"]),
                         ("discord.send", {"text": "hi", "channel": "123", "reply_to": "456"}))
        self.assertEqual(frame["parent"], "e1")
        self.kernel.receive({"kind": "rpc_ok", "id": frame["id"],
                             "result": {"outbox_id": "ob_1", "state": "pending"}})
        self.assertEqual((await self.result_of())["value"],
                         "{'outbox_id': 'ob_1', 'state': 'pending'}")

    async def test_send_without_channel_leaves_routing_to_the_host(self) -> None:
        """`discord.send(text)` sends only the text: the host picks the turn's channel."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "await discord.send('yo')"})
        frame = await self.rpc_frame(0)
        self.assertEqual(frame["params"], {"text": "yo"})
        self.kernel.receive({"kind": "rpc_ok", "id": frame["id"], "result": {"outbox_id": "ob_2", "state": "pending"}})
        await self.kernel.idle()

    async def test_status_speaks_one_rpc(self) -> None:
        """`discord.status()` asks the host for one outbox row."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1",
                   "code": "(await discord.status('ob_1'))['state']"})
        frame = await self.rpc_frame(0)
        self.assertEqual((frame["method"], frame["params"]), ("discord.status", {"outbox_id": "ob_1"}))
        self.kernel.receive({"kind": "rpc_ok", "id": frame["id"], "result": {"outbox_id": "ob_1", "state": "unknown"}})
        self.assertEqual((await self.result_of())["value"], "'unknown'")

    async def test_host_refusal_reaches_the_cell(self) -> None:
        """`discord.send()` raises the host's refusal, e.g. when Discord is not configured."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "await discord.send('hi')"})
        frame = await self.rpc_frame(0)
        self.kernel.receive({"kind": "rpc_error", "id": frame["id"], "code": "invalid_config",
                             "message": "cannot send to discord: discord is not configured"})
        error = (await self.result_of())["error"]
        self.assertEqual(error["type"], "RpcError")
        self.assertIn("discord is not configured", error["message"])

    async def test_send_refuses_bad_arguments_without_rpc(self) -> None:
        """`discord.send()` refuses empty, long or non-text messages and bad ids before any frame."""
        await self.init()
        cases = [
            ("await discord.send('  ')", "ValueError", "cannot send to discord: text is empty (got only whitespace)"),
            ("await discord.send('x' * 2001)", "ValueError", "cannot send to discord: text is over 2000 characters (got 2001)"),
            ("await discord.send(b'x')", "TypeError", "cannot send to discord: text must be a string (got bytes)"),
            ("await discord.send('x', channel='general')", "ValueError",
             "cannot send to discord: channel must be a Discord id of 1-20 digits (got 'general')"),
            ("await discord.send('x', reply_to=True)", "ValueError",
             "cannot send to discord: reply_to must be a Discord id of 1-20 digits (got True)"),
            ("await discord.status('')", "TypeError",
             "cannot read discord send status: outbox_id must be a non-empty string (got '')"),
        ]
        for index, (code, kind, message) in enumerate(cases):
            error = (await self.execute(code, f"e{index}"))["error"]
            self.assertEqual((error["type"], error["message"]), (kind, message))
        self.assertEqual(self.wire.of_kind("rpc"), [])

    async def test_react_typing_and_ignore_speak_one_rpc_each(self) -> None:
        """`discord.react()`, `discord.typing()` and `ignore()` each send one RPC with their params."""
        await self.init()
        calls = [
            ("await discord.react('in_01J0000000AAAAAAAAAAAAAAAA', '👀')", "discord.react",
             {"message": "in_01J0000000AAAAAAAAAAAAAAAA", "emoji": "👀"}),
            ("await discord.react(555, 'ok:123', channel=7)", "discord.react",
             {"message": "555", "emoji": "ok:123", "channel": "7"}),
            ("await discord.typing()", "discord.typing", {}),
            ("await ignore('in_01J0000000AAAAAAAAAAAAAAAA', 'small talk')", "input.ignore",
             {"input": "in_01J0000000AAAAAAAAAAAAAAAA", "reason": "small talk"}),
            ("await discord.send('x', reply_to=False)", "discord.send", {"text": "x", "reply_to": False}),
            ("await discord.send('x', reply_to='in_01J0000000AAAAAAAAAAAAAAAA')", "discord.send",
             {"text": "x", "reply_to": "in_01J0000000AAAAAAAAAAAAAAAA"}),
        ]
        for index, (code, method, params) in enumerate(calls):
            self.send({"kind": "execute", "id": f"e{index}", "cell": f"c{index}", "code": code})
            frame = await self.rpc_frame(index)
            self.assertEqual((frame["method"], frame["params"]), (method, params))
            self.kernel.receive({"kind": "rpc_ok", "id": frame["id"], "result": {"ok": True}})
            await self.kernel.idle()

    async def test_react_and_ignore_refuse_bad_arguments_without_rpc(self) -> None:
        """A bad emoji, message id, input id or reason is refused in the cell, before any frame."""
        await self.init()
        cases = [
            ("await discord.react('in_1', '')", "ValueError", "cannot react on discord: emoji must be 1-100 characters (got '')"),
            ("await discord.react('abc', 'x')", "ValueError",
             "cannot send to discord: message must be a Discord id of 1-20 digits (got 'abc')"),
            ("await ignore('x', 'why')", "ValueError", "cannot ignore input: input_id must be an input id (got 'x')"),
            ("await ignore('in_1', ' ')", "ValueError", "cannot ignore input: reason must be 1-500 characters (got ' ')"),
        ]
        for index, (code, kind, message) in enumerate(cases):
            error = (await self.execute(code, f"e{index}"))["error"]
            self.assertEqual((error["type"], error["message"]), (kind, message))
        self.assertEqual(self.wire.of_kind("rpc"), [])


if __name__ == "__main__":
    unittest.main()
