"""Shared test helpers: a kernel fed plain dicts, a collecting frame writer, temp trees."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import unittest
from typing import Any, Callable

from klbr.frames import encode_frame
from klbr.kernel import Kernel

EMPTY_SKILLS = {"revision": "rev0", "roots": [], "bodies": {}, "refused": []}


class Wire:
    """Collects the frames a kernel writes, encoding each as the real channel would."""

    def __init__(self, max_frame_bytes: int = 16 * 1024 * 1024) -> None:
        self.frames: list[dict[str, Any]] = []
        self.max_frame_bytes = max_frame_bytes

    def write(self, frame: dict[str, Any]) -> None:
        data = encode_frame(frame, self.max_frame_bytes)
        self.frames.append(json.loads(data[4:]))

    def replies(self, request_id: str) -> list[dict[str, Any]]:
        """Every ok/error frame with this id."""
        return [f for f in self.frames if f["id"] == request_id and f["kind"] in ("ok", "error")]

    def reply(self, request_id: str) -> dict[str, Any]:
        """The one ok/error frame with this id; fails the test when there are 0 or several."""
        found = self.replies(request_id)
        if len(found) != 1:
            raise AssertionError(f"expected one reply to {request_id}, got {len(found)}: {self.frames}")
        return found[0]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["kind"] == kind]


async def until(predicate: Callable[[], bool], what: str, turns: int = 2000) -> None:
    """Yield to the loop until ``predicate()`` holds; fail after a bounded number of turns."""
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


class KernelCase(unittest.IsolatedAsyncioTestCase):
    """A test case with a fresh kernel, a wire and a temporary workspace."""

    max_frame_bytes = 16 * 1024 * 1024

    async def asyncSetUp(self) -> None:
        self.root = os.path.realpath(self.enterContext(tempfile.TemporaryDirectory()))
        self.wire = Wire(self.max_frame_bytes)
        self.kernel = Kernel(self.wire.write, max_frame_bytes=self.max_frame_bytes)
        self._counter = 0

    async def asyncTearDown(self) -> None:
        await self.kernel.close()

    def send(self, frame: dict[str, Any]) -> str:
        """Hand one frame to the kernel; give it an id ``t<N>`` unless it has one."""
        if "id" not in frame:
            self._counter += 1
            frame = {**frame, "id": f"t{self._counter}"}
        self.kernel.receive(frame)
        return frame["id"]

    async def call(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send one frame, wait until everything is handled, return its one reply."""
        request_id = self.send(frame)
        await self.kernel.idle()
        return self.wire.reply(request_id)

    async def execute(self, code: str, request_id: str = "e1") -> dict[str, Any]:
        """Run ``code`` as one cell, wait until everything is handled, return its ``execute`` result."""
        return (await self.call({"kind": "execute", "id": request_id, "cell": request_id, "code": code}))["result"]

    async def result_of(self, request_id: str = "e1") -> dict[str, Any]:
        """Wait until everything is handled; return the ``result`` of the one reply to ``request_id``."""
        await self.kernel.idle()
        return self.wire.reply(request_id)["result"]

    async def rpc_frame(self, index: int = 0) -> dict[str, Any]:
        """The ``index``-th rpc frame the kernel sent, once it has been sent."""
        await until(lambda: len(self.wire.of_kind("rpc")) > index, f"rpc frame {index} sent")
        return self.wire.of_kind("rpc")[index]

    async def answer_rpc(self, index: int, result: object) -> dict[str, Any]:
        """Answer the ``index``-th rpc frame with ``rpc_ok`` carrying ``result``; return that frame."""
        frame = await self.rpc_frame(index)
        self.kernel.receive({"kind": "rpc_ok", "id": frame["id"], "result": result})
        return frame

    async def init(self, **fields: Any) -> dict[str, Any]:
        frame = {"kind": "init", "generation": 1, "session": "default", "workspace": self.root,
                 "skills": EMPTY_SKILLS, "behavior": None, **fields}
        reply = await self.call(frame)
        if reply["kind"] != "ok":
            raise AssertionError(f"init failed: {reply}")
        return reply
