/**
 * What every crash window must leave behind, checked on the store file itself once the
 * daemon has stopped: the file is intact, no acknowledged input was lost or duplicated and
 * each reached a final disposition, no cell ran twice, no effect happened twice, every tool
 * call has exactly one result, and nothing is left open.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import type { FakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon, type TestDaemonOptions } from "../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../_helpers/lane_client.ts";
import type { LaneRecord } from "../../runtime/core/mod.ts";

/** Reads the store read-only; closes it after `fn`. */
export function withDb<T>(stateDir: string, fn: (db: DatabaseSync) => T): T {
  const db = new DatabaseSync(join(stateDir, "runtime.sqlite"), { readOnly: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** Runs one query and returns its rows as plain objects. */
export function rows(db: DatabaseSync, sql: string, ...params: (string | number)[]) {
  return db.prepare(sql).all(...params).map((r) => ({ ...r }));
}

/** Every input id the stopped daemon's store holds (each was acknowledged: none is ever deleted). */
export function inputIds(stateDir: string): string[] {
  return withDb(stateDir, (db) => rows(db, "SELECT id FROM inputs").map((r) => String(r.id)));
}

/**
 * Checks the invariants every window guarantees, on a stopped daemon's store. `acked` are the
 * input ids whose `ack` a client received.
 */
export function checkStore(stateDir: string, acked: Iterable<string>): void {
  withDb(stateDir, (db) => {
    const integrity = rows(db, "PRAGMA integrity_check").map((r) => r.integrity_check);
    assert.deepEqual(integrity, ["ok"], "integrity_check");
    for (const id of acked) {
      const found = rows(db, "SELECT status, frame_id, disposition FROM inputs WHERE id = ?", id);
      assert.equal(found.length, 1, `acknowledged input ${id} is there exactly once`);
      const [input] = found;
      // Every acknowledged input reached a final disposition: consumed by a frame that was not
      // abandoned (a plan's ignored input is such a frame's, with its reason), or dismissed as
      // expired with its reason.
      if (input.status === "consumed") {
        const [frame] = rows(db, "SELECT state FROM frames WHERE id = ?", String(input.frame_id));
        assert.ok(["done", "failed"].includes(String(frame.state)), `${id}: frame ${frame.state}`);
      } else {
        assert.equal(
          input.status,
          "dismissed",
          `${id} reached a disposition (got ${input.status})`,
        );
        assert.ok(input.disposition, `${id} was dismissed with a disposition`);
      }
    }
    const twice = rows(
      db,
      "SELECT tool_call_id, count(*) AS n FROM cells WHERE tool_call_id IS NOT NULL GROUP BY tool_call_id HAVING n > 1",
    );
    assert.deepEqual(twice, [], "no tool call ran two cells");
    const repeated = rows(
      db,
      "SELECT body ->> 'send_id' AS id, count(*) AS n FROM events WHERE kind = 'send' GROUP BY id HAVING n > 1",
    );
    assert.deepEqual(repeated, [], "no send record is repeated");
    assert.deepEqual(rows(db, "SELECT id FROM frames WHERE state = 'open'"), [], "no open frame");
    assert.deepEqual(rows(db, "SELECT id FROM cells WHERE outcome IS NULL"), [], "no open cell");
    const orphans = rows(
      db,
      `SELECT i.id FROM inputs i JOIN frames f ON f.id = i.frame_id
       WHERE i.status = 'consumed' AND f.state = 'abandoned'`,
    );
    assert.deepEqual(orphans, [], "no consumed input is held by an abandoned frame");
    const results = rows(
      db,
      `SELECT j.value ->> 'id' AS id, (SELECT count(*) FROM provider_items t
         WHERE t.session_id = p.session_id AND t.role = 'tool' AND t.tool_call_id = j.value ->> 'id') AS n
       FROM provider_items p, json_each(p.message, '$.tool_calls') j WHERE p.role = 'assistant'`,
    );
    for (const r of results) assert.equal(r.n, 1, `tool call ${r.id} has exactly one result`);
  });
}

/** The records of one type a client has received. */
export function records(client: LaneClient, type?: string): LaneRecord[] {
  return client.messages.filter((m): m is LaneRecord =>
    m.kind === "record" && (type === undefined || m.type === type)
  );
}

/** Waits for a record of `type` matching `extra`. */
export function waitRecord(
  client: LaneClient,
  type: string,
  extra: (r: LaneRecord) => boolean = () => true,
  timeoutMs = 30_000,
): Promise<LaneRecord> {
  return client.waitFor<LaneRecord>(
    (m) => m.kind === "record" && m.type === type && extra(m),
    timeoutMs,
  );
}

/**
 * Starts a daemon with `KLBR_FAULTS` set, lets `act` drive it into the fault point, waits for
 * the daemon to kill itself there, and asserts from its log that the kill landed at `point`.
 */
export async function crashAt(
  point: string,
  options: TestDaemonOptions,
  act: (daemon: TestDaemon) => Promise<void>,
): Promise<TestDaemon> {
  const daemon = await startTestDaemon({
    ...options,
    env: { ...options.env, KLBR_FAULTS: `${point}=kill` },
  });
  await act(daemon);
  const status = await daemon.exited();
  assert.equal(status.signal, "SIGKILL", `the daemon was killed (got ${JSON.stringify(status)})`);
  assert.match(daemon.logs(), new RegExp(`klbr-fault: ${point} kill \\(hit 1\\)`));
  return daemon;
}

/**
 * Sends one more message after recovery and waits until its frame is done: the session is
 * healthy and answers. Returns the client, the ack and the finished frame.
 */
export async function nextMessageAnswered(
  daemon: TestDaemon,
  fake: FakeOpenAI,
  id: string,
): Promise<{ inputId: string }> {
  fake.enqueue({ toolCall: { code: `await local.send('answer to ${id}')\nwait()` } });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    const ack = await client.request({ kind: "input", client_msg_id: id, text: `next ${id}` });
    assert.equal(ack.kind, "ack", `the next message is acknowledged (got ${JSON.stringify(ack)})`);
    const inputId = (ack as { input_id: string }).input_id;
    const accepted = await waitRecord(
      client,
      "frame.accepted",
      (r) => (r.data.input_ids as string[]).includes(inputId),
    );
    const done = await waitRecord(
      client,
      "frame.finished",
      (r) => r.data.frame_id === accepted.data.frame_id,
    );
    assert.equal(done.data.state, "done");
    await waitRecord(client, "send", (r) => r.data.text === `answer to ${id}`);
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.ok, true, `healthy: ${JSON.stringify(health.reasons)}`);
    return { inputId };
  } finally {
    await client.close();
  }
}

/** Removes a daemon's state and workspace directories. */
export async function removeDirs(daemon: TestDaemon): Promise<void> {
  await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
  await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
}

/** Waits until the daemon's log matches `pattern` (bounded: at most `timeoutMs`). */
export async function waitForLog(
  daemon: TestDaemon,
  pattern: RegExp,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pattern.test(daemon.logs())) {
    if (Date.now() > deadline) throw new Error(`no ${pattern} in the log:\n${daemon.logs()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
