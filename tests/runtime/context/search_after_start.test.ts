// The first search after a start does not index in its turn: a daemon that starts on a store
// with admitted inputs the history index does not hold yet indexes them itself, before any
// search and without any new input, so no turn pays for the catch-up.

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { admitInputs } from "../../../store/tables/inputs.ts";
import { openStore } from "../../../store/store.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";

/** Inputs behind the index's cursor, read from the store file beside the running daemon. */
function notIndexed(stateDir: string): number {
  const db = new DatabaseSync(join(stateDir, "runtime.sqlite"), { readOnly: true });
  try {
    const row = db.prepare(
      `SELECT coalesce((SELECT max(rowid) FROM inputs), 0) - last_rowid AS behind
       FROM history_cursors WHERE source = 'inputs'`,
    ).get() as { behind: number };
    return row.behind;
  } finally {
    db.close();
  }
}

Deno.test("a start indexes the inputs the history index does not hold yet, before any search", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    assert.equal(await daemon.stop(), 0);
    // A backlog larger than one indexing batch and not a multiple of it.
    const store = openStore(daemon.stateDir);
    try {
      admitInputs(
        store,
        Array.from({ length: 300 }, (_, n) => ({
          session: "default",
          sourceKind: "local" as const,
          dedupeKey: `local:backlog:m${n}`,
          conversationId: "local:main",
          author: "owner",
          body: `backlog input ${n}`,
        })),
      );
    } finally {
      store.close();
    }
    assert.equal(notIndexed(daemon.stateDir), 300);
    daemon = await daemon.restart();
    // Bounded wait for the daemon's own indexing; no input is sent and no cell searches.
    let behind = notIndexed(daemon.stateDir);
    for (let i = 0; i < 300 && behind > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      behind = notIndexed(daemon.stateDir);
    }
    assert.equal(behind, 0, "the start indexed the whole backlog, the part below a batch too");
    assert.ok(
      !fake.requests.some((r) => JSON.stringify(r.body).includes("history.search")),
      "no turn searched",
    );
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
});
