"""Tests of ``jobs``, ``llm`` and ``agent``: each is a host RPC with the documented params."""

import unittest

from klbr.jobs import check_budget
from tests.support import KernelCase


class CheckBudgetTest(unittest.TestCase):
    def test_refuses_unknown_keys_and_bad_values(self) -> None:
        """`check_budget()` names an unknown key or a bad value and passes a good budget through."""
        self.assertEqual(check_budget({"tokens": 10, "wall_time_s": 1.5}, "x"), {"tokens": 10, "wall_time_s": 1.5})
        self.assertIsNone(check_budget(None, "x"))
        with self.assertRaisesRegex(ValueError, r"budget keys are .* \(got cpu\)"):
            check_budget({"cpu": 1}, "x")
        with self.assertRaisesRegex(ValueError, "tokens must be a whole number"):
            check_budget({"tokens": 1.5}, "x")
        with self.assertRaisesRegex(ValueError, "must be a number >= 0"):
            check_budget({"model_requests": -1}, "x")
        with self.assertRaisesRegex(TypeError, "must be a dict"):
            check_budget(5, "x")
        for unbounded in (float("nan"), float("inf")):
            with self.assertRaisesRegex(ValueError, r"budget wall_time_s must be a number >= 0 \(got (nan|inf)\)"):
                check_budget({"wall_time_s": unbounded}, "x")


class JobsRpcTest(KernelCase):
    async def test_start_returns_the_job_id_at_once(self) -> None:
        """`jobs.start()` sends code, name and budget, and returns only the id."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1",
                   "code": "await jobs.start('6*7', budget={'tokens': 100}, name='answer')"})
        frame = await self.answer_rpc(0, {"job_id": "job_1", "state": "pending"})
        self.assertEqual((frame["method"], frame["params"]),
                         ("jobs.start", {"code": "6*7", "name": "answer", "budget": {"tokens": 100}}))
        self.assertEqual((await self.result_of())["value"], "'job_1'")

    async def test_status_list_cancel_and_result_speak_one_rpc_each(self) -> None:
        """`jobs.status/list/cancel/result` each send the job id (or nothing) to their method."""
        await self.init()
        cases = [("status", {"job_id": "job_1"}), ("cancel", {"job_id": "job_1"}),
                 ("result", {"job_id": "job_1"})]
        for index, (name, params) in enumerate(cases):
            self.send({"kind": "execute", "id": f"e{index}", "cell": "c", "code": f"await jobs.{name}('job_1')"})
            frame = await self.answer_rpc(index, {"job_id": "job_1", "state": "done"})
            self.assertEqual((frame["method"], frame["params"]), (f"jobs.{name}", params))
            await self.kernel.idle()
        self.send({"kind": "execute", "id": "el", "cell": "c", "code": "await jobs.list()"})
        frame = await self.answer_rpc(3, [])
        self.assertEqual((frame["method"], frame["params"]), ("jobs.list", {}))

    async def test_llm_returns_text_and_usage(self) -> None:
        """`llm()` sends prompt, route, max_tokens and budget, and returns an `LlmReply`."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1",
                   "code": "r = await llm('hi?', max_tokens=5, budget=50)\n(str(r), r.usage, r.call_id)"})
        frame = await self.answer_rpc(0, {"text": "hello", "usage": {"prompt_tokens": 3}, "call_id": "mc_1"})
        self.assertEqual(frame["params"], {"prompt": "hi?", "route": "fast", "max_tokens": 5, "budget": 50,
                                           "system": None})
        self.assertEqual((await self.result_of())["value"], "('hello', {'prompt_tokens': 3}, 'mc_1')")

    async def test_llm_raises_budget_exceeded_with_until(self) -> None:
        """`llm()` turns the host's `over_budget` into `BudgetExceeded` with the time it frees."""
        await self.init()
        code = ("from klbr.llm import BudgetExceeded\ntry:\n    await llm('x')\nexcept BudgetExceeded as e:\n"
                "    print(e.until)")
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        frame = await self.rpc_frame(0)
        self.kernel.receive({"kind": "rpc_error", "id": frame["id"], "code": "over_budget",
                             "message": "cannot call the model: the budget is spent (got tokens_per_hour: 5 of 4 "
                                        "used; frees at 2030-01-01T00:00:00.000Z)"})
        self.assertEqual((await self.result_of())["stdout"], "2030-01-01T00:00:00.000Z\n")

    async def test_agent_starts_an_agent_job_and_waits_for_its_result(self) -> None:
        """`agent()` starts a job of kind agent, waits for its result and returns it."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1",
                   "code": "a = await agent('sum it', budget={'tokens': 500})\n(a.ok, str(a), a.tokens_used)"})
        start = await self.answer_rpc(0, {"job_id": "job_7", "state": "pending"})
        self.assertEqual(start["params"], {"code": "sum it", "kind": "agent", "route": "main", "name": None,
                                           "budget": {"tokens": 500}})
        wait = await self.answer_rpc(1, {"job_id": "job_7", "state": "done", "cause": "answered",
                                      "result": {"value": "42"}, "tokens_used": 120})
        self.assertEqual((wait["method"], wait["params"]), ("jobs.result", {"job_id": "job_7"}))
        self.assertEqual((await self.result_of())["value"], "(True, '42', 120)")

    async def test_bad_arguments_are_refused_without_rpc(self) -> None:
        """`jobs.start`, `llm` and `agent` refuse bad arguments in the cell and send nothing."""
        await self.init()
        for code in ("await jobs.start('')", "await jobs.start('1', budget={'x': 1})", "await llm('')",
                     "await llm('x', route='slow')", "await llm('x', max_tokens=0)", "await agent('t', route='x')"):
            reply = await self.call({"kind": "execute", "cell": "c", "code": code})
            self.assertEqual(reply["result"]["outcome"], "error", code)
        self.assertEqual(self.wire.of_kind("rpc"), [])


if __name__ == "__main__":
    unittest.main()
