/**
 * A catch-up to a client that stops reading waits at the high-water mark instead of growing
 * the daemon's buffers, does not hold back another client's catch-up, and goes on in order,
 * every record once, when the client reads again. The daemon is real, over a real socket, on
 * a log larger than the kernel's socket buffers.
 *
 * @module
 */

import assert from "node:assert/strict";
import { insertEvent } from "../../../store/tables/events.ts";
import { openStore } from "../../../store/store.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { rawSocket } from "../../_helpers/raw_http.ts";

const RECORDS = 24_000;
const BODY = "f".repeat(1_000);
/** The socket's unsent bytes at which a catch-up waits (runtime/lanes/_lane_socket.ts). */
const HIGH_WATER = 1 << 20;
/** A page is 1,000 records; each record's message is its body and under 200 bytes more. */
const PAGE_BYTES = 1_000 * (BODY.length + 200);

/** Reads server frames (unmasked text) off `read` until `done` says so; returns the texts. */
async function readTexts(
  read: () => Promise<Uint8Array | null>,
  done: (text: string) => boolean,
): Promise<string[]> {
  const texts: string[] = [];
  let buffer = new Uint8Array(0);
  const decoder = new TextDecoder();
  for (let reads = 0; reads < 100_000; reads++) {
    const chunk = await read();
    if (chunk === null) throw new Error(`the socket closed after ${texts.length} messages`);
    const joined = new Uint8Array(buffer.length + chunk.length);
    joined.set(buffer);
    joined.set(chunk, buffer.length);
    buffer = joined;
    for (;;) {
      if (buffer.length < 2) break;
      let length = buffer[1] & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buffer.length < 4) break;
        length = (buffer[2] << 8) | buffer[3];
        offset = 4;
      } else if (length === 127) {
        if (buffer.length < 10) break;
        length = new DataView(buffer.buffer, buffer.byteOffset + 2, 8).getUint32(4);
        offset = 10;
      }
      if (buffer.length < offset + length) break;
      assert.equal(buffer[0], 0x81, "a final text frame");
      const text = decoder.decode(buffer.subarray(offset, offset + length));
      texts.push(text);
      buffer = buffer.slice(offset + length);
      if (done(text)) return texts;
    }
  }
  throw new Error(`no end of the catch-up after ${texts.length} messages`);
}

Deno.test("a catch-up to a client that stops reading waits at the high-water mark and resumes in order", async () => {
  const first = await startTestDaemon();
  assert.equal(await first.stop(), 0);
  const store = openStore(first.stateDir, { create: false });
  try {
    store.transaction(() => {
      for (let i = 0; i < RECORDS; i++) insertEvent(store, "default", "test.filler", { i, BODY });
    });
  } finally {
    store.close();
  }
  const daemon = await first.restart();
  const stalled = await rawSocket(daemon.port);
  try {
    assert.equal(stalled.response.status, 101);
    await stalled.send(
      JSON.stringify({ kind: "hello", since: 0, batch: true, token: daemon.token, client: "slow" }),
    );
    // The stalled catch-up fills the kernel's buffers, then the daemon's up to the mark.
    let peak = 0;
    for (let i = 0; i < 200 && peak < HIGH_WATER; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      peak = (await (await fetch(`${daemon.url}/health`)).json()).lanes.peak_buffered_bytes;
    }
    assert.ok(peak >= HIGH_WATER, `the stalled client's catch-up reached the mark (${peak})`);
    // Another client is not held back by it.
    const reader = await connectLane({ port: daemon.port, token: daemon.token });
    const seqs = reader.messages.flatMap((m) => m.kind === "record" ? [m.seq] : []);
    const head = seqs.at(-1)!;
    assert.ok(head >= RECORDS, `the reader's catch-up reached ${head}`);
    assert.deepEqual(seqs, Array.from({ length: head }, (_, i) => i + 1));
    await reader.close();
    // The stalled client reads again: every record once, in order, then `replayed`.
    const texts = await readTexts(
      () => stalled.read(1 << 20),
      (text) => text.startsWith('{"kind":"replayed"'),
    );
    const messages = texts.map((text) => JSON.parse(text));
    assert.equal(messages[0].kind, "welcome");
    const got = messages.flatMap((m) =>
      m.kind === "records" ? m.records.map((r: { seq: number }) => r.seq) : []
    );
    assert.deepEqual(got, Array.from({ length: got.length }, (_, i) => i + 1));
    assert.ok(got.length >= head, `${got.length} records to the stalled client`);
    assert.equal(messages.at(-1).head, got.length);
    // What the daemon held unsent for either client stayed within one page of the mark.
    const { lanes } = await (await fetch(`${daemon.url}/health`)).json();
    assert.ok(lanes.peak_buffered_bytes <= HIGH_WATER + PAGE_BYTES, JSON.stringify(lanes));
  } finally {
    stalled.close();
    await daemon.stop();
  }
});
