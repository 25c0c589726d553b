"""The runnable examples in docstrings stay true, and the handler table matches the wire format."""

import doctest
import importlib
import os
import types
import unittest

from klbr.kernel import HANDLERS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = ["cells", "errors", "frames", "hooks", "paths", "timers", "jobs"]
BEHAVIOR = ["attention.py", "context.py", "model.py", "turn.py"]


class DocsTest(unittest.TestCase):
    def test_module_examples_run(self) -> None:
        """Docstring examples of klbr modules produce what they show."""
        for name in MODULES:
            result = doctest.testmod(importlib.import_module(f"klbr.{name}"))
            self.assertEqual(result.failed, 0, name)
            self.assertGreater(result.attempted, 0, name)

    def test_behavior_examples_run(self) -> None:
        """Docstring examples of the default hooks produce what they show."""
        for name in BEHAVIOR:
            path = os.path.join(REPO, "behavior", name)
            module = types.ModuleType(f"behavior_{name[:-3]}")
            with open(path, encoding="utf-8") as handle:
                exec(compile(handle.read(), path, "exec"), module.__dict__)  # noqa: S102 - our own hook file
            result = doctest.testmod(module)
            self.assertEqual(result.failed, 0, name)
            self.assertGreater(result.attempted, 0, name)

    def test_handler_table_is_the_request_kinds(self) -> None:
        """`HANDLERS` holds exactly the host request kinds of the wire format."""
        self.assertEqual(set(HANDLERS), {"init", "execute", "cancel", "hook", "test", "ping", "fingerprint", "shutdown"})


if __name__ == "__main__":
    unittest.main()
