/**
 * The page's lane socket, run in Deno against the daemon's own `createApp` and
 * `LaneConnection` over real WebSockets, with an in-memory host: resuming after a restart,
 * re-sending inputs, the session cookie, operator commands and giving up. A scripted socket covers
 * what a correct daemon never sends.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { KlbrError, type LaneRecord } from "../../runtime/core/mod.ts";
import type { KeyValueStore } from "../../ui/src/input_outbox.ts";
import {
  EARLIER_PAGE,
  HEAD_PAGE,
  LaneClient,
  type LaneClientOptions,
  REOPEN_GAP,
} from "../../ui/src/lane_client.ts";
import { RecordLog } from "../../ui/src/record_log.ts";
import { body } from "./_record_data.ts";
import { type LaneServer, MemoryLaneHost, startLaneServer } from "./_memory_lane_host.ts";

const UI_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "ui", "dist");

/**
 * A WebSocket as the page on the daemon's own origin opens it: that `Origin` and, once the
 * page traded the token at `POST /auth`, the session cookie.
 */
function browserSocket(cookie: (() => string) | undefined) {
  return class extends WebSocket {
    constructor(url: string) {
      const headers = {
        origin: `http://127.0.0.1:${new URL(url).port}`,
        ...(cookie === undefined ? {} : { cookie: cookie() }),
      };
      super(url, { headers } as unknown as string[]);
    }
  };
}

function memoryStorage(): KeyValueStore & { data: Map<string, string> } {
  const data = new Map<string, string>();
  return {
    data,
    getItem: (key) => data.get(key) ?? null,
    setItem: (key, value) => void data.set(key, value),
    removeItem: (key) => void data.delete(key),
  };
}

/**
 * Resolves once `predicate` holds, checked on every change of `client` and every 10 ms (for
 * conditions on the host side); fails after `timeoutMs`.
 */
function until(
  client: LaneClient,
  predicate: () => boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  if (predicate()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!predicate()) return;
      clearTimeout(timer);
      clearInterval(poll);
      off();
      resolve();
    };
    const timer = setTimeout(() => {
      clearInterval(poll);
      off();
      reject(
        new Error(`timed out waiting for ${what}; connection ${JSON.stringify(client.connection)}`),
      );
    }, timeoutMs);
    const poll = setInterval(check, 10);
    const off = client.subscribe(check);
  });
}

interface Setup {
  host: MemoryLaneHost;
  server: LaneServer;
  client: LaneClient;
  storage: ReturnType<typeof memoryStorage>;
  cleanup(): Promise<void>;
}

/**
 * A client against a fresh in-memory daemon. By default the page holds a session cookie;
 * `{ cookie: false }` is a page that has none (then `view` decides whether it may watch).
 */
async function setup(
  options: Partial<LaneClientOptions> = {},
  prepare?: (host: MemoryLaneHost, storage: ReturnType<typeof memoryStorage>) => void,
  page: { cookie?: boolean; view?: boolean } = {},
): Promise<Setup> {
  const host = new MemoryLaneHost();
  const storage = memoryStorage();
  prepare?.(host, storage);
  const state = {
    server: await startLaneServer(host, { uiDir: UI_DIR, viewWithoutToken: page.view }),
  };
  const client = new LaneClient({
    url: `ws://127.0.0.1:${state.server.port}/v2`,
    clientId: "web-test",
    storage,
    webSocket: browserSocket(page.cookie === false ? undefined : () => state.server.cookie()),
    minDelayMs: 20,
    maxDelayMs: 100,
    ...options,
  });
  return {
    host,
    get server() {
      return state.server;
    },
    set server(value) {
      state.server = value;
    },
    client,
    storage,
    async cleanup() {
      client.stop();
      await state.server.stop();
    },
  } as Setup;
}

function snapshotOf(records: LaneRecord[]): string {
  const log = new RecordLog("default");
  for (const record of records) log.add(record);
  return JSON.stringify(log.toSnapshot());
}

