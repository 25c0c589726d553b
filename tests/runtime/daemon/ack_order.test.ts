/**
 * An ack is never sent before the commit that holds its input, also when many connections
 * send at once and admission groups their inputs into shared commits.
 *
 * The daemon's parts run in-process on a store wrapped to log each commit: which inputs
 * became durable in it. Each connection's sends are logged on the same timeline, so the test
 * compares commit order with ack order directly; every acknowledged input is also read back
 * through a second, read-only connection to the file at the moment its ack is sent.
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

type Entry =
  | { kind: "commit"; n: number; keys: string[] }
  | { kind: "ack"; key: string; durableElsewhere: boolean };

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

Deno.test("an ack is never sent before its commit, with many connections sending at once", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const stateDir = await tempDir("klbr-ack-order-");
  const workspace = await tempDir("klbr-ack-ws-");
  const configPath = join(stateDir, "config.kdl");
  await Deno.writeTextFile(
    configPath,
    `llm "main" {\n    url "${fake.url}"\n    model "fake"\n}\n`,
  );
  const connections = 6;
  const perConnection = 40;
  const client = (c: number) => `client-${c}`;
  const keys: string[] = [];
  for (let c = 0; c < connections; c++) {
    for (let i = 0; i < perConnection; i++) keys.push(localDedupeKey(client(c), `m-${i}`));
  }
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
  try {
    const lanes = Array.from({ length: connections }, () => {
      const keyOf = new Map<string, string>();
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
          const key = keyOf.get(message.request)!;
          const durableElsewhere = inputByDedupeKey(reader, "local", key)?.id ===
            message.input_id;
          timeline.push({ kind: "ack", key, durableElsewhere });
        },
      });
      return { connection, keyOf };
    });
    await Promise.all(lanes.map(({ connection }) =>
      connection.receive(JSON.stringify({
        kind: "hello",
        since: 0,
        token: daemon.coordinator.token,
        client: client(lanes.findIndex((l) => l.connection === connection)),
      }))
    ));
    // Every connection sends its inputs a few at a time, interleaved with the others, and
    // none waits for its acks before sending more: they arrive while commits are running.
    const done: Promise<void>[] = [];
    for (let i = 0; i < perConnection; i += 4) {
      lanes.forEach(({ connection, keyOf }, c) => {
        const texts = [];
        for (let k = i; k < Math.min(i + 4, perConnection); k++) {
          const request = `r-${c}-${k}`;
          keyOf.set(request, localDedupeKey(client(c), `m-${k}`));
          texts.push(
            JSON.stringify({ kind: "input", request, client_msg_id: `m-${k}`, text: "hi" }),
          );
        }
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
  } finally {
    reader.close();
    await daemon.coordinator.shutdown(1_000);
    daemon.store.close();
    await fake.close();
  }
});
