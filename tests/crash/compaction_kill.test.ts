// SIGKILL of the daemon during compaction, at the two points where it can be caught: while the
// long model writes the summary, and inside the commit transaction after every write (an
// env-gated fault point, KLBR_FAULT=compaction.commit). Each time the previous context is the
// one in use afterwards — the store's summary and epoch, and the request built from them — and
// the restarted daemon compacts again and goes on with valid requests.

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { buildRequest } from "../../runtime/context/mod.ts";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { latestSummary } from "../../store/tables/context_summaries.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import { openStore } from "../../store/store.ts";
import {
  assertProviderValid,
  CONTEXT_TOKENS,
  ROUTE_FIELDS,
  turnRequests,
} from "../_helpers/context.ts";
import { startTestDaemon, type TestDaemon } from "../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../_helpers/lane_client.ts";
import {
  faithfulSummary,
  type FakeOpenAI,
  fakePromptTokens,
  type FakeResponse,
  type RecordedRequest,
  startFakeOpenAI,
} from "../fakes/openai_server.ts";

const FILLER = "A long message about the weather, the trains and the harvest. ".repeat(6);

const faithful = (request: RecordedRequest): FakeResponse => ({
  text: faithfulSummary(JSON.parse(request.body.messages[1].content)),
  usage: { prompt_tokens: fakePromptTokens(request.body) },
});

const turnsEnded = (client: LaneClient) =>
  client.messages.filter((m) => m.kind === "record" && m.type === "turn.ended").length;

/** Resolves when `predicate()` holds or after `ms`, polling every 10 ms; no timer outlives it. */
function until(predicate: () => boolean, ms: number): { done: Promise<void> } {
  let poll: ReturnType<typeof setInterval> | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const done = new Promise<void>((resolve) => {
    const end = () => {
      clearInterval(poll);
      clearTimeout(timer);
      resolve();
    };
    poll = setInterval(() => predicate() && end(), 10);
    timer = setTimeout(end, ms);
  });
  return { done };
}

/** Sends inputs one turn at a time until `condition()` holds (at most 60 turns). */
async function converse(client: LaneClient, prefix: string, condition: () => boolean) {
  for (let n = 1; n <= 60 && !condition(); n++) {
    const ended = turnsEnded(client);
    await client.request({
      kind: "input",
      client_msg_id: `${prefix}${n}`,
      text: `${n}: ${FILLER}`,
    });
    // A turn blocked in compaction never ends; the condition says so instead.
    await until(() => turnsEnded(client) > ended || condition(), 30_000).done;
  }
  assert.ok(condition(), "the condition held within 60 turns");
}

/** The session's summary epoch and the summary text a request would carry, read directly. */
function storedContext(
  stateDir: string,
): { epoch: number; summaryEpoch: number | null; head: string } {
  const store = openStore(stateDir, { create: false });
  try {
    const budget = { contextTokens: CONTEXT_TOKENS, compactAt: 0.75, summaryShare: 0.1 };
    const built = buildRequest(store, "default", {
      route: "main",
      budget,
      system: "s",
      opening: [],
    });
    return {
      epoch: requireSession(store, "default").contextEpoch,
      summaryEpoch: latestSummary(store, "default")?.epoch ?? null,
      head: String(built.messages[1]?.content ?? ""),
    };
  } finally {
    store.close();
  }
}

function integrity(stateDir: string): string[] {
  const db = new DatabaseSync(join(stateDir, "runtime.sqlite"), { readOnly: true });
  try {
    return db.prepare("PRAGMA integrity_check").all().map((r) => String(r.integrity_check));
  } finally {
    db.close();
  }
}

