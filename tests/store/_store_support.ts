/**
 * What the store tests share: KlbrError assertions, temp dirs and a default-session store, a
 * hand-moved clock, a local input, a legacy file, and the children of the multi-process tests.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { DatabaseSync } from "node:sqlite";
import { KlbrError } from "../../runtime/core/mod.ts";
import { localDedupeKey } from "../../store/tables/dedupe_keys.ts";
import { type AdmitInput } from "../../store/tables/inputs.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import { openStore, type Store } from "../../store/store.ts";

/** The child that holds the owner lock until killed. */
export const HOLD_OWNER = new URL("./hold_owner.ts", import.meta.url).pathname;
/** The child that admits a burst of inputs and reports each acknowledgement. */
export const ADMIT_BURST = new URL("./admit_burst.ts", import.meta.url).pathname;

/** Two well-formed release ids. */
export const RELEASE_A = "a".repeat(64);
/** The second. */
export const RELEASE_B = "b".repeat(63) + "0";

/** Asserts that `fn` throws a KlbrError with `code` whose message equals or matches `message`. */
export function throwsKlbr(fn: () => unknown, code: string, message?: string | RegExp): KlbrError {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  return checkKlbr(caught, code, message);
}

/** Asserts that `fn` rejects with a KlbrError with `code` whose message equals or matches `message`. */
export async function rejectsKlbr(
  fn: () => Promise<unknown>,
  code: string,
  message?: string | RegExp,
): Promise<KlbrError> {
  let caught: unknown;
  try {
    await fn();
  } catch (error) {
    caught = error;
  }
  return checkKlbr(caught, code, message);
}

/** Asserts that `caught` is a KlbrError with `code` whose message equals or matches `message`. */
export function checkKlbr(caught: unknown, code: string, message?: string | RegExp): KlbrError {
  assert.ok(caught instanceof KlbrError, `expected a KlbrError ${code}, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  if (typeof message === "string") assert.equal(caught.message, message);
  if (message instanceof RegExp) assert.match(caught.message, message);
  return caught;
}

/** Runs `fn` with a fresh temp dir and removes it afterwards. */
export async function withDir(fn: (dir: string) => Promise<void> | void): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "klbr-store-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A clock tests move by hand. */
export function manualClock(): { now: number; clock: () => number } {
  const state = { now: Date.now(), clock: () => state.now };
  return state;
}

/** Opens a store with session `default`, runs `fn`, closes it. */
export async function withStore(
  fn: (store: Store, dir: string, time: { now: number }) => Promise<void> | void,
): Promise<void> {
  await withDir(async (dir) => {
    const time = manualClock();
    const store = openStore(dir, { clock: time.clock });
    try {
      ensureSession(store);
      await fn(store, dir, time);
    } finally {
      store.close();
    }
  });
}

/** The sha256 of a file's bytes, in hex. */
export function sha256(path: string): string {
  return createHash("sha256").update(Deno.readFileSync(path)).digest("hex");
}

/** The names in `dir`, sorted. */
export function listDir(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
}

/** A local input of session `session` numbered `n`. */
export function local(n: number | string, session = "default"): AdmitInput {
  return {
    session,
    sourceKind: "local",
    dedupeKey: localDedupeKey("cl_test", `m${n}`),
    conversationId: "local:main",
    author: "owner",
    body: { text: `hello ${n}` },
  };
}

/** The `n` column of a one-row count query. */
export function count(store: Store, sql: string, ...params: (string | number)[]): number {
  return (store.statement(sql).get(...params) as { n: number }).n;
}

/** Makes a SQLite file of an old agent: tables `messages` and `memories`, no klbr_meta. */
export function writeLegacyDb(path: string): void {
  const db = new DatabaseSync(path);
  db.exec(`CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT);
           CREATE TABLE memories (id INTEGER PRIMARY KEY, note TEXT);
           INSERT INTO messages (body) VALUES ('old'), ('older');`);
  db.close();
}

/** A line reader over a child's stdout. */
export function lines(stream: ReadableStream<Uint8Array>) {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    /** The next complete line, or `undefined` at end of stream. */
    async next(): Promise<string | undefined> {
      for (let reads = 0; reads < 1_000_000; reads++) {
        const newline = buffer.indexOf("\n");
        if (newline >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          return line;
        }
        const { value, done } = await reader.read();
        if (done) return undefined;
        buffer += value;
      }
      throw new Error("line reader did not finish");
    },
    cancel: () => reader.cancel(),
  };
}

/** Starts `script` in a Deno child with read, write, env and sys permissions, stdin and stdout piped. */
export function spawnDeno(script: string, ...args: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-sys",
      script,
      ...args,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
}
