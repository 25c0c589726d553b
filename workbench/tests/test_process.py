"""End-to-end tests: spawn ``python3 -m klbr`` and speak real frames over its stdio."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import unittest
from typing import Any

WORKBENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WATCHDOG_S = 30.0  # a safety bound so a hung worker fails the test instead of hanging it


class Worker:
    """A workbench process and blocking frame I/O with it."""

    def __init__(self, workspace: str, *args: str) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": WORKBENCH, "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "klbr", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workspace, env=env,
        )
        self.workspace = workspace
        self._watchdog = threading.Timer(_WATCHDOG_S, self.proc.kill)
        self._watchdog.start()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj: dict[str, Any]) -> None:
        body = json.dumps(obj).encode()
        self.send_raw(struct.pack(">I", len(body)) + body)

    def recv(self) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        header = self.proc.stdout.read(4)
        if len(header) < 4:
            return None
        (length,) = struct.unpack(">I", header)
        return json.loads(self.proc.stdout.read(length))

    def until_reply(self, request_id: str) -> list[dict[str, Any]]:
        """Every frame up to and including the reply to ``request_id``."""
        frames = []
        for _ in range(10_000):
            frame = self.recv()
            if frame is None:
                raise AssertionError(f"worker ended before replying to {request_id}: {frames}")
            frames.append(frame)
            if frame["id"] == request_id and frame["kind"] in ("ok", "error"):
                return frames
        raise AssertionError("too many frames")

    def request(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.send(obj)
        return self.until_reply(obj["id"])[-1]

    def init(self) -> dict[str, Any]:
        return self.request({
            "kind": "init", "id": "i1", "generation": 1, "session": "default", "workspace": self.workspace,
            "skills": {"revision": "r", "roots": [], "bodies": {"workspace": "# workspace\n"}, "refused": []},
            "behavior": None,
        })

    def close_stdin_and_wait(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait()

    def finish(self) -> None:
        self._watchdog.cancel()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class ProcessTest(unittest.TestCase):
    def setUp(self) -> None:
        self.workspace = os.path.realpath(self.enterContext(tempfile.TemporaryDirectory()))

    def start(self, *args: str) -> Worker:
        worker = Worker(self.workspace, *args)
        self.addCleanup(worker.finish)
        return worker

    def test_init_execute_unknown_and_eof(self) -> None:
        """`python3 -m klbr` answers init, runs `1+1`, captures print, refuses an unknown kind, exits 0 at EOF."""
        worker = self.start()
        init = worker.init()
        self.assertEqual(init["result"]["pid"], worker.proc.pid)
        self.assertIn("skills", init["result"]["prelude"])
        two = worker.request({"kind": "execute", "id": "e1", "cell": "c1", "code": "1+1"})
        self.assertEqual((two["result"]["outcome"], two["result"]["value"]), ("ok", "2"))
        worker.send({"kind": "execute", "id": "e2", "cell": "c2", "code": "print('hello')"})
        frames = worker.until_reply("e2")
        self.assertEqual(frames[-1]["result"]["stdout"], "hello\n")
        self.assertEqual("".join(f["text"] for f in frames[:-1] if f["kind"] == "stream"), "hello\n")
        unknown = worker.request({"kind": "frobnicate", "id": "u1"})
        self.assertEqual((unknown["kind"], unknown["code"]), ("error", "unknown_kind"))
        self.assertIn("frobnicate", unknown["message"])
        self.assertEqual(worker.close_stdin_and_wait(), 0)

    def test_subprocess_output_cannot_reach_the_channel(self) -> None:
        """A cell's subprocess and raw writes to fd 1 go to stderr, never into the frame channel."""
        worker = self.start()
        worker.init()
        code = ("import os, subprocess, sys\nsubprocess.run(['echo', 'child-leak'])\nos.write(1, b'raw-leak\\n')\n"
                "sys.__stdout__.write('dunder-leak\\n'); sys.__stdout__.flush()\nsys.stdin.read()")
        reply = worker.request({"kind": "execute", "id": "e1", "cell": "c1", "code": code})
        self.assertEqual(reply["result"]["value"], "''")
        self.assertEqual(worker.request({"kind": "ping", "id": "p1"}), {"kind": "ok", "id": "p1", "result": {}})
        self.assertEqual(worker.close_stdin_and_wait(), 0)
        assert worker.proc.stderr is not None
        stderr = worker.proc.stderr.read().decode()
        for leak in ("child-leak", "raw-leak", "dunder-leak"):
            self.assertIn(leak, stderr)

    def test_oversize_frame_is_frame_invalid_and_exit_nonzero(self) -> None:
        """An oversize frame gets one error frame (id "", frame_invalid) and a non-zero exit."""
        worker = self.start("--max-frame-bytes", "1000")
        worker.init()
        worker.send({"kind": "execute", "id": "big", "cell": "c", "code": "x" * 2000})
        error = worker.recv()
        self.assertEqual(error, {"kind": "error", "id": "", "code": "frame_invalid",
                                 "message": f"cannot read frame: length is over the limit of 1000 bytes (got {2000 + 57})"})
        self.assertEqual(worker.proc.wait(), 2)

    def test_truncated_frame_is_frame_invalid(self) -> None:
        """A frame cut off by end of input gets frame_invalid and a non-zero exit."""
        worker = self.start()
        worker.send_raw(struct.pack(">I", 50) + b'{"kind":')
        assert worker.proc.stdin is not None
        worker.proc.stdin.close()
        error = worker.recv()
        assert error is not None
        self.assertEqual((error["id"], error["code"]), ("", "frame_invalid"))
        self.assertEqual(error["message"], "cannot read frame: stream ended inside the body (got 8 of 50 bytes)")
        self.assertEqual(worker.proc.wait(), 2)

    def test_non_json_frame_is_frame_invalid(self) -> None:
        """A body that is not JSON gets frame_invalid and a non-zero exit."""
        worker = self.start()
        worker.send_raw(struct.pack(">I", 5) + b"hello")
        error = worker.recv()
        assert error is not None
        self.assertEqual(error["code"], "frame_invalid")
        self.assertNotEqual(worker.proc.wait(), 0)

    def test_shutdown_exits_zero_despite_lingering_thread(self) -> None:
        """`shutdown` is answered {} and the worker exits 0, even with a thread a cell left running."""
        worker = self.start()
        worker.init()
        worker.request({"kind": "execute", "id": "e1", "cell": "c1",
                        "code": "import threading\nthreading.Thread(target=threading.Event().wait).start()"})
        self.assertEqual(worker.request({"kind": "shutdown", "id": "s1"}), {"kind": "ok", "id": "s1", "result": {}})
        self.assertEqual(worker.proc.wait(), 0)

    def test_shutdown_cancels_a_running_cell_blocked_in_a_thread(self) -> None:
        """`shutdown` answers the running cell as cancelled and exits 0 though its thread still runs."""
        worker = self.start()
        worker.init()
        worker.send({"kind": "execute", "id": "e1", "cell": "c1", "code": (
            "import asyncio, threading\nprint('started')\nawait asyncio.to_thread(threading.Event().wait)")})
        stream = worker.recv()
        assert stream is not None
        self.assertEqual(stream["text"], "started\n")
        worker.send({"kind": "shutdown", "id": "s1"})
        frames = [worker.recv(), worker.recv()]
        self.assertEqual(frames[0], {"kind": "ok", "id": "s1", "result": {}})
        assert frames[1] is not None
        self.assertEqual((frames[1]["id"], frames[1]["result"]["outcome"]), ("e1", "cancelled"))
        self.assertEqual(worker.proc.wait(), 0)

    def test_eof_while_a_cell_awaits_exits_zero(self) -> None:
        """End of input while a cell awaits forever cancels it and exits 0."""
        worker = self.start()
        worker.init()
        worker.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "import asyncio\nprint('waiting', flush=True)\nawait asyncio.Event().wait()"})
        stream = worker.recv()
        assert stream is not None
        self.assertEqual((stream["kind"], stream["text"]), ("stream", "waiting\n"))
        self.assertEqual(worker.close_stdin_and_wait(), 0)

    def test_eof_while_a_cell_blocks_the_loop_still_exits(self) -> None:
        """End of input while a cell blocks the event loop still ends the process (after a grace period)."""
        worker = self.start()
        worker.init()
        worker.send({"kind": "execute", "id": "e1", "cell": "c1", "code": "import asyncio, time\nprint('blocking')\nawait asyncio.sleep(0)\ntime.sleep(600)"})
        stream = worker.recv()
        assert stream is not None
        self.assertEqual(stream["text"], "blocking\n")
        self.assertEqual(worker.close_stdin_and_wait(), 0)


if __name__ == "__main__":
    unittest.main()
