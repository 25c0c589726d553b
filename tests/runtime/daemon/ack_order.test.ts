/**
 * An ack is never sent before the commit that holds its input, also when many connections
 * send at once and admission groups their inputs into shared commits.
 *
 * The daemon's parts run in-process on a store wrapped to log each commit: which inputs
 * became durable in it. Each connection's sends are logged on the same timeline, so the test
 * compares commit order with ack order directly; every acknowledged input is also read back
 * through a second, read-only connection to the file at the moment its ack is sent. The same
 * timeline shows when an idle writer commits: a lone input at once, a batch after one
 * event-loop turn, with what another connection handed over in it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { nextMacrotask, type ServerMessage, SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { readServeSettings, startDaemon } from "../../../runtime/daemon/mod.ts";
import { LaneConnection, OperatorAuth } from "../../../runtime/lanes/mod.ts";
import { REPO_ROOT } from "../../../runtime/setup/mod.ts";
import { localDedupeKey } from "../../../store/tables/dedupe_keys.ts";
import { inputByDedupeKey } from "../../../store/tables/inputs.ts";
import { openStore, type Store } from "../../../store/store.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { tempDir } from "../../_helpers/temp.ts";
import { cgroupDirsOf } from "../../_helpers/cgroups.ts";

type Entry =
  | { kind: "commit"; n: number; keys: string[] }
  | { kind: "ack"; key: string; durableElsewhere: boolean }
  | { kind: "turn" };

/** A store that logs, after each outermost commit, which of `keys` it made durable. */
function recordingStore(inner: Store, keys: string[], timeline: Entry[]): Store {
  const pending = new Set(keys);
  let depth = 0;
  let commits = 0;
  return {
    get stateDir() {
      return inner.stateDir;
    },
    get path() {
      return inner.path;
    },
    get clock() {
      return inner.clock;
    },
    get owner() {
      return inner.owner;
    },
    get schemaVersion() {
      return inner.schemaVersion;
    },
    get inTransaction() {
      return inner.inTransaction;
    },
    statement: (sql) => inner.statement(sql),
    health: () => inner.health(),
    defer: (write, failed) => inner.defer(write, failed),
    onCommit: (listener) => inner.onCommit(listener),
    recordWritten: (session, record) => inner.recordWritten(session, record),
    // Queued writes (traces, progress records) hold no input: their commits need no log.
    flush: () => inner.flush(),
    close: () => inner.close(),
    transaction<T>(fn: () => T): T {
      depth++;
      let result: T;
      try {
        result = inner.transaction(fn);
      } finally {
        depth--;
      }
      if (depth === 0) {
        const made = [...pending].filter((key) => inputByDedupeKey(inner, "local", key));
        for (const key of made) pending.delete(key);
        timeline.push({ kind: "commit", n: ++commits, keys: made });
      }
      return result;
    },
  };
}

/** A daemon in-process on a recording store, and lane connections to it. */
interface RecordingDaemon {
  timeline: Entry[];
  /** A connection that said hello as `client`; each ack is logged with its input's key. */
  connect(client: string): Promise<LaneConnection>;
}

/**
 * Runs `fn` with a daemon whose commits log which of `keys` they made durable; each ack is
 * logged after them on the same timeline, with whether a second connection to the file saw
 * its input at that moment.
 */
async function withRecordingDaemon(
  keys: string[],
  fn: (daemon: RecordingDaemon) => Promise<void>,
): Promise<void> {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const stateDir = await tempDir("klbr-ack-order-");
  const workspace = await tempDir("klbr-ack-ws-");
  const configPath = join(stateDir, "config.kdl");
  await Deno.writeTextFile(
    configPath,
    `llm "main" {\n    url "${fake.url}"\n    model "fake"\n}\n`,
  );
  const timeline: Entry[] = [];
  const settings = await readServeSettings({ stateDir, configPath, port: 0 }, {
    ...Deno.env.toObject(),
    KLBR_WORKSPACE: workspace,
    KLBR_SKILLS_DIR: join(REPO_ROOT, "skills"),
  });
  const daemon = await startDaemon(settings, SILENT_LOGGER, {
    wrapStore: (store) => recordingStore(store, keys, timeline),
  });
  // A second connection to the same file sees only what was committed.
  const reader = openStore(stateDir, { create: false, owner: false });
  const connect = async (client: string) => {
    const connection = new LaneConnection(daemon.coordinator, {
      auth: {
        cookie: "absent",
        viewWithoutToken: false,
        checkToken: (token) =>
          new OperatorAuth({
            stateDir,
            token: daemon.coordinator.token,
            sessionKey: "0".repeat(64),
          }).checkToken(token),
        rotate: () => Promise.resolve(),
      },
      close: () => {},
      send: (message: ServerMessage) => {
        if (message.kind !== "ack") return;
        const key = localDedupeKey(client, message.request);
        const durableElsewhere = inputByDedupeKey(reader, "local", key)?.id ===
          message.input_id;
        timeline.push({ kind: "ack", key, durableElsewhere });
      },
    });
    await connection.receive(
      JSON.stringify({ kind: "hello", since: 0, token: daemon.coordinator.token, client }),
    );
    return connection;
  };
  try {
    await fn({ timeline, connect });
  } finally {
    reader.close();
    await daemon.coordinator.shutdown(1_000);
    // As serve drains: the daemon's cgroups go with it.
    await daemon.confinement.close();
    daemon.store.close();
    await fake.close();
  }
  assert.deepEqual(await cgroupDirsOf(stateDir), [], "the daemon's cgroups are removed with it");
}

