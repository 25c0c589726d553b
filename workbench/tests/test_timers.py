"""Tests of ``timers`` and of ``wait(seconds=…)``: each is one host RPC with the documented params."""

import datetime as dt
import unittest

from klbr.timers import due_params
from tests.support import KernelCase


class DueParamsTest(unittest.TestCase):
    def test_accepts_seconds_aware_datetimes_iso_and_unix_seconds(self) -> None:
        """`due_params()` turns every accepted form into seconds or epoch milliseconds."""
        self.assertEqual(due_params(None, seconds=2), {"seconds": 2.0})
        moment = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
        self.assertEqual(due_params(moment), {"until_ms": 1893456000000})
        self.assertEqual(due_params("2030-01-01T01:00:00+01:00"), {"until_ms": 1893456000000})
        self.assertEqual(due_params(1893456000.5), {"until_ms": 1893456000500})

    def test_refuses_naive_datetimes_and_bad_values(self) -> None:
        """`due_params()` refuses what would need a guess, naming what it got."""
        with self.assertRaisesRegex(ValueError, "needs a time zone"):
            due_params(dt.datetime(2030, 1, 1))
        with self.assertRaisesRegex(ValueError, "seconds must be above 0"):
            due_params(None, seconds=0)
        with self.assertRaisesRegex(TypeError, "seconds must be a number"):
            due_params(None, seconds=True)
        with self.assertRaisesRegex(ValueError, "not ISO 8601"):
            due_params("tomorrow")
        with self.assertRaisesRegex(TypeError, "must be a datetime"):
            due_params([1])
        for unbounded in (float("nan"), float("inf")):
            with self.assertRaisesRegex(ValueError, r"cannot set timer: when must be Unix seconds >= 0 \(got (nan|inf)\)"):
                due_params(unbounded)


class TimersRpcTest(KernelCase):
    async def test_wait_with_seconds_sets_a_timer_before_the_cell_replies(self) -> None:
        """`wait(reason, seconds=…)` asks the host for a timer, then ends the cell with its id."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "wait('nap', seconds=2)\nprint('after')"})
        frame = await self.rpc_frame(0)
        self.assertEqual((frame["method"], frame["params"], frame["parent"]),
                         ("timers.at", {"seconds": 2.0, "note": "nap", "wait": True}, "e1"))
        # No reply before the host answered: the timer is durable before the cell returns.
        self.assertEqual(self.wire.replies("e1"), [])
        self.kernel.receive({"kind": "rpc_ok", "id": frame["id"],
                             "result": {"timer_id": "tm_1", "due_at": 1234, "state": "pending"}})
        result = await self.result_of()
        self.assertEqual(result["outcome"], "ok")
        self.assertEqual(result["wait"], {"reason": "nap", "timer_id": "tm_1", "due_at": 1234})
        self.assertEqual(result["stdout"], "")

    async def test_a_refused_wait_timer_is_the_cells_error_not_a_wait(self) -> None:
        """`wait(seconds=…)` whose timer the host refuses ends the cell with an error, not waiting."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "wait('nap', seconds=5)"})
        frame = await self.rpc_frame(0)
        self.kernel.receive({"kind": "rpc_error", "id": frame["id"], "code": "invalid_input", "message": "no"})
        result = await self.result_of()
        self.assertEqual((result["outcome"], result["wait"]), ("error", None))
        self.assertEqual(result["error"]["type"], "RpcError")

    async def test_wait_refuses_both_times_and_a_bad_time_without_rpc(self) -> None:
        """`wait()` with seconds and until, or a bad time, raises in the cell and sends nothing."""
        await self.init()
        for code in ("wait('x', seconds=1, until=5)", "wait('x', seconds=-1)", "wait('x', until='soon')"):
            reply = await self.call({"kind": "execute", "cell": "c", "code": code})
            self.assertEqual(reply["result"]["outcome"], "error", code)
        self.assertEqual(self.wire.of_kind("rpc"), [])

    async def test_timers_calls_speak_one_rpc_each(self) -> None:
        """`timers.at/after/cancel/list` send their documented params and return the host's JSON."""
        await self.init()
        cases = [
            ("await timers.at('2030-01-01T00:00:00Z', 'ny')", "timers.at", {"until_ms": 1893456000000, "note": "ny"}),
            ("await timers.after(90)", "timers.at", {"seconds": 90.0, "note": ""}),
            ("await timers.cancel('tm_9')", "timers.cancel", {"timer_id": "tm_9"}),
            ("await timers.list(all=True)", "timers.list", {"all": True}),
        ]
        for index, (code, method, params) in enumerate(cases):
            self.send({"kind": "execute", "id": f"e{index}", "cell": "c", "code": code})
            frame = await self.rpc_frame(index)
            self.assertEqual((frame["method"], frame["params"]), (method, params), code)
            self.kernel.receive({"kind": "rpc_ok", "id": frame["id"], "result": {"timer_id": "tm_9"}})
            self.assertEqual((await self.result_of(f"e{index}"))["value"], "{'timer_id': 'tm_9'}")


if __name__ == "__main__":
    unittest.main()
