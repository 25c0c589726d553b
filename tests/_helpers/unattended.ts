/**
 * Fixtures for the tests of unattended work: a store in a temp dir with a controllable clock,
 * a recorded release, a kernel generation with a cell (so rows can name their cell), and an
 * admission like the coordinator's (the input and `within` in one transaction).
 *
 * @module
 */

import { admitInput } from "../../store/tables/inputs.ts";
import { startCell } from "../../store/tables/cells.ts";
import { acceptFrame } from "../../store/tables/frames.ts";
import { startGeneration } from "../../store/tables/kernel_generations.ts";
import { recordRelease } from "../../store/tables/releases.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import { openStore, type Store } from "../../store/store.ts";
import { KlbrError } from "../../runtime/core/mod.ts";
import type { UnattendedInput } from "../../runtime/jobs/mod.ts";

/** A store whose clock the test sets: `clock.now` is the time every write sees. */
export interface ClockedStore {
  store: Store;
  dir: string;
  clock: { now: number };
  /** Closes the store and opens it again on the same directory, as a restart does. */
  reopen(): Store;
}

/** The release id the fixtures record. */
export const RELEASE = "a".repeat(64);

/** Runs `fn` with a fresh store (session `default`, one release), then removes everything. */
export async function withClockedStore(
  fn: (s: ClockedStore) => void | Promise<void>,
  start = 1_700_000_000_000,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "klbr-unattended-" });
  const clock = { now: start };
  const open = () => openStore(dir, { clock: () => clock.now });
  const s: ClockedStore = {
    store: open(),
    dir,
    clock,
    reopen() {
      s.store.close();
      s.store = open();
      return s.store;
    },
  };
  try {
    ensureSession(s.store);
    recordRelease(s.store, {
      id: RELEASE,
      path: `${dir}/releases/${RELEASE}`,
      fileCount: 1,
      byteCount: 1,
    });
    await fn(s);
  } finally {
    s.store.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** Records a kernel generation and one cell in it (in `frameId`, if given); returns its id. */
export function someCell(store: Store, session = "default", frameId: string | null = null): string {
  const { generation } = startGeneration(store, {
    session,
    reason: "test",
    skillsRevision: "s",
    behaviorRevision: null,
  });
  return startCell(store, { session, generation, code: "pass", frameId }).cellId;
}

let inputs = 0;

/** Admits a local input and accepts a frame for it, routed to `local:default`; returns its id. */
export function someFrame(store: Store, session = "default"): string {
  const input = admitInput(store, {
    session,
    sourceKind: "local",
    dedupeKey: `local:test:${++inputs}`,
    conversationId: "local:default",
    author: "owner",
    body: "hi",
  });
  return acceptFrame(store, {
    session,
    inputIds: [input.inputId],
    routing: { conversations: ["local:default"] },
    contextEpoch: 0,
    policyRevision: RELEASE,
  }).frameId;
}

/**
 * Admits like the coordinator: the input and `within` commit together; returns `false` (and
 * writes nothing) while `open.value` is false, and for each of the next `options.full.commits`
 * admissions, whose commit fails as on a full disk (the transaction is rolled back, and the
 * coordinator's admission hears the error and returns `false`).
 */
export function testAdmit(
  store: Store,
  open = { value: true },
  options: { full?: { commits: number } } = {},
) {
  const full = options.full ?? { commits: 0 };
  const admitted: string[] = [];
  const admit = (session: string, input: UnattendedInput, within: (inputId: string) => void) => {
    if (!open.value) return false;
    try {
      store.transaction(() => {
        const result = admitInput(store, { session, ...input });
        within(result.inputId);
        if (full.commits > 0) {
          full.commits--;
          throw new KlbrError("store_unavailable", "cannot commit: database or disk is full");
        }
        admitted.push(result.inputId);
      });
    } catch (error) {
      if (error instanceof KlbrError && error.code === "store_unavailable") return false;
      throw error;
    }
    return true;
  };
  return { admit, admitted, open, full };
}
