"""Tests of ``klbr.draft_tests``: a draft's ``tests/test_*.py`` run with ``hook`` bound, bounded."""

import os
import sys
import tempfile
import textwrap
import threading
import unittest

from klbr import capture, draft_tests
from klbr.draft_tests import run_tests
from klbr.frames import encode_frame

RELEASE = {"hook": None}


class DraftTestsCase(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        capture.install()
        self.dir = self.enterContext(tempfile.TemporaryDirectory())
        os.mkdir(os.path.join(self.dir, "tests"))
        self.write("turn.py", "def next(**context):\n    return {'action': 'wait'}\n")

    def write(self, name: str, source: str) -> None:
        with open(os.path.join(self.dir, name), "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(source))

    async def run_them(self, timeout: float = 10, max_tests: int = 56) -> list[dict]:
        tree = {"revision": f"draft-{id(self)}", "path": self.dir}
        return (await run_tests(tree, timeout=timeout, max_tests=max_tests))["tests"]


class DraftTestsTest(DraftTestsCase):
    async def test_passing_and_failing_functions_are_one_result_each(self) -> None:
        """Every top-level `test_*` function of `tests/test_*.py` is a result, in file and definition order."""
        self.write("tests/test_turn.py", """
            from helpers import expected

            def test_waits():
                print("checking turn.next")
                assert hook("turn.next")() == expected()

            async def test_async_fails():
                assert hook("turn.next")()["action"] == "continue", "turn.next does not continue"

            def helper_not_a_test():
                raise AssertionError("never called")
        """)
        self.write("tests/helpers.py", "def expected():\n    return {'action': 'wait'}\n")
        self.write("tests/notes.py", "raise RuntimeError('not a test file')\n")
        results = await self.run_them()
        self.assertEqual([r["name"] for r in results], ["tests/test_turn.py::test_waits", "tests/test_turn.py::test_async_fails"])
        passed, failed = results
        self.assertEqual((passed["ok"], passed["error"], passed["output"]), (True, None, "checking turn.next\n"))
        self.assertFalse(failed["ok"])
        self.assertEqual(failed["error"]["type"], "AssertionError")
        self.assertEqual(failed["error"]["message"], "turn.next does not continue")
        self.assertIn('assert hook("turn.next")()["action"] == "continue"', failed["error"]["traceback"])

    async def test_a_file_that_fails_to_import_fails_as_a_whole(self) -> None:
        """A test file that raises on import is one failing result named by the file."""
        self.write("tests/test_broken.py", "import not_a_module_anywhere\n")
        [result] = await self.run_them()
        self.assertEqual(result["name"], "tests/test_broken.py")
        self.assertEqual(result["error"]["type"], "ModuleNotFoundError")

    async def test_hook_follows_hooks_json_and_reports_a_missing_hook(self) -> None:
        """`hook(name)` is what the host would call (hooks.json respected); a missing one fails the test."""
        self.write("policy.py", "def decide(**context):\n    return {'action': 'continue'}\n")
        self.write("hooks.json", '{"turn.next": "policy.py:decide"}')
        self.write("tests/test_bound.py", """
            def test_bound():
                assert hook("turn.next")() == {"action": "continue"}

            def test_missing():
                hook("model.plan")
        """)
        bound, missing = await self.run_them()
        self.assertTrue(bound["ok"], bound)
        self.assertEqual(missing["error"]["type"], "RequestError")
        self.assertIn("hook file is missing", missing["error"]["message"])

    async def test_a_test_past_its_timeout_fails_and_the_next_runs(self) -> None:
        """A plain test that blocks past the timeout fails with TimeoutError; the run goes on."""
        release = threading.Event()
        RELEASE["hook"] = release
        self.write("tests/test_slow.py", """
            from tests_release import RELEASE

            def test_blocks():
                RELEASE["hook"].wait(60)

            def test_after():
                pass
        """)
        sys.modules["tests_release"] = sys.modules[__name__]
        try:
            slow, after = await self.run_them(timeout=0.05)
        finally:
            release.set()
            del sys.modules["tests_release"]
        self.assertEqual(slow["error"], {"type": "TimeoutError", "message": "the test ran longer than 0.05 s", "traceback": ""})
        self.assertTrue(after["ok"])

    async def test_more_than_max_tests_fails_naming_the_rest(self) -> None:
        """Past `max_tests` the rest are not run, and one failing result names them."""
        self.write("tests/test_many.py", "".join(f"def test_{n}():\n    pass\n" for n in range(4)))
        results = await self.run_them(max_tests=2)
        self.assertEqual([r["ok"] for r in results], [True, True, False])
        self.assertEqual(results[2]["name"], "tests")
        self.assertEqual(
            results[2]["error"]["message"],
            "a draft runs at most 2 tests; 2 more were not run (tests/test_many.py::test_2, tests/test_many.py::test_3)",
        )

    async def test_the_run_leaves_no_trace(self) -> None:
        """sys.path and sys.modules are restored, no bytecode is written into the draft, `hook` is unbound."""
        self.write("tests/test_imports.py", "import turn\n\ndef test_turn():\n    assert turn.next() == {'action': 'wait'}\n")
        path, modules = list(sys.path), set(sys.modules)
        [result] = await self.run_them()
        self.assertTrue(result["ok"], result)
        self.assertEqual((sys.path, set(sys.modules)), (path, modules))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "__pycache__")))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "tests", "__pycache__")))
        with self.assertRaisesRegex(RuntimeError, "no draft's tests are running"):
            draft_tests.hook("turn.next")

    async def test_a_failure_with_a_huge_message_is_cut_to_fit_the_frame(self) -> None:
        """A failing test's huge message and traceback are cut, so the `test` reply still fits its frame."""
        self.write("tests/test_huge.py", "def test_huge():\n    raise ValueError('\\x00' * 2_000_000)\n")
        results = await self.run_them()
        error = results[0]["error"]
        self.assertEqual(error["type"], "ValueError")
        self.assertRegex(error["message"], r"^\x00+\.\.\. \[klbr: message truncated, \d+ more characters\]$")
        self.assertIn("    raise ValueError('\\x00' * 2_000_000)\nValueError: \x00", error["traceback"])
        encode_frame({"kind": "ok", "id": "t1", "result": {"tests": results}})  # raises FrameTooLarge when over

    async def test_an_exception_whose_str_raises_is_that_tests_failure(self) -> None:
        """A test, or a test file on import, that raises an exception whose `__str__` raises fails
        alone, with a message saying str() failed; the run still answers."""
        broken = "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('broken')\n"
        self.write("tests/test_a.py", broken + "def test_raises():\n    raise E()\n")
        self.write("tests/test_b.py", broken + "raise E()\n")
        results = await self.run_them()
        self.assertEqual([r["name"] for r in results], ["tests/test_a.py::test_raises", "tests/test_b.py"])
        for result in results:
            self.assertEqual(result["error"]["type"], "E")
            self.assertEqual(result["error"]["message"], "<exception str() failed: RuntimeError: broken>")
            self.assertRegex(result["error"]["traceback"], r"    raise E\(\)\n[\w.]*\.E: <exception str\(\) failed>\n$")

    async def test_a_tree_without_tests_has_none(self) -> None:
        """A draft without `tests/` (or without test_*.py files) has no test results."""
        os.rmdir(os.path.join(self.dir, "tests"))
        self.assertEqual(await self.run_them(), [])


if __name__ == "__main__":
    unittest.main()