/** Restarts on the same state without the fault, compacts, and checks every request. */
async function afterRestart(killed: TestDaemon, fake: FakeOpenAI, wantEpoch: number) {
  const daemon = await startTestDaemon({
    modelUrl: fake.url,
    routeFields: ROUTE_FIELDS,
    stateDir: killed.stateDir,
    workspace: killed.workspace,
  });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    const compacted = () =>
      client.messages.some((m) =>
        m.kind === "record" && m.type === "context.compacted" &&
        (m as LaneRecord).data.epoch === wantEpoch
      );
    await converse(client, "after", compacted);
    for (const [i, request] of turnRequests(fake.requests).entries()) {
      assertProviderValid(request.body.messages, `request ${i}`);
      assert.ok(fakePromptTokens(request.body) <= CONTEXT_TOKENS, `request ${i} within budget`);
    }
  } finally {
    await client.close();
    assert.equal(await daemon.stop(), 0);
  }
  assert.deepEqual(integrity(killed.stateDir), ["ok"]);
}

Deno.test("a SIGKILL while the long model writes the summary leaves the previous context in use", async () => {
  let summarizing!: () => void;
  const reached = new Promise<void>((resolve) => (summarizing = resolve));
  let calls = 0;
  const fake = startFakeOpenAI({
    countTokens: true,
    // The first summary never comes: the daemon is killed while it waits for it.
    summarizer: (request) =>
      calls++ === 0 ? (summarizing(), { stall: true, text: "…" }) : faithful(request),
    fallback: () => ({ text: "a draft", toolCall: { code: "await local.send('ok')\nwait()" } }),
  });
  const daemon = await startTestDaemon({ modelUrl: fake.url, routeFields: ROUTE_FIELDS });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    let stalled = false;
    reached.then(() => (stalled = true));
    await converse(client, "before", () => stalled);
    await daemon.kill();
    await client.closed;
    // The kill landed during compaction: the summarizer was asked, nothing was committed.
    assert.equal(calls, 1);
    assert.ok(!client.messages.some((m) => m.kind === "record" && m.type === "context.compacted"));
    const context = storedContext(daemon.stateDir);
    assert.deepEqual([context.epoch, context.summaryEpoch], [0, null]);
    assert.ok(!context.head.includes("[summary of"), "no summary stands in the request");
    await afterRestart(daemon, fake, 1);
  } finally {
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true });
    await Deno.remove(daemon.workspace, { recursive: true });
  }
});

Deno.test("a SIGKILL inside the compaction commit leaves the previous context in use", async () => {
  const fake = startFakeOpenAI({
    countTokens: true,
    summarizer: faithful,
    fallback: () => ({ text: "a draft", toolCall: { code: "await local.send('ok')\nwait()" } }),
  });
  // The first compaction commits; the second blocks inside its transaction, after its writes.
  const daemon = await startTestDaemon({
    modelUrl: fake.url,
    routeFields: ROUTE_FIELDS,
    env: { KLBR_FAULT: "compaction.commit", KLBR_FAULT_AFTER: "1" },
  });
  const marker = join(daemon.stateDir, "fault.compaction.commit");
  const blocked = () => {
    try {
      return Deno.statSync(marker).isFile;
    } catch {
      return false;
    }
  };
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await converse(client, "before", blocked);
    await daemon.kill();
    await client.closed;
    // The kill landed inside the second commit: its marker exists, its records do not.
    assert.equal(Number(Deno.readTextFileSync(marker)) > 0, true);
    const compacted = client.messages.filter((m) =>
      m.kind === "record" && m.type === "context.compacted"
    ) as LaneRecord[];
    assert.deepEqual(compacted.map((m) => m.data.epoch), [1]);
    const context = storedContext(daemon.stateDir);
    assert.deepEqual([context.epoch, context.summaryEpoch], [1, 1]);
    assert.match(context.head, /^\[runtime\] \[summary of \d+ earlier items, #1–#\d+; epoch 1, /);
    Deno.removeSync(marker);
    await afterRestart(daemon, fake, 2);
  } finally {
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true });
    await Deno.remove(daemon.workspace, { recursive: true });
  }
});
