"""``read_artifact``: read back a long output the host spooled instead of showing whole.

When a cell prints more than about 8,000 characters, your records and your context keep only
its head and tail, with a line naming the artifact that holds all of it::

    [… 44000 characters not shown; the whole output is 50004 bytes in artifact 3fa2… …]

Nothing is discarded: ``await read_artifact("3fa2…", offset=0, length=65536)`` returns those
bytes. Artifacts are content-addressed and kept under a size budget; the oldest are evicted
first, so read what you need soon.
"""

from __future__ import annotations

import base64

from klbr import rpc
from klbr.awaited import api

__all__ = ["read_artifact"]


@api("read_artifact", "nothing was read")
async def read_artifact(artifact_id: str, offset: int = 0, length: int = 65_536) -> bytes:
    """Return up to ``length`` bytes of an artifact from ``offset`` (an empty result past its end).

    Raises ``klbr.rpc.RpcError`` with code ``not_found`` for an evicted or unknown artifact,
    and ``invalid_input`` for a malformed id or range.

    >>> text = (await read_artifact(artifact_id)).decode()  # doctest: +SKIP
    """
    if not isinstance(artifact_id, str):
        raise TypeError(f"cannot read artifact: id must be a string (got {type(artifact_id).__name__})")
    result = await rpc.call("artifact.read", {"id": artifact_id, "offset": offset, "length": length})
    if not isinstance(result, dict) or not isinstance(result.get("data_b64"), str):
        raise RuntimeError("cannot read artifact: the host replied without data")
    return base64.b64decode(result["data_b64"])
