// Window "the disk fills while running": the state directory is on a small file system of its
// own, filled to the last byte while the daemon runs (twice: the first full disk releases the
// store's reserve, which the second fill takes too). Every input then gets an answer — a
// retriable `store_unavailable` error where its commit failed, never silence — `/health` says
// `failing` (judged by the commits that failed, not by a probe), and once space is freed the
// next commit succeeds, `/health` is ok and the inputs acknowledged meanwhile are answered.

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { fillDisk, mountSmallFs } from "./_loopback_fs.ts";
import { checkStore, nextMessageAnswered, waitRecord } from "./_checks.ts";

Deno.test("window disk-full: a full disk answers every input (store_unavailable, retriable), /health failing until space returns", async () => {
  const fs = await mountSmallFs(16 * 1024);
  await Deno.mkdir(`${fs.dir}/state`);
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url, stateDir: `${fs.dir}/state` })
    .catch(async (error) => {
      await fs.unmount();
      throw error;
    });
  try {
    let ballast = await fillDisk(fs.dir);
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    // The first full disk releases the store's reserve (`disk.reserve`): that input is refused,
    // the next commits find room. Filled again, the disk has no reserve left.
    const first = await client.request({ kind: "input", client_msg_id: "first", text: "x" });
    assert.equal(first.kind === "error" && first.code, "store_unavailable");
    const released = (await (await fetch(`${daemon.url}/health`)).json()).disk;
    assert.equal(released.state, "full");
    assert.equal(released.reserve_released, true);
    assert.ok(released.reserve_bytes > 0);
    await assert.rejects(Deno.stat(`${fs.dir}/state/disk.reserve`));
    ballast = await fillDisk(fs.dir);
    for (let i = 0; i < 200; i++) {
      client.send({ kind: "input", request: `f${i}`, client_msg_id: `f${i}`, text: `n${i}` });
    }
    await client.waitFor((m) => "request" in m && m.request === "f199");
    const replies = client.messages.filter((m) =>
      "request" in m && String(m.request).startsWith("f")
    );
    assert.equal(replies.length, 200, "every input was answered");
    const refused = replies.filter((m) => m.kind === "error");
    assert.ok(refused.length > 0, "commits failed on the full disk");
    for (const m of refused) {
      assert.equal(m.kind === "error" && m.code, "store_unavailable");
      assert.equal(m.kind === "error" && m.retriable, true);
      assert.match(
        m.kind === "error" ? m.message : "",
        /the disk is full; free space on it, then retry/,
      );
    }
    const acked = replies.flatMap((m) => m.kind === "ack" ? [m.input_id] : []);
    const failing = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(failing.status, "failing");
    assert.equal(failing.ok, false);
    assert.equal(failing.store.state, "failing");
    assert.equal(failing.store_writable, false);
    assert.match(failing.store.error, /disk is full/);
    assert.ok(
      failing.reasons.includes(
        `disk full: the file system of the state directory ${fs.dir}/state is full; free space there`,
      ),
      JSON.stringify(failing.reasons),
    );

    // Space comes back: the next commit succeeds and the daemon is healthy again.
    await Deno.remove(ballast);
    const next = await nextMessageAnswered(daemon, fake, "after");
    // A refused input is retriable: sent again, it is admitted once and answered.
    const retried = await client.request({ kind: "input", client_msg_id: "f0", text: "n0" });
    assert.equal(retried.kind, "ack");
    assert.equal((retried as { duplicate: boolean }).duplicate, false);
    acked.push((retried as { input_id: string }).input_id);
    // What was acknowledged while the disk filled is answered too.
    for (const id of acked) {
      await waitRecord(
        client,
        "frame.finished",
        (r) => (r.data.input_ids as string[]).includes(id),
      );
    }
    await client.close();
    assert.equal(await daemon.stop(), 0);
    checkStore(daemon.stateDir, [...acked, next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await fs.unmount();
  }
});
