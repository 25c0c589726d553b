// The hot queries read only what they need: every statement that request building, start-up
// recovery, the sends lookup of a summary step and the outbox sender prepare is run here
// against a real store, and its EXPLAIN QUERY PLAN must not scan a table that grows with
// history. A scan of a partial index that holds only open work (pending inputs, open cells and
// frames, pending outbox rows) is allowed: those sets do not grow with history. The record types
// a turn looks for and seldom finds (a route's adaptations, the last word on a failing model) are
// searched through their own index, never by walking the session's log.

import { historyScans } from "../_helpers/query_plans.ts";
import { recordingStatements } from "../_helpers/store.ts";
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { buildRequest, compactContext } from "../../runtime/context/mod.ts";
import { SILENT_LOGGER } from "../../runtime/core/mod.ts";
import { recoverSession } from "../../runtime/session/mod.ts";
import { startCell } from "../../store/tables/cells.ts";
import { acceptFrame } from "../../store/tables/frames.ts";
import { admitInput, pendingInputs, pendingSummary } from "../../store/tables/inputs.ts";
import { currentGeneration } from "../../store/tables/kernel_generations.ts";
import { enqueueOutbox, moveOutbox, nextOutboxWork } from "../../store/tables/outbox.ts";
import { appendProviderItems } from "../../store/tables/provider_items.ts";
import {
  appendEvent,
  lastEventOfKinds,
  readEvents,
  readEventsOfKind,
} from "../../store/tables/events.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import { openStore, type Store } from "../../store/store.ts";
import { writeTurn } from "../_helpers/history_fixture.ts";

/** Tables whose rows grow with history. */
const GROWING = [
  "events",
  "inputs",
  "frames",
  "cells",
  "provider_items",
  "outbox",
  "context_summaries",
  "history_fts",
  "history_artifacts",
  "kernel_generations",
  "activations",
];

/** Partial indexes over open work only. */
const OPEN_WORK = [
  "outbox_work",
  "inputs_pending",
  "cells_open",
  "frames_open",
  "outbox_pending",
  "outbox_attempting",
];

/** A session as a crash leaves it: history, an open frame with a cell, one without, a dangling
 * tool call, an attempting and a pending outbox row. */
function crashedSession(store: Store): void {
  for (let n = 1; n <= 300; n++) writeTurn(store, "default", n, { discord: n % 50 === 0 });
  const admit = (key: string) =>
    admitInput(store, {
      session: "default",
      sourceKind: "local",
      dedupeKey: `local:${key}`,
      conversationId: "local:default",
      author: "owner",
      body: key,
    }).inputId;
  const ran = acceptFrame(store, {
    session: "default",
    inputIds: [admit("ran")],
    contextEpoch: 0,
    policyRevision: "r",
  });
  acceptFrame(store, {
    session: "default",
    inputIds: [admit("idle")],
    contextEpoch: 0,
    policyRevision: "r",
  });
  admit("pending");
  appendProviderItems(store, "default", ran.frameId, [
    { role: "user", content: "go" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{
        id: "dangling",
        type: "function",
        function: { name: "python", arguments: "{}" },
      }],
    },
  ]);
  startCell(store, {
    session: "default",
    generation: currentGeneration(store, "default")!.generation,
    frameId: ran.frameId,
    toolCallId: "dangling",
    code: "1",
  });
  const row = enqueueOutbox(store, {
    session: "default",
    conversation: "discord:1",
    destination: { channel_id: "1" },
    body: "in flight",
  });
  moveOutbox(store, row.id, "attempting");
  enqueueOutbox(store, {
    session: "default",
    conversation: "discord:1",
    destination: { channel_id: "1" },
    body: "waiting",
  });
}

Deno.test("hot queries never scan a table that grows with history (EXPLAIN QUERY PLAN)", async () => {
  const dir = await Deno.makeTempDir();
  const base = openStore(dir);
  try {
    ensureSession(base, "default");
    crashedSession(base);
    const { store, seen } = recordingStatements(base);
    const budget = { contextTokens: 8192, compactAt: 0.75, summaryShare: 0.1 };
    const deps = { store, log: SILENT_LOGGER, contextBudget: () => budget };

    // Start-up recovery, then the session's first look at its inputs.
    recoverSession(store, "default", { log: SILENT_LOGGER });
    pendingInputs(store, "default");
    pendingSummary(store, "default");
    readEvents(store, "default", { since: 100, limit: 1000 });
    // The outbox sender.
    nextOutboxWork(store);
    // Request building, a compaction step (its sends lookup), and building again.
    const parts = { route: "main", budget, system: "contract", opening: [] };
    const built = buildRequest(store, "default", parts);
    assert.ok(built.overCompact, "the history is long enough to compact");
    assert.ok(
      await compactContext(deps, "default", { keep: { tokens: built.limits.keep }, model: false }),
    );
    buildRequest(store, "default", parts);
    appendProviderItems(store, "default", null, [{ role: "user", content: "next" }]);

    const { scans, explained } = historyScans(`${dir}/runtime.sqlite`, seen, {
      growing: GROWING,
      openWork: OPEN_WORK,
    });
    assert.ok(explained > 30, `explained ${explained} statements`);
    assert.deepEqual(scans, []);
  } finally {
    base.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the per-turn lookups of rare record types read their own index, not the session's log", async () => {
  const dir = await Deno.makeTempDir();
  const base = openStore(dir);
  try {
    ensureSession(base, "default");
    for (let n = 1; n <= 50; n++) writeTurn(base, "default", n, {});
    const adapted = {
      route: "main",
      setting: "tool_calls" as const,
      to: "text",
      reason: "fenced twice",
    };
    appendEvent(base, "default", "route.adapted", adapted);
    for (let n = 51; n <= 100; n++) writeTurn(base, "default", n, {});
    const { store, seen } = recordingStatements(base);
    // What each request asks (the route's mode) and each turn's end (the last word on the model).
    const found = readEventsOfKind(store, "default", "route.adapted", 100);
    assert.deepEqual(found.map((event) => event.body), [adapted]);
    assert.equal(
      lastEventOfKinds(store, "default", ["model.failing", "model.recovered"]),
      undefined,
    );
    const db = new DatabaseSync(`${dir}/runtime.sqlite`, { readOnly: true });
    try {
      const plans = [...seen].filter((sql) => sql.startsWith("SELECT")).map((sql) =>
        (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[])
          .map((row) => row.detail).join("; ")
      );
      assert.equal(plans.length, 2);
      for (const plan of plans) assert.match(plan, /^SEARCH events USING INDEX events_rare_kinds/);
    } finally {
      db.close();
    }
  } finally {
    base.close();
    await Deno.remove(dir, { recursive: true });
  }
});
