"""Tests of behaviour hook loading and calling, including the shipped defaults."""

import os
import tempfile
import textwrap
import unittest

from klbr.errors import RequestError
from klbr.hooks import call_hook, read_bindings
from tests.support import KernelCase, until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULTS = {"revision": "defaults", "path": os.path.join(REPO, "behavior")}


class HookCase(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.dir = self.enterContext(tempfile.TemporaryDirectory())

    def hook_file(self, name: str, source: str) -> None:
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(textwrap.dedent(source))

    async def failure(self, name: str, args: dict, behavior: dict | None) -> RequestError:
        with self.assertRaises(RequestError) as caught:
            await call_hook(name, args, behavior)
        self.assertEqual(caught.exception.code, "hook_failed")
        return caught.exception


class HookTest(HookCase):
    async def test_good_hook_gets_args_as_keywords(self) -> None:
        """`call_hook()` calls the hook with args as keywords and returns its value."""
        self.hook_file("attention.py", "def plan(inputs, session):\n    return {'n': len(inputs), 's': session['id']}\n")
        result = await call_hook("attention.plan", {"inputs": [1, 2], "session": {"id": "x"}}, {"revision": "r1", "path": self.dir})
        self.assertEqual(result, {"n": 2, "s": "x"})

    async def test_async_hook_is_awaited(self) -> None:
        """`call_hook()` awaits an async hook."""
        self.hook_file("turn.py", "async def next(**kw):\n    return {'action': 'continue'}\n")
        self.assertEqual(await call_hook("turn.next", {}, {"revision": "r1", "path": self.dir}), {"action": "continue"})

    async def test_raising_hook_is_hook_failed_with_traceback(self) -> None:
        """`call_hook()` turns an exception in the hook into hook_failed with its traceback."""
        self.hook_file("model.py", "def plan(**kw):\n    raise LookupError('no route')\n")
        err = await self.failure("model.plan", {}, {"revision": "r1", "path": self.dir})
        self.assertEqual(err.message, "cannot run hook model.plan: hook raised LookupError: no route")
        self.assertIn("raise LookupError('no route')", err.traceback or "")
        self.assertNotIn("hooks.py", err.traceback or "")

    async def test_hook_raising_an_exception_whose_str_raises_is_hook_failed(self) -> None:
        """`call_hook()` turns an exception whose `__str__` raises into hook_failed saying str() failed."""
        self.hook_file("model.py", "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('broken')\ndef plan(**kw):\n    raise E()\n")
        err = await self.failure("model.plan", {}, {"revision": "r1", "path": self.dir})
        self.assertEqual(err.message, "cannot run hook model.plan: hook raised E: <exception str() failed: RuntimeError: broken>")
        self.assertRegex(err.traceback or "", r"    raise E\(\)\n[\w.]*\.E: <exception str\(\) failed>\n$")  # E's module is the release's

    async def test_missing_file_is_hook_failed(self) -> None:
        """`call_hook()` reports a missing hook file as hook_failed naming the path."""
        err = await self.failure("context.prepare", {}, {"revision": "r1", "path": self.dir})
        self.assertEqual(err.message, f"cannot run hook context.prepare: hook file is missing (got {self.dir}/context.py)")

    async def test_missing_function_is_hook_failed(self) -> None:
        """`call_hook()` reports a file without the hook function as hook_failed."""
        self.hook_file("context.py", "def other():\n    pass\n")
        err = await self.failure("context.prepare", {}, {"revision": "r1", "path": self.dir})
        self.assertIn("defines no function prepare() (got NoneType)", err.message)

    async def test_import_error_is_hook_failed(self) -> None:
        """`call_hook()` reports a hook file that fails to import as hook_failed."""
        self.hook_file("turn.py", "import nonexistent_module_klbr\n")
        err = await self.failure("turn.next", {}, {"revision": "r-bad", "path": self.dir})
        self.assertIn("importing", err.message)
        self.assertIn("ModuleNotFoundError", err.message)

    async def test_syntax_error_is_hook_failed(self) -> None:
        """`call_hook()` reports a hook file with a syntax error as hook_failed."""
        self.hook_file("model.py", "def plan(:\n")
        err = await self.failure("model.plan", {}, {"revision": "r-syntax", "path": self.dir})
        self.assertIn("raised SyntaxError", err.message)

    async def test_loading_writes_nothing_into_the_release(self) -> None:
        """`call_hook()` leaves the release directory byte-for-byte as it was (no __pycache__)."""
        self.hook_file("model.py", "def plan(**kw):\n    return {'route': 'main'}\n")
        before = sorted(os.listdir(self.dir))
        await call_hook("model.plan", {}, {"revision": "r-clean", "path": self.dir})
        self.assertEqual(sorted(os.listdir(self.dir)), before)

    async def test_wrong_arguments_are_hook_failed(self) -> None:
        """`call_hook()` reports args that do not fit the signature as hook_failed."""
        self.hook_file("attention.py", "def plan(inputs, session):\n    return {}\n")
        err = await self.failure("attention.plan", {"inputs": []}, {"revision": "r1", "path": self.dir})
        self.assertIn("TypeError", err.message)

    async def test_non_json_result_is_hook_failed(self) -> None:
        """`call_hook()` refuses a result that is not JSON (a set, NaN)."""
        self.hook_file("model.py", "def plan(**kw):\n    return kw['v']\n")
        for value in ({1, 2}, float("nan")):
            err = await self.failure("model.plan", {"v": value}, {"revision": "r1", "path": self.dir})
            self.assertIn("not JSON", err.message)

    async def test_too_deeply_nested_result_is_hook_failed(self) -> None:
        """`call_hook()` refuses a result nested past the recursion limit as hook_failed, not internal."""
        self.hook_file(
            "model.py",
            "def plan(**kw):\n    v = []\n    for _ in range(100_000):\n        v = [v]\n    return {'route': v}\n",
        )
        err = await self.failure("model.plan", {}, {"revision": "r1", "path": self.dir})
        self.assertIn("not JSON", err.message)

    async def test_unknown_name_and_no_behavior(self) -> None:
        """`call_hook()` refuses an unknown hook name and a missing release."""
        unknown = await self.failure("model.route", {}, {"revision": "r1", "path": self.dir})
        self.assertIn("unknown hook name (got 'model.route'", unknown.message)
        unbound = await self.failure("model.plan", {}, None)
        self.assertEqual(unbound.message, "cannot run hook model.plan: no behavior release is bound (got null)")

    async def test_new_revision_is_a_fresh_import(self) -> None:
        """`call_hook()` imports a new revision afresh and keeps serving the old one from its module."""
        self.hook_file("model.py", "def plan(**kw):\n    return {'route': 'one'}\n")
        self.assertEqual(await call_hook("model.plan", {}, {"revision": "a", "path": self.dir}), {"route": "one"})
        self.hook_file("model.py", "def plan(**kw):\n    return {'route': 'two'}\n")
        self.assertEqual(await call_hook("model.plan", {}, {"revision": "b", "path": self.dir}), {"route": "two"})
        self.assertEqual(await call_hook("model.plan", {}, {"revision": "a", "path": self.dir}), {"route": "one"})

    async def test_hook_may_use_dataclasses(self) -> None:
        """`call_hook()` registers the module, so a hook file may define dataclasses."""
        self.hook_file("turn.py", "from dataclasses import dataclass, asdict\n@dataclass\nclass D:\n    action: str\ndef next(**kw):\n    return asdict(D('wait'))\n")
        self.assertEqual(await call_hook("turn.next", {}, {"revision": "dc", "path": self.dir}), {"action": "wait"})


class BindingTest(HookCase):
    async def test_bound_function_serves_the_hook(self) -> None:
        """`load_hook()` uses the function `hooks.json` binds, from a file in a subdirectory."""
        os.makedirs(os.path.join(self.dir, "policy"))
        self.hook_file("policy/turns.py", "def decide(**kw):\n    return {'action': 'stop'}\n")
        self.hook_file("turn.py", "def next(**kw):\n    return {'action': 'wait'}\n")
        self.hook_file("hooks.json", '{"turn.next": "policy/turns.py:decide"}')
        behavior = {"revision": "bound", "path": self.dir}
        self.assertEqual(await call_hook("turn.next", {}, behavior), {"action": "stop"})

    async def test_files_whose_paths_differ_only_by_slash_or_dot_are_separate_modules(self) -> None:
        """`load_hook()` loads `a/b.py` and `a.b.py` of one release as two modules, each hook from its own file."""
        os.makedirs(os.path.join(self.dir, "policy"))
        self.hook_file("policy/turns.py", "def decide(**kw):\n    return {'action': 'stop'}\n")
        self.hook_file("policy.turns.py", "def plan(**kw):\n    return {'route': 'dotted'}\n")
        self.hook_file("hooks.json", '{"turn.next": "policy/turns.py:decide", "model.plan": "policy.turns.py:plan"}')
        behavior = {"revision": "slash-or-dot", "path": self.dir}
        self.assertEqual(await call_hook("turn.next", {}, behavior), {"action": "stop"})
        self.assertEqual(await call_hook("model.plan", {}, behavior), {"route": "dotted"})

    async def test_bad_bindings_are_hook_failed(self) -> None:
        """`load_hook()` refuses a `hooks.json` with an unknown hook, an escaping target or bad JSON."""
        cases = {
            '{"turn.later": "t.py:f"}': "names an unknown hook (got 'turn.later'",
            '{"turn.next": "../t.py:f"}': "binds turn.next to a target that is not file.py:function inside the release (got '../t.py:f')",
            '{"turn.next": "t.py"}': "not file.py:function",
            # What the host refuses, the worker refuses too: a trailing newline, over 256 characters.
            '{"turn.next": "t.py:f\\n"}': "not file.py:function",
            '{"turn.next": "%s.py:f"}' % ("a" * 253): "not file.py:function",
            '["turn.next"]': "must be an object (got list)",
            "{": "hooks.json is not JSON",
        }
        for n, (text, message) in enumerate(cases.items()):
            self.hook_file("hooks.json", text)
            err = await self.failure("turn.next", {}, {"revision": f"bad{n}", "path": self.dir})
            self.assertIn(message, err.message)

    def test_read_bindings_without_a_file_binds_nothing(self) -> None:
        """`read_bindings()` of a release without `hooks.json` is empty."""
        self.assertEqual(read_bindings(self.dir), {})


class DefaultHooksTest(unittest.IsolatedAsyncioTestCase):
    async def test_attention_consumes_every_pending_input(self) -> None:
        """`behavior/attention.py` plan() consumes every input and routes to their conversations."""
        inputs = [{"id": "in_1", "conversation": "local"}, {"id": "in_2", "conversation": "dm:7"}, {"id": "in_3", "conversation": "local"}]
        result = await call_hook("attention.plan", {"inputs": inputs, "session": {"id": "default"}}, DEFAULTS)
        self.assertEqual(result, {"consume": ["in_1", "in_2", "in_3"], "routing": {"conversations": ["local", "dm:7"]}})

    async def test_attention_with_no_inputs_consumes_nothing(self) -> None:
        """`behavior/attention.py` plan() with no inputs consumes nothing."""
        result = await call_hook("attention.plan", {"inputs": [], "session": {}}, DEFAULTS)
        self.assertEqual(result["consume"], [])

    async def test_model_context_turn_defaults(self) -> None:
        """The default model, context and turn hooks pick main, keep messages, and wait."""
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        self.assertEqual(await call_hook("model.plan", {"session": {}}, DEFAULTS), {"route": "main"})
        self.assertEqual(await call_hook("context.prepare", {"messages": messages, "session": {}}, DEFAULTS), messages)
        self.assertEqual(await call_hook("turn.next", {"session": {}}, DEFAULTS), {"action": "wait"})
        self.assertEqual(await call_hook("turn.next", {"continue_requested": True}, DEFAULTS), {"action": "continue"})


class HookRequestTest(KernelCase):
    async def test_hook_request_uses_init_behavior(self) -> None:
        """`handle_hook()` runs the hook of the release bound at init and replies its value."""
        await self.init(behavior=DEFAULTS)
        reply = await self.call({"kind": "hook", "id": "h1", "name": "model.plan", "args": {"session": {}}})
        self.assertEqual(reply, {"kind": "ok", "id": "h1", "result": {"route": "main"}})

    async def test_hook_request_failure_is_hook_failed_reply(self) -> None:
        """`handle_hook()` answers a failing hook with an error frame, code hook_failed, with traceback."""
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "turn.py"), "w") as f:
                f.write("def next(**kw):\n    return 1 / 0\n")
            await self.init(behavior={"revision": "broken", "path": tmp})
            reply = await self.call({"kind": "hook", "id": "h1", "name": "turn.next", "args": {}})
        self.assertEqual((reply["kind"], reply["code"]), ("error", "hook_failed"))
        self.assertIn("ZeroDivisionError", reply["traceback"])

    async def test_hook_failure_with_a_huge_message_keeps_its_traceback_within_the_frame(self) -> None:
        """`handle_hook()` cuts a failing hook's huge message and traceback to fit the frame, so the
        hook_failed reply keeps the cut message and the traceback with the failing line."""
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "turn.py"), "w") as f:
                f.write("def next(**kw):\n    raise ValueError('\\x00' * 2_000_000)\n")
            await self.init(behavior={"revision": "huge", "path": tmp})
            reply = await self.call({"kind": "hook", "id": "h1", "name": "turn.next", "args": {}})
        self.assertEqual((reply["kind"], reply["code"]), ("error", "hook_failed"))
        self.assertTrue(reply["message"].startswith("cannot run hook turn.next: hook raised ValueError: " + "\x00" * 1000))
        self.assertRegex(reply["message"], r"\.\.\. \[klbr: message truncated, \d+ more characters\]$")
        self.assertIn("    raise ValueError('\\x00' * 2_000_000)\nValueError: \x00", reply.get("traceback", ""))

    async def test_hook_rpc_is_attributed_to_the_hook_and_cancel_ends_it(self) -> None:
        """`handle_cancel()` cancels a running hook: its RPC carried the hook id, is cancelled, and the hook fails."""
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "turn.py"), "w") as f:
                f.write("from klbr import rpc\nasync def next(**kw):\n    return await rpc.call('local.send', {'text': 'x'})\n")
            await self.init(behavior={"revision": "rpc-hook", "path": tmp})
            self.send({"kind": "hook", "id": "h1", "name": "turn.next", "args": {}})
            await until(lambda: bool(self.wire.of_kind("rpc")), "hook rpc sent")
            self.assertEqual(self.wire.of_kind("rpc")[0]["parent"], "h1")
            cancel = await self.call({"kind": "cancel", "id": "k1", "target": "h1"})
        self.assertEqual(cancel["result"], {"cancelled": True})
        hook = self.wire.reply("h1")
        self.assertEqual((hook["code"], hook["message"]), ("hook_failed", "cannot run hook turn.next: cancelled by the host"))
        self.assertEqual(len(self.wire.of_kind("rpc_cancel")), 1)
        again = await self.call({"kind": "cancel", "id": "k2", "target": "h1"})
        self.assertEqual(again["result"], {"cancelled": False})

    async def test_hook_request_behavior_override(self) -> None:
        """`handle_hook()` uses a `behavior` given in the request over the one from init."""
        await self.init(behavior=None)
        reply = await self.call({"kind": "hook", "id": "h1", "name": "turn.next", "args": {}, "behavior": DEFAULTS})
        self.assertEqual(reply["result"], {"action": "wait"})


if __name__ == "__main__":
    unittest.main()