/** An input message whose request id is its client message id, so its ack names its key. */
const inputText = (id: string) =>
  JSON.stringify({ kind: "input", request: id, client_msg_id: id, text: "hi" });

Deno.test("an ack is never sent before its commit, with many connections sending at once", async () => {
  const connections = 6;
  const perConnection = 40;
  const client = (c: number) => `client-${c}`;
  const keys: string[] = [];
  for (let c = 0; c < connections; c++) {
    for (let i = 0; i < perConnection; i++) keys.push(localDedupeKey(client(c), `m-${i}`));
  }
  await withRecordingDaemon(keys, async ({ timeline, connect }) => {
    const lanes = await Promise.all(
      Array.from({ length: connections }, (_, c) => connect(client(c))),
    );
    // Every connection sends its inputs a few at a time, interleaved with the others, and
    // none waits for its acks before sending more: they arrive while commits are running.
    const done: Promise<void>[] = [];
    for (let i = 0; i < perConnection; i += 4) {
      lanes.forEach((connection) => {
        const texts = [];
        for (let k = i; k < Math.min(i + 4, perConnection); k++) texts.push(inputText(`m-${k}`));
        done.push(connection.receiveAll(texts));
      });
      if (i % 8 === 0) await nextMacrotask();
    }
    await Promise.all(done);

    const acks = timeline.filter((e) => e.kind === "ack");
    assert.equal(acks.length, keys.length, "every input is acknowledged once");
    assert.equal(new Set(acks.map((a) => a.key)).size, keys.length);
    const committedAt = new Map<string, number>();
    timeline.forEach((entry, position) => {
      if (entry.kind === "commit") { for (const key of entry.keys) committedAt.set(key, position); }
    });
    timeline.forEach((entry, position) => {
      if (entry.kind !== "ack") return;
      const commit = committedAt.get(entry.key);
      assert.ok(commit !== undefined, `${entry.key} was committed`);
      assert.ok(commit < position, `the ack of ${entry.key} follows its commit`);
      assert.ok(entry.durableElsewhere, `${entry.key} is in the file when its ack is sent`);
    });
    // Group commit: commits were shared across connections, so fewer commits than inputs.
    const commits = timeline.filter((e) => e.kind === "commit" && e.keys.length > 0) as {
      keys: string[];
    }[];
    assert.ok(commits.length < keys.length, `${commits.length} commits for ${keys.length} inputs`);
    const shared = commits.some((commit) =>
      new Set(commit.keys.map((key) => key.split(":")[1])).size > 1
    );
    assert.ok(shared, "at least one commit held inputs of two connections");
  });
});

Deno.test("an idle writer commits a lone input at once, and gives a batch one event-loop turn to gather", async () => {
  const keys = ["lone", "b-1", "b-2", "late"].map((id) =>
    localDedupeKey(id === "late" ? "other" : "owner", id)
  );
  await withRecordingDaemon(keys, async ({ timeline, connect }) => {
    const owner = await connect("owner");
    const other = await connect("other");
    // Let the start's work settle: the writer is idle when the inputs come.
    for (let i = 0; i < 20; i++) await nextMacrotask();

    // A lone input is acknowledged before a macrotask queued ahead of it runs.
    const turn = nextMacrotask().then(() => timeline.push({ kind: "turn" }));
    await owner.receive(inputText("lone"));
    await turn;
    const loneAck = timeline.findIndex((e) => e.kind === "ack" && e.key === keys[0]);
    assert.ok(loneAck >= 0, "the lone input was acknowledged");
    assert.ok(
      loneAck < timeline.findIndex((e) => e.kind === "turn"),
      "its commit and ack did not wait for the event loop to turn",
    );

    // A batch waits one turn: an input another connection hands over in it joins the commit.
    for (let i = 0; i < 20; i++) await nextMacrotask();
    let late: Promise<void> | undefined;
    const handed = nextMacrotask().then(() => (late = other.receive(inputText("late"))));
    await owner.receiveAll([inputText("b-1"), inputText("b-2")]);
    await handed;
    await late;
    const commit = timeline.find((e) => e.kind === "commit" && e.keys.includes(keys[1]));
    assert.deepEqual(
      commit?.kind === "commit" ? [...commit.keys].sort() : [],
      [keys[1], keys[2], keys[3]].sort(),
      "the batch and the input handed over in the next turn share one commit",
    );
  });
});
