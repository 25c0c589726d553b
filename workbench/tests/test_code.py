"""Tests of ``code``: each call is one host RPC with the documented params, and each answer
(or refusal) becomes the documented object or exception."""

import os
import unittest

from tests.support import KernelCase

HASH = "a" * 64
NEW = "b" * 64
RANGE = {"path": "app.py", "hash": HASH, "start_byte": 0, "end_byte": 10, "start_line": 1, "end_line": 2}
SYMBOL = {"kind": "function", "name": "f", "qualified_name": "f", "depth": 0, "signature": "def f():",
          "range": RANGE}


class CodeTest(KernelCase):
    async def _run(self, code: str, *results: object) -> dict:
        """Run one cell, answer its RPCs with `results` in order, return the cell's result."""
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        for index, result in enumerate(results):
            frame = await self.rpc_frame(index)
            self.kernel.receive({"kind": "rpc_ok", "id": frame["id"], "result": result})
        return await self.result_of()

    async def test_outline_sends_a_relative_path_and_builds_the_outline(self) -> None:
        """`code.outline()` sends the workspace-relative path and returns an Outline of Symbols."""
        await self.init()
        os.mkdir(os.path.join(self.root, "src"))
        reply = {"path": "src/app.py", "hash": HASH, "language": "python", "lines": 2,
                 "symbols": [SYMBOL], "truncated": False, "syntax_errors": 0}
        result = await self._run(
            f"o = await code.outline({os.path.join(self.root, 'src', 'app.py')!r})\n"
            "print(o.symbols[0].range.start_line, o.symbols[0].qualified_name)\nprint(o)", reply)
        frame = self.wire.of_kind("rpc")[0]
        self.assertEqual((frame["method"], frame["params"]), ("code.outline", {"path": "src/app.py"}))
        self.assertEqual(result["error"], None)
        self.assertEqual(result["stdout"].splitlines()[0], "1 f")
        self.assertIn("src/app.py (python, 2 lines, @aaaaaaaaaaaa)", result["stdout"])
        self.assertIn("    1-2     function f", result["stdout"])

    async def test_symbol_and_read_send_the_range_back(self) -> None:
        """`code.symbol()` then `code.read()` sends the symbol's range unchanged."""
        await self.init()
        result = await self._run(
            "s = await code.symbol('app.py', 'f', kind='function')\nprint(await code.read(s))",
            SYMBOL, {"ok": True, "text": "def f():\n", "range": RANGE})
        first, second = self.wire.of_kind("rpc")
        self.assertEqual(first["params"], {"path": "app.py", "name": "f", "kind": "function"})
        self.assertEqual((second["method"], second["params"]), ("code.read", {"range": RANGE}))
        self.assertEqual(result["stdout"], "def f():\n\n")

    async def test_a_stale_read_raises_stale_range_with_the_current_hash(self) -> None:
        """`code.read()` of a changed file raises StaleRange naming the current hash."""
        await self.init()
        stale = {"ok": False, "reason": "stale",
                 "stale": [{"path": "app.py", "range_hash": HASH, "current_hash": NEW}]}
        result = await self._run(
            f"try:\n    await code.read({RANGE!r})\nexcept code.StaleRange as e:\n"
            "    print(e.current_hash)\n    print(e)", stale)
        out = result["stdout"].splitlines()
        self.assertEqual(out[0], NEW)
        self.assertIn("cannot read app.py: the file changed since the range was taken", out[1])

    async def test_patch_sends_edits_and_returns_new_ranges(self) -> None:
        """`code.patch_many()` sends every edit and returns the new ranges in order."""
        await self.init()
        new = dict(RANGE, hash=NEW, end_byte=12)
        reply = {"ok": True, "patch_id": "pa_1", "seq": 9, "ranges": [new, new],
                 "files": [{"path": "app.py", "before_hash": HASH, "after_hash": NEW}]}
        result = await self._run(
            f"r = code.Range.from_wire({RANGE!r})\n"
            "done = await code.patch_many([(r, 'x'), (r, 'y')])\nprint(done.seq, done.range.hash[:4], done)",
            reply)
        frame = self.wire.of_kind("rpc")[0]
        self.assertEqual(frame["method"], "code.patch")
        self.assertEqual(frame["params"], {"edits": [{"range": RANGE, "text": "x"}, {"range": RANGE, "text": "y"}]})
        self.assertEqual(result["stdout"], "9 bbbb <patch pa_1: 2 edit(s) in app.py>\n")

    async def test_a_refused_patch_raises_with_the_reason(self) -> None:
        """`code.patch()` raises PatchRefused for a syntax refusal and StaleRange for a stale one."""
        await self.init()
        syntax = {"ok": False, "reason": "syntax", "refusals": [
            {"path": "app.py", "errors_before": 0, "errors_after": 1,
             "problems": [{"line": 2, "column": 5, "kind": "ERROR", "text": "return x +"}]}]}
        result = await self._run(
            f"try:\n    await code.patch({RANGE!r}, 'bad')\nexcept code.PatchRefused as e:\n    print(e)", syntax)
        self.assertEqual(
            result["stdout"],
            "cannot patch: the result would not parse; nothing was written: app.py: 0 -> 1 syntax errors "
            "(line 2 col 5 ERROR 'return x +')\n")

    async def test_find_sends_pattern_path_and_cap(self) -> None:
        """`code.find()` sends the pattern, a glob path as given and the cap; prints truncation."""
        await self.init()
        reply = {"mode": "query", "truncated": True, "files_searched": 3, "files_skipped": 0,
                 "refused_languages": {}, "matches": [
                     {"path": "app.py", "range": RANGE, "text": "def f():", "captures": {"name": "f"}}]}
        result = await self._run("print(await code.find('(identifier) @i', 'src/**/*.py', max_results=1))", reply)
        frame = self.wire.of_kind("rpc")[0]
        self.assertEqual(frame["params"], {"pattern": "(identifier) @i", "path": "src/**/*.py",
                                           "max_results": 1, "capture": None})
        self.assertEqual(result["stdout"],
                         "app.py:1: def f():\n[truncated: stopped at 1 matches; more exist]\n")

    async def test_lines_returns_a_range(self) -> None:
        """`code.lines()` asks for whole lines and returns their Range."""
        await self.init()
        result = await self._run("print(await code.lines('app.py', 1, 2))", {"range": RANGE, "text": "x"})
        self.assertEqual(self.wire.of_kind("rpc")[0]["params"], {"path": "app.py", "start": 1, "end": 2})
        self.assertEqual(result["stdout"], f"<Range app.py:1-2 bytes 0-10 @{HASH[:12]}>\n")

    async def test_bad_arguments_are_refused_before_any_rpc(self) -> None:
        """`code.*` refuses bad arguments and paths outside the workspace without a frame."""
        await self.init()
        cases = [
            ("await code.outline('../x.py')", "WorkspaceEscape"),
            ("await code.outline(3)", "TypeError"),
            ("await code.symbol('a.py', '')", "ValueError"),
            ("await code.find('', '.')", "ValueError"),
            ("await code.find('x', '.', max_results=0)", "ValueError"),
            ("await code.read('a.py')", "TypeError"),
            ("await code.patch_many([])", "ValueError"),
            ("await code.patch({'path': 'a.py'}, 'x')", "ValueError"),
            (f"await code.patch({RANGE!r}, b'x')", "TypeError"),
            ("await code.lines('a.py', 0)", "ValueError"),
        ]
        for index, (source, kind) in enumerate(cases):
            error = (await self.execute(source, f"e{index}"))["error"]
            self.assertEqual(error["type"], kind, source)
        self.assertEqual(self.wire.of_kind("rpc"), [])

    async def test_help_reads_the_contract(self) -> None:
        """`help(code.patch_many)` explains the all-or-none and syntax rules."""
        await self.init()
        out = (await self.execute("help(code.patch_many)"))["stdout"]
        self.assertIn("or none of them", out)
        self.assertIn("PatchRefused", out)


if __name__ == "__main__":
    unittest.main()
