"""Tests of ``history``: one host RPC per call, typed results, arguments checked before sending."""

import unittest

from tests.support import KernelCase, until


class HistoryTest(KernelCase):
    async def _rpc(self, code: str, result: dict) -> dict:
        """Run ``code`` in a cell and answer its one rpc with ``result``; return the rpc frame and the reply."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        frame = await self.answer_rpc(0, result)
        await self.kernel.idle()
        return {"rpc": frame, "reply": self.wire.reply("e1")}

    async def test_search_sends_one_rpc_and_returns_hits(self) -> None:
        """`history.search()` sends history.search {query, limit, match} and returns typed hits."""
        hit = {"id": "input:in_1", "kind": "input", "snippet": "the «vault» code", "rank": 1, "score": 2.5, "at": 7}
        got = await self._rpc(
            "r = await history.search('vault code', limit=3)\n(r.hits[0].id, r.hits[0].snippet, r.truncated, len(r))",
            {"results": [hit], "truncated": True, "query": '"vault" "code"'},
        )
        self.assertEqual((got["rpc"]["method"], got["rpc"]["params"]),
                         ("history.search", {"query": "vault code", "limit": 3, "match": "all"}))
        self.assertEqual(got["reply"]["result"]["value"], repr(("input:in_1", "the «vault» code", True, 1)))

    async def test_read_sends_one_rpc_and_returns_a_page(self) -> None:
        """`history.read()` sends history.read {id, offset, length} and returns the exact slice."""
        page = {"id": "send:4", "kind": "send", "text": "lo wor", "offset": 3, "length": 6, "total": 11,
                "unit": "characters", "next_offset": 9, "meta": {"conversation": "local:default"}}
        got = await self._rpc(
            "p = await history.read('send:4', offset=3, length=6)\n(p.text, p.next_offset, p.meta['conversation'])",
            page,
        )
        self.assertEqual((got["rpc"]["method"], got["rpc"]["params"]),
                         ("history.read", {"id": "send:4", "offset": 3, "length": 6}))
        self.assertEqual(got["reply"]["result"]["value"], repr(("lo wor", 9, "local:default")))

    async def test_bad_arguments_are_refused_before_any_frame(self) -> None:
        """`history` refuses an empty query, a bad limit or match, a bad id or length, sending nothing."""
        await self.init()
        cases = {
            "await history.search('  ')": "cannot search history: query must be a non-empty string (got '  ')",
            "await history.search('x', limit=0)": "cannot use history: limit must be an integer in 1-100 (got 0)",
            "await history.search('x', match='some')": "cannot search history: match must be 'all' or 'any' (got 'some')",
            "await history.read('nothing')": "cannot read history: id must be '<kind>:<key>' (got 'nothing')",
            "await history.read('send:1', length=0)": "cannot use history: length must be an integer in 1-1000000 (got 0)",
        }
        for n, (code, message) in enumerate(cases.items()):
            error = (await self.execute(code, f"e{n}"))["error"]
            self.assertEqual((error["type"], error["message"]), ("ValueError", message), code)
        self.assertEqual(self.wire.of_kind("rpc"), [])

    async def test_arguments_the_host_refuses_are_refused_before_any_frame(self) -> None:
        """`history` refuses a query over 2000 characters and an offset past 2**53 - 1, as the host would, sending nothing."""
        await self.init()
        cases = {
            "await history.search('x' * 2001)":
                "cannot search history: query is over 2000 characters (got 2001); search for fewer words",
            "await history.search('😀' * 1001)":
                "cannot search history: query is over 2000 characters (got 2002); search for fewer words",
            "await history.read('send:1', offset=2**53)":
                "cannot use history: offset must be an integer in 0-9007199254740991 (got 9007199254740992)",
        }
        for n, (code, message) in enumerate(cases.items()):
            self.send({"kind": "execute", "id": f"e{n}", "cell": f"e{n}", "code": code})
            await until(lambda: self.wire.of_kind("rpc") or self.wire.replies(f"e{n}"), f"{code} ended or called")
            self.assertEqual(self.wire.of_kind("rpc"), [], f"{code} was sent to the host")
            error = (await self.result_of(f"e{n}"))["error"]
            self.assertEqual((error["type"], error["message"]), ("ValueError", message), code)


if __name__ == "__main__":
    unittest.main()
