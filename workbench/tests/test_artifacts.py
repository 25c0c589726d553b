"""Tests of ``read_artifact``: one host RPC, bytes decoded from base64."""

import base64
import unittest

from tests.support import KernelCase


class ArtifactTest(KernelCase):
    async def test_read_artifact_sends_one_rpc_and_decodes_bytes(self) -> None:
        """`read_artifact()` sends artifact.read {id, offset, length} and returns the bytes."""
        await self.init()
        self.send({"kind": "execute", "id": "e1", "cell": "c1",
                   "code": "await read_artifact('ab' * 32, offset=5, length=3)"})
        frame = await self.rpc_frame()
        self.assertEqual((frame["method"], frame["params"]),
                         ("artifact.read", {"id": "ab" * 32, "offset": 5, "length": 3}))
        self.kernel.receive({"kind": "rpc_ok", "id": frame["id"],
                             "result": {"data_b64": base64.b64encode(b"xyz").decode(), "bytes": 8}})
        self.assertEqual((await self.result_of())["value"], "b'xyz'")

    async def test_read_artifact_refuses_a_non_string_id(self) -> None:
        """`read_artifact()` refuses an id that is not a string before any frame is sent."""
        await self.init()
        error = (await self.execute("await read_artifact(42)"))["error"]
        self.assertEqual((error["type"], error["message"]),
                         ("TypeError", "cannot read artifact: id must be a string (got int)"))
        self.assertEqual(self.wire.of_kind("rpc"), [])


if __name__ == "__main__":
    unittest.main()
