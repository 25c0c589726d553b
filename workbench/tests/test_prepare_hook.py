"""Tests of context.prepare's messages in the worker: the hook's own copy, the unchanged answer."""

import os
import unittest

from klbr.hooks import UNCHANGED, call_hook

BEHAVIOR = os.path.join(os.path.dirname(__file__), "..", "..", "behavior")


class PrepareHookTest(unittest.IsolatedAsyncioTestCase):
    async def test_equal_value_answers_unchanged(self) -> None:
        """`call_hook()` answers UNCHANGED for a value equal to `unchanged_if`, else the value."""
        behavior = {"revision": "defaults", "path": BEHAVIOR}
        messages = [{"role": "user", "content": "hi"}]
        same = await call_hook("context.prepare", {"messages": list(messages)}, behavior, unchanged_if=messages)
        self.assertIs(same, UNCHANGED)
        other = await call_hook("context.prepare", {"messages": [{"role": "user", "content": "x"}]}, behavior, unchanged_if=messages)
        self.assertEqual(other, [{"role": "user", "content": "x"}])


if __name__ == "__main__":
    unittest.main()
