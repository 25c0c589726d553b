// The peers speak the subset of the v2 lane the bench's driver uses, so one driver drives klbr
// and them: the durable server acknowledges each input once, answers a source key seen before
// with the first id, and replays what it committed; the replay server replays a klbr store.

import assert from "node:assert/strict";
import { join } from "node:path";
import { openLane } from "../lane_driver.ts";
import { startPeer } from "../peers/spawn.ts";

Deno.test("the durable peer server admits, deduplicates and replays through the lane driver", async () => {
  const dir = await Deno.makeTempDir({ prefix: "klbr-peer-" });
  const peer = await startPeer("durable_server.ts", [join(dir, "peer.sqlite")]);
  try {
    const { lane } = await openLane({ port: peer.port, token: "", client: "a" });
    const result = await lane.admitMany(50, { window: Infinity, prefix: "m" });
    assert.deepEqual([result.acks, result.admitted], [50, 50]);
    const first = await lane.admit("m-7", "again");
    const again = await lane.admit("m-7", "and again");
    assert.equal(first.duplicate, true);
    assert.equal(again.input_id, first.input_id);
    await lane.close();
    const { lane: late, replay } = await openLane({ port: peer.port, token: "", client: "b" });
    assert.deepEqual([replay.head, replay.records, replay.contiguous], [50, 50, true]);
    await late.close();
  } finally {
    await peer.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
