"""Tests of the worker's kept context.prepare messages and the delta that rebuilds them."""

import unittest

from klbr.errors import RequestError
from klbr.hooks import UNCHANGED, call_hook
from klbr.prepared import KeptMessages


def delta(id_, base, *parts):
    return {"id": id_, "base": base, "parts": list(parts)}


class KeptMessagesTest(unittest.TestCase):
    def test_rebuild_concatenates_copies_and_adds(self) -> None:
        """`rebuild()` joins runs of the kept list and new messages, in the order given."""
        kept = KeptMessages()
        kept.rebuild(delta("a", None, {"add": [{"n": 0}, {"n": 1}, {"n": 2}]}))
        given, original = kept.rebuild(delta("b", "a", {"copy": [2, 3]}, {"add": [{"n": 9}]}, {"copy": [0, 1]}))
        self.assertEqual(given, [{"n": 2}, {"n": 9}, {"n": 0}])
        self.assertEqual(original, given)
        self.assertEqual(kept.id, "b")

    def test_the_hook_gets_a_deep_copy(self) -> None:
        """What the hook gets shares no mutable object with the kept list."""
        kept = KeptMessages()
        given, _ = kept.rebuild(delta("a", None, {"add": [{"tool_calls": [{"id": "c1"}]}]}))
        given[0]["tool_calls"][0]["id"] = "changed"
        given.append({"extra": True})
        again, _ = kept.rebuild(delta("b", "a", {"copy": [0, 1]}))
        self.assertEqual(again, [{"tool_calls": [{"id": "c1"}]}])

    def test_unknown_base_or_bad_part_is_invalid_and_forgets(self) -> None:
        """A base other than the kept one, or a run past its end, is `invalid_request`; then nothing is kept."""
        kept = KeptMessages()
        kept.rebuild(delta("a", None, {"add": [1, 2]}))
        for bad in (delta("b", "zzz", {"copy": [0, 1]}), delta("b", "a", {"copy": [1, 3]}), delta("b", "a", {"copy": [0]}), delta("b", "a", "x")):
            kept.rebuild(delta("a", None, {"add": [1, 2]}))
            with self.assertRaises(RequestError) as caught:
                kept.rebuild(bad)
            self.assertEqual(caught.exception.code, "invalid_request")
            self.assertIsNone(kept.id)
        with self.assertRaises(RequestError):
            kept.rebuild(delta("c", "a", {"copy": [0, 0]}))  # forgotten: "a" is gone


class UnchangedTest(unittest.IsolatedAsyncioTestCase):
    async def test_equal_value_answers_unchanged(self) -> None:
        """`call_hook()` answers UNCHANGED for a value equal to `unchanged_if`, else the value."""
        import os

        behavior = {"revision": "defaults", "path": os.path.join(os.path.dirname(__file__), "..", "..", "behavior")}
        messages = [{"role": "user", "content": "hi"}]
        same = await call_hook("context.prepare", {"messages": list(messages)}, behavior, unchanged_if=messages)
        self.assertIs(same, UNCHANGED)
        other = await call_hook("context.prepare", {"messages": [{"role": "user", "content": "x"}]}, behavior, unchanged_if=messages)
        self.assertEqual(other, [{"role": "user", "content": "x"}])


if __name__ == "__main__":
    unittest.main()