Deno.test("`LaneClient` resumes after a daemon restart from its last seq and keeps each record once", async () => {
  const s = await setup();
  try {
    for (const n of [1, 2, 3]) s.host.append("scratchpad", { text: `draft ${n}` });
    s.client.start();
    await until(
      s.client,
      () => s.client.log.size === 3 && s.client.connection.replayed,
      "3 records",
    );
    const port = s.server.port;
    await s.server.stop();
    await until(s.client, () => s.client.connection.phase === "unreachable", "unreachable");
    assert.ok(s.client.connection.downSince !== undefined);
    s.host.append("scratchpad", { text: "draft 4" });
    s.host.append("cell.started", { cell_id: "cell_1", code: "1" });
    const readsBefore = s.host.reads.length;
    s.server = await startLaneServer(s.host, { uiDir: UI_DIR, port });
    await until(s.client, () => s.client.log.size === 5, "5 records");
    assert.deepEqual(s.client.log.records().map((r) => r.seq), [1, 2, 3, 4, 5]);
    // The new connection asked only for what came after seq 3.
    assert.equal(s.host.reads[readsBefore], 3);
    assert.equal(s.client.connection.phase, "open");
    assert.equal(s.client.connection.downSince, undefined);
    assert.ok(s.client.connection.recoveredAt !== undefined, "the page can say the daemon is back");
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient` restores its log from storage and asks only for newer records", async () => {
  const s = await setup({}, (host, storage) => {
    for (const n of [1, 2, 3, 4]) host.append("scratchpad", { text: `draft ${n}` });
    storage.data.set("klbr:log:default", snapshotOf(host.sessions.get("default")!.slice(0, 2)));
  });
  try {
    assert.equal(s.client.log.size, 2, "the stored records are there before any socket opens");
    s.client.start();
    await until(s.client, () => s.client.log.size === 4, "4 records");
    assert.deepEqual(s.host.reads.slice(0, 1), [2]);
    s.client.persistNow();
    const stored = JSON.parse(s.storage.data.get("klbr:log:default")!);
    assert.deepEqual(stored.records.map((r: LaneRecord) => r.seq), [1, 2, 3, 4]);
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient` settles stored inputs whose record is in the stored log", () => {
  const storage = memoryStorage();
  const admitted: LaneRecord = {
    kind: "record",
    session: "default",
    seq: 1,
    at: 1,
    type: "input.admitted",
    data: body("input.admitted", {
      input_id: "in_1",
      dedupe_key: "local:web-test:m1",
      body: "hello",
      client_msg_id: "m1",
    }),
  };
  storage.data.set("klbr:log:default", snapshotOf([admitted]));
  storage.data.set(
    "klbr:outbox:default",
    JSON.stringify([
      {
        clientMsgId: "m1",
        request: "in-m1",
        text: "hello",
        conversation: "local:default",
        status: "sent",
      },
      {
        clientMsgId: "m2",
        request: "in-m2",
        text: "later",
        conversation: "local:default",
        status: "queued",
      },
    ]),
  );
  const client = new LaneClient({ url: "ws://127.0.0.1:9/v2", clientId: "web-test", storage });
  assert.deepEqual(client.outbox.list().map((i) => i.clientMsgId), ["m2"]);
  assert.equal(client.outbox.inputIdOf("m1"), "in_1");
  client.stop();
});

Deno.test("`LaneClient` starts over from seq 0 when the daemon's log is shorter than its own", async () => {
  const stale: LaneRecord[] = [1, 2, 3, 4, 5].map((seq) => ({
    kind: "record",
    session: "default",
    seq,
    at: 1,
    type: "stale",
    data: {},
  }));
  const s = await setup({}, (host, storage) => {
    host.append("scratchpad", { text: "new store 1" });
    host.append("scratchpad", { text: "new store 2" });
    storage.data.set("klbr:log:default", snapshotOf(stale));
  });
  try {
    s.client.start();
    await until(
      s.client,
      () => s.client.log.records().every((r) => r.type === "scratchpad") && s.client.log.size === 2,
      "the new store's records only",
    );
    // The daemon refused since 5 (beyond its head, 2) before reading; the page started over.
    assert.equal(s.host.reads[0], 0);
    assert.ok(!s.host.reads.includes(5));
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient` re-sends an unacknowledged input after a reload and the daemon admits it once", async () => {
  const s = await setup({}, (host, storage) => {
    // The page sent this input, the daemon admitted it, and the page reloaded before the ack.
    host.admit("default", "web-test", {
      kind: "input",
      request: "in-m1",
      client_msg_id: "m1",
      text: "hello",
      conversation: "local:default",
      author: "owner",
    });
    storage.data.set(
      "klbr:outbox:default",
      JSON.stringify([{
        clientMsgId: "m1",
        request: "in-m1",
        text: "hello",
        conversation: "local:default",
        createdAt: 1,
        status: "sent",
      }]),
    );
  });
  try {
    s.client.start();
    await until(s.client, () => s.host.admits.length === 2, "the re-send");
    await until(s.client, () => s.client.outbox.list().length === 0, "the outbox to settle");
    assert.equal(
      s.host.sessions.get("default")!.filter((r) => r.type === "input.admitted").length,
      1,
    );
    assert.equal(s.client.log.size, 1);
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient` writes each of three inputs typed before any ack once: three frames, not six", async () => {
  const written: string[] = [];
  // The page's socket (its Origin and session cookie) that counts the input frames it writes.
  const host = new MemoryLaneHost();
  const server = await startLaneServer(host, { uiDir: UI_DIR });
  const Socket = class extends WebSocket {
    constructor(url: string) {
      const headers = { origin: `http://127.0.0.1:${server.port}`, cookie: server.cookie() };
      super(url, { headers } as unknown as string[]);
    }
    override send(data: string | ArrayBufferLike | Blob | ArrayBufferView): void {
      if (typeof data === "string" && JSON.parse(data).kind === "input") written.push(data);
      super.send(data);
    }
  };
  const client = new LaneClient({
    url: `ws://127.0.0.1:${server.port}/v2`,
    clientId: "web-test",
    webSocket: Socket,
    minDelayMs: 20,
    maxDelayMs: 100,
  });
  try {
    client.start();
    await until(client, () => client.connection.phase === "open", "the socket to open");
    written.length = 0;
    // Typed one after another before any acknowledgement can arrive.
    client.sendInput("one");
    client.sendInput("two");
    client.sendInput("three");
    await until(client, () => client.outbox.list().length === 0, "the three records");
    assert.deepEqual(written.map((w) => JSON.parse(w).text), ["one", "two", "three"]);
    assert.deepEqual(host.admits.map((a) => a.input.text), ["one", "two", "three"]);
  } finally {
    client.stop();
    await server.stop();
  }
});

Deno.test("`LaneClient.sendInput()` while the daemon is down sends once it is back", async () => {
  const s = await setup();
  try {
    const port = s.server.port;
    await s.server.stop();
    s.client.start();
    await until(s.client, () => s.client.connection.phase === "unreachable", "unreachable");
    const item = s.client.sendInput("written offline");
    assert.equal(s.client.outbox.list()[0].status, "queued");
    s.server = await startLaneServer(s.host, { uiDir: UI_DIR, port });
    await until(s.client, () => s.client.outbox.list().length === 0, "the input's record");
    assert.deepEqual(s.host.admits.map((a) => [a.clientId, a.input.client_msg_id, a.input.text]), [
      ["web-test", item.clientMsgId, "written offline"],
    ]);
    assert.ok(s.client.outbox.inputIdOf(item.clientMsgId)?.startsWith("in_"));
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient` sends again after a restart an input the daemon refused as retriable while shutting down, admitted once", async () => {
  const s = await setup();
  const admitMany = s.host.admitMany.bind(s.host);
  let shuttingDown = true;
  // The daemon as it drains on SIGTERM: connected, but admitting nothing, `retriable: true`.
  // One input is refused for good, whatever the daemon's state.
  s.host.admitMany = (session, clientId, inputs) =>
    inputs.map((input) =>
      input.text === "refused for good"
        ? { error: new KlbrError("not_found", "cannot admit input: no such file") }
        : shuttingDown
        ? {
          error: new KlbrError("shutting_down", "cannot admit input: the daemon is shutting down"),
        }
        : admitMany(session, clientId, [input])[0]
    );
  try {
    s.client.start();
    await until(s.client, () => s.client.connection.phase === "open", "the socket to open");
    const item = s.client.sendInput("typed while the daemon stops");
    const refused = s.client.sendInput("refused for good");
    await until(
      s.client,
      () => s.client.outbox.list().every((i) => i.status === "failed"),
      "the refusals",
    );
    const port = s.server.port;
    await s.server.stop();
    await until(s.client, () => s.client.connection.phase === "unreachable", "unreachable");
    shuttingDown = false;
    s.server = await startLaneServer(s.host, { uiDir: UI_DIR, port });
    await until(
      s.client,
      () => s.client.outbox.list().length === 1,
      "the retriable input's record",
    );
    assert.deepEqual(
      s.host.sessions.get("default")!.map((r) => (r.data as { body: string }).body),
      ["typed while the daemon stops"],
    );
    assert.ok(s.client.outbox.inputIdOf(item.clientMsgId)?.startsWith("in_"));
    // A refusal that is not retriable stays until the owner retries or discards it.
    assert.deepEqual(
      s.client.outbox.list().map((i) => [i.clientMsgId, i.status, i.error?.code]),
      [[refused.clientMsgId, "failed", "not_found"]],
    );
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient` with the session cookie becomes operator and runs operator commands", async () => {
  const s = await setup();
  try {
    s.client.start();
    await until(s.client, () => s.client.connection.role === "operator", "the operator role");
    const status = await s.client.operate({ kind: "op.status", session: "default" });
    const sessions = status.sessions as Record<string, Record<string, unknown>>;
    assert.deepEqual(
      [sessions.default.behavior_epoch, sessions.default.active_release],
      [3, "rel_a1b2c3d4e5f6a7b8c9d0"],
    );
    const activated = await s.client.operate({
      kind: "op.activate",
      session: "default",
      epoch: 3,
      release: "rel_next",
    });
    assert.deepEqual(activated, { epoch: 4, release: "rel_next" });
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient.operate()` rejects with the daemon's code when the epoch moved", async () => {
  const s = await setup();
  try {
    s.client.start();
    await until(s.client, () => s.client.connection.role === "operator", "the operator role");
    await assert.rejects(
      s.client.operate({ kind: "op.activate", session: "default", epoch: 2, release: "rel_x" }),
      {
        name: "OperatorCommandError",
        code: "epoch_moved",
        message: "cannot activate release rel_x: epoch moved (expected 2, found 3)",
      },
    );
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient.operate()` as a read-only viewer is refused with `role_forbidden`", async () => {
  const s = await setup({}, undefined, { cookie: false, view: true });
  try {
    s.client.start();
    await until(s.client, () => s.client.connection.phase === "open", "open");
    assert.equal(s.client.connection.role, "viewer");
    await assert.rejects(s.client.operate({ kind: "op.stop", session: "default" }), {
      code: "role_forbidden",
      message: "cannot run op.stop: the operator role needs the token given at hello",
    });
    assert.equal(s.host.operations.length, 0);
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient.reconnect()` takes up the operator role with a new cookie and drops it without one", async () => {
  let cookie = "";
  const host = new MemoryLaneHost();
  const server = await startLaneServer(host, { uiDir: UI_DIR, viewWithoutToken: true });
  const client = new LaneClient({
    url: `ws://127.0.0.1:${server.port}/v2`,
    clientId: "web-test",
    webSocket: browserSocket(() => cookie),
    minDelayMs: 20,
    maxDelayMs: 100,
  });
  try {
    client.start();
    await until(client, () => client.connection.role === "viewer", "a viewer connection");
    // `POST /auth` refused a token: the page names the reason and stays a viewer.
    client.noteTokenRefused("cannot authorise: the operator token is wrong");
    assert.equal(client.tokenError, "cannot authorise: the operator token is wrong");
    assert.equal(client.connection.role, "viewer");
    // The page traded the right token for a cookie, then signed out (`DELETE /auth`).
    cookie = server.cookie();
    client.reconnect();
    assert.equal(client.tokenError, undefined);
    await until(client, () => client.connection.role === "operator", "the operator role");
    cookie = "";
    client.reconnect();
    await until(client, () => client.connection.role === "viewer", "the viewer role again");
  } finally {
    client.stop();
    await server.stop();
  }
});

Deno.test("`LaneClient` without token or cookie stops, with the daemon's reason, until it is let in", async () => {
  let cookie: string | undefined;
  let opened = 0;
  const host = new MemoryLaneHost();
  host.append("scratchpad", { text: "kept from strangers" });
  const server = await startLaneServer(host, { uiDir: UI_DIR });
  const client = new LaneClient({
    url: `ws://127.0.0.1:${server.port}/v2`,
    clientId: "web-test",
    webSocket: browserSocket(() => {
      opened++;
      return cookie ?? "";
    }),
    minDelayMs: 20,
    maxDelayMs: 100,
  });
  try {
    client.start();
    await until(client, () => client.connection.phase === "unauthorised", "the refusal");
    assert.equal(client.authError?.code, "token_missing");
    assert.match(client.authError?.message ?? "", /run `deno task klbr url`/);
    assert.equal(client.log.size, 0, "no record reached the page");
    // It schedules no retry: the same hello would be refused again.
    assert.equal(client.connection.retryAt, undefined);
    assert.equal(opened, 1, "one socket, no retry loop");
    // The page traded the token for a cookie: it reconnects and is let in.
    cookie = server.cookie();
    client.reconnect();
    await until(client, () => client.connection.role === "operator", "the operator role");
    await until(client, () => client.log.size === 1, "the record");
    assert.equal(client.authError, undefined);
  } finally {
    client.stop();
    await server.stop();
  }
});

Deno.test("`LaneClient.operate()` rejects `not_connected` while the socket is closed", async () => {
  const s = await setup();
  try {
    await assert.rejects(s.client.operate({ kind: "op.status" }), {
      code: "not_connected",
      message: "cannot send the command: not connected",
    });
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient.operate()` rejects `connection_lost` when the socket drops before the answer", async () => {
  const s = await setup();
  try {
    s.host.holdOps.add("op.drain");
    s.client.start();
    await until(s.client, () => s.client.connection.role === "operator", "the operator role");
    const pending = s.client.operate({ kind: "op.drain", session: "default" });
    pending.catch(() => {}); // awaited below; this keeps an early failure from going unhandled
    await until(s.client, () => s.host.operations.length === 1, "the daemon to receive it");
    await s.server.stop();
    await assert.rejects(pending, {
      code: "connection_lost",
      message:
        "cannot confirm the command: the connection dropped before the answer (it may have run)",
    });
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient` gives up after `giveUpAfterMs` and `retryNow()` starts again", async () => {
  const s = await setup({ giveUpAfterMs: 150, minDelayMs: 10, maxDelayMs: 30 });
  try {
    const port = s.server.port;
    await s.server.stop();
    s.client.start();
    await until(s.client, () => s.client.connection.phase === "gave_up", "giving up");
    assert.ok(s.client.connection.failures >= 2);
    s.server = await startLaneServer(s.host, { uiDir: UI_DIR, port });
    s.client.retryNow();
    await until(s.client, () => s.client.connection.phase === "open", "open again");
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient` keeps live tokens until the durable scratchpad of their turn arrives", async () => {
  const s = await setup();
  try {
    s.client.start();
    await until(s.client, () => s.client.connection.replayed, "replayed");
    s.host.emit({ kind: "token", session: "default", turn: "turn_1", text: "Hm", reasoning: true });
    s.host.emit({ kind: "token", session: "default", turn: "turn_1", text: "m.", reasoning: true });
    s.host.emit({ kind: "token", session: "default", turn: "turn_1", text: "Check" });
    s.host.emit({ kind: "token", session: "default", turn: "turn_1", text: "ing" });
    s.host.emit({ kind: "token", session: "default", turn: "turn_2", text: "other" });
    s.host.emit({
      kind: "cell.output",
      session: "default",
      cell: "cell_1",
      name: "stderr",
      text: "w",
    });
    await until(s.client, () => s.client.live.tokens.get("turn_1") === "Checking", "tokens");
    await until(s.client, () => s.client.live.cells.get("cell_1")?.stderr === "w", "cell output");
    // Reasoning streams apart from the text, and settles with its own record.
    assert.deepEqual([...s.client.live.reasoning], [["turn_1", "Hmm."]]);
    s.host.append("reasoning", body("reasoning", { text: "Hmm.", frame_id: "turn_1" }));
    await until(s.client, () => s.client.log.size === 1, "the reasoning record");
    assert.equal(s.client.live.reasoning.size, 0);
    assert.equal(s.client.live.tokens.get("turn_1"), "Checking");
    s.host.append("scratchpad", body("scratchpad", { text: "Checking", frame_id: "turn_1" }));
    s.host.append("cell.finished", body("cell.finished", { cell_id: "cell_1", outcome: "ok" }));
    await until(s.client, () => s.client.log.size === 3, "records");
    assert.deepEqual([...s.client.live.tokens], [["turn_2", "other"]]);
    assert.equal(s.client.live.cells.size, 0);
  } finally {
    await s.cleanup();
  }
});

/** A socket the test scripts by hand: for messages a correct daemon never sends. */
class ScriptedSocket {
  static last: ScriptedSocket | undefined;
  readyState = 0;
  sent: unknown[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((event: { data: string }) => void) | null = null;
  onclose: ((event: { code: number }) => void) | null = null;
  onerror: (() => void) | null = null;
  constructor(_url: string) {
    ScriptedSocket.last = this;
  }
  send(text: string): void {
    this.sent.push(JSON.parse(text));
  }
  close(): void {
    this.readyState = 3;
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.();
  }
  message(value: unknown): void {
    this.onmessage?.({ data: typeof value === "string" ? value : JSON.stringify(value) });
  }
}

/** A client over scripted sockets; `sockets` holds every socket it opened, in order. */
function scriptedClient(options: Partial<LaneClientOptions>) {
  const sockets: ScriptedSocket[] = [];
  class Counting extends ScriptedSocket {
    constructor(url: string) {
      super(url);
      sockets.push(this);
    }
  }
  const client = new LaneClient({
    url: "ws://x/v2",
    clientId: "web-test",
    webSocket: Counting as unknown as LaneClientOptions["webSocket"],
    ...options,
  });
  return { client, sockets };
}

Deno.test("`LaneClient` ignores malformed messages and records of another session", () => {
  const client = new LaneClient({
    url: "ws://x/v2",
    clientId: "web-test",
    webSocket: ScriptedSocket as unknown as LaneClientOptions["webSocket"],
  });
  try {
    client.start();
    const socket = ScriptedSocket.last!;
    socket.open();
    assert.deepEqual(socket.sent, [{
      kind: "hello",
      session: "default",
      since: "head",
      page: HEAD_PAGE,
      client: "web-test",
      batch: true,
    }]);
    socket.message({
      kind: "welcome",
      session: "default",
      role: "operator",
      head: 3,
      server: { version: "t" },
    });
    const good = { kind: "record", session: "default", seq: 1, at: 1, type: "x", data: {} };
    socket.message("{not json");
    socket.message([1, 2]);
    socket.message({ ...good, session: "other" });
    socket.message({ ...good, seq: -1 });
    socket.message({ ...good, data: "text" });
    socket.message({ kind: "surprise", anything: true });
    socket.message(good);
    socket.message(good);
    assert.deepEqual(client.log.records().map((r) => r.seq), [1]);
    socket.message({ kind: "error", code: "internal", message: "internal error" });
    assert.deepEqual(client.notices.map((n) => [n.code, n.message]), [[
      "internal",
      "internal error",
    ]]);
  } finally {
    client.stop();
  }
});

Deno.test("`LaneClient` applies a `records` batch in order, each record once, and skips what is not its own", () => {
  const client = new LaneClient({
    url: "ws://x/v2",
    clientId: "web-test",
    webSocket: ScriptedSocket as unknown as LaneClientOptions["webSocket"],
  });
  try {
    client.start();
    const socket = ScriptedSocket.last!;
    socket.open();
    socket.message({
      kind: "welcome",
      session: "default",
      role: "client",
      head: 4,
      server: { version: "t" },
    });
    const record = (seq: number) => ({
      kind: "record",
      session: "default",
      seq,
      at: seq,
      type: "scratchpad",
      data: { text: `draft ${seq}` },
    });
    socket.message({ kind: "records", session: "default", records: [record(1), record(2)] });
    // A batch repeating what the client holds adds only the new record; a bad member is
    // skipped, the rest kept; a batch of another session is ignored whole.
    socket.message({
      kind: "records",
      session: "default",
      records: [record(2), { ...record(3), data: "text" }, record(4)],
    });
    socket.message({ kind: "records", session: "other", records: [record(5)] });
    socket.message({ kind: "records", session: "default", records: "not a list" });
    assert.deepEqual(client.log.records().map((r) => r.seq), [1, 2, 4]);
    assert.equal(client.log.lastSeq, 4);
  } finally {
    client.stop();
  }
});

Deno.test("`LaneClient.persistNow()` drops a log too large to store rather than writing part of it", () => {
  const storage = memoryStorage();
  storage.data.set("klbr:log:default", "old");
  const client = new LaneClient({
    url: "ws://x/v2",
    clientId: "web-test",
    storage,
    webSocket: ScriptedSocket as unknown as LaneClientOptions["webSocket"],
  });
  try {
    client.start();
    const socket = ScriptedSocket.last!;
    socket.open();
    socket.message({
      kind: "welcome",
      session: "default",
      role: "operator",
      head: 2,
      server: { version: "t" },
    });
    const big = "x".repeat(2_100_000);
    for (const seq of [1, 2]) {
      socket.message({
        kind: "record",
        session: "default",
        seq,
        at: 1,
        type: "send",
        data: { text: big },
      });
    }
    client.persistNow();
    assert.equal(storage.data.has("klbr:log:default"), false);
    assert.equal(client.log.size, 2, "the page still shows what it cannot store");
  } finally {
    client.stop();
  }
});

Deno.test("`LaneClient` drops a socket that opens but never says welcome and tries again", async () => {
  const { client, sockets } = scriptedClient({ heartbeatMs: 30, minDelayMs: 10 });
  try {
    client.start();
    sockets[0].open();
    await until(client, () => sockets.length >= 2, "a second attempt");
    assert.equal(sockets[0].readyState, 3, "the silent socket was closed");
    assert.equal(client.connection.failures >= 1, true);
    assert.equal(sockets[0].onmessage, null, "the dropped socket can no longer deliver");
  } finally {
    client.stop();
  }
});

Deno.test("`LaneClient` drops a welcomed socket that falls silent and says so", async () => {
  const { client, sockets } = scriptedClient({ heartbeatMs: 20, minDelayMs: 1000 });
  try {
    client.start();
    sockets[0].open();
    sockets[0].message({
      kind: "welcome",
      session: "default",
      role: "operator",
      head: 0,
      server: { version: "t" },
    });
    assert.equal(client.connection.phase, "open");
    await until(client, () => client.connection.phase === "unreachable", "unreachable");
    assert.ok(sockets[0].sent.some((m) => (m as { kind: string }).kind === "ping"));
  } finally {
    client.stop();
  }
});

Deno.test("`LaneClient` opens a long session at its newest page and loads earlier pages on request, each record once", async () => {
  const total = HEAD_PAGE + EARLIER_PAGE + 50;
  const s = await setup({}, (host) => {
    for (let i = 1; i <= total; i++) host.append("scratchpad", { text: `draft ${i}` });
  });
  try {
    s.client.start();
    await until(s.client, () => s.client.connection.replayed, "the head page");
    assert.equal(s.client.log.size, HEAD_PAGE);
    assert.equal(s.client.log.firstSeq, total - HEAD_PAGE + 1);
    assert.equal(s.client.log.lastSeq, total);
    assert.equal(s.client.log.hasEarlierIn("local:default"), true);
    s.client.loadEarlier("local:default");
    s.client.loadEarlier("local:default"); // a second ask while one is on its way is a no-op
    assert.equal(s.client.loadingEarlier, true);
    await until(s.client, () => !s.client.loadingEarlier, "the first earlier page");
    assert.equal(s.client.log.size, HEAD_PAGE + EARLIER_PAGE);
    s.client.loadEarlier("local:default");
    await until(s.client, () => !s.client.loadingEarlier, "the last earlier page");
    assert.equal(s.client.log.hasEarlierIn("local:default"), false);
    const seqs = s.client.log.records().map((r) => r.seq);
    assert.deepEqual(seqs, Array.from({ length: total }, (_, i) => i + 1));
    // Live records still follow, once each.
    s.host.append("scratchpad", { text: "live" });
    await until(s.client, () => s.client.log.lastSeq === total + 1, "the live record");
    assert.equal(s.client.log.size, total + 1);
  } finally {
    await s.cleanup();
  }
});

Deno.test('`LaneClient` ends a "load earlier" the daemon refused, says why, and asks again on request', async () => {
  const total = HEAD_PAGE + 50;
  const s = await setup({}, (host) => {
    for (let i = 1; i <= total; i++) host.append("scratchpad", { text: `draft ${i}` });
  });
  const readRecords = s.host.readRecords.bind(s.host);
  let broken = false;
  // The store cannot be read for a while (an I/O error): the daemon refuses the page.
  s.host.readRecords = (session, since, limit) => {
    if (broken) {
      throw new KlbrError("store_unavailable", "cannot read records: disk I/O error");
    }
    return readRecords(session, since, limit);
  };
  try {
    s.client.start();
    await until(s.client, () => s.client.connection.replayed, "the head page");
    broken = true;
    s.client.loadEarlier("local:default");
    assert.equal(s.client.loadingEarlier, true);
    await until(s.client, () => !s.client.loadingEarlier, "the refused page to end");
    assert.deepEqual(
      s.client.earlierRefusal && [s.client.earlierRefusal.code, s.client.earlierRefusal.message],
      ["store_unavailable", "cannot read records: disk I/O error"],
    );
    assert.equal(s.client.log.size, HEAD_PAGE);
    // Asked again once the store reads: the page comes, and the refusal is gone.
    broken = false;
    s.client.loadEarlier("local:default");
    await until(s.client, () => s.client.log.size === total, "the earlier page");
    assert.equal(s.client.loadingEarlier, false);
    assert.equal(s.client.earlierRefusal, undefined);
  } finally {
    await s.cleanup();
  }
});

Deno.test("`LaneClient` drops a stored log far behind the head and opens at the head page instead", async () => {
  const stored: LaneRecord[] = [1, 2, 3].map((seq) => ({
    kind: "record",
    session: "default",
    seq,
    at: 1,
    type: "scratchpad",
    data: { text: `draft ${seq}` },
  }));
  const total = 3 + REOPEN_GAP + 10;
  const s = await setup({}, (host, storage) => {
    for (let i = 1; i <= total; i++) host.append("scratchpad", { text: `draft ${i}` });
    storage.data.set("klbr:log:default", snapshotOf(stored));
  });
  try {
    s.client.start();
    await until(
      s.client,
      () => s.client.connection.replayed && s.client.log.lastSeq === total,
      "the head page",
    );
    assert.equal(s.client.log.size, HEAD_PAGE);
    // It keeps none of the records between its stored log and the head page.
    assert.equal(s.client.log.firstSeq, total - HEAD_PAGE + 1);
  } finally {
    await s.cleanup();
  }
});
