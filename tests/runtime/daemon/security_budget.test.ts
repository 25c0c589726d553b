// Budgets that say so and can be lifted, and replies that cannot flood the record, against the
// real daemon (started as `serve` starts it), the real workbench and the fake model over real
// HTTP, with budgets of a handful of requests an hour so nothing waits for a clock:
// - a spent hourly budget makes /health `degraded` naming it and when it frees, the conversation
//   gets one record saying so, and `klbr budget default --reset` (or `--raise N`), the real CLI,
//   lifts it so the next message is answered;
// - jobs looping `llm()` spend only the children's share, and the conversation is still answered;
// - a reply whose scratchpad text is past the cap is recorded as an excerpt naming an artifact
//   that holds the whole text.

import assert from "node:assert/strict";
import { join } from "node:path";
import { type RecordedRequest, startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { cli } from "../../_helpers/cli.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";

const PAUSED = "the agent's next model request waits";

const records = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

const waitRecord = (
  client: LaneClient,
  type: string,
  extra: (r: LaneRecord) => boolean = () => true,
) => client.waitFor<LaneRecord>((m) => m.kind === "record" && m.type === type && extra(m), 30_000);

/** Whether a chat request is the agent's own turn (its contract first), not a child call. */
const isTurn = (r: RecordedRequest) =>
  String(r.body?.messages?.[0]?.content ?? "").startsWith("You are the klbr agent");

/** Sends `text` and resolves with the `send` record that answers it. */
async function answered(client: LaneClient, text: string): Promise<LaneRecord> {
  const ack = await client.request({ kind: "input", client_msg_id: text, text });
  assert.equal(ack.kind, "ack", JSON.stringify(ack));
  return await waitRecord(client, "send", (r) => r.seq > (ack as { seq: number }).seq);
}

/** A daemon whose model answers each turn with a numbered send and each child call with text. */
async function withBudgetDaemon(
  budget: string,
  fn: (parts: {
    daemon: TestDaemon;
    client: LaneClient;
    fake: ReturnType<typeof startFakeOpenAI>;
  }) => Promise<void>,
): Promise<void> {
  let answers = 0;
  const fake = startFakeOpenAI({
    fallback: (request) =>
      isTurn(request)
        ? { toolCall: { code: `await local.send("answer ${++answers}")\nwait()` } }
        : { text: "child says hi", usage: "openai" },
  });
  const daemon = await startTestDaemon({ modelUrl: fake.url, extraConfig: budget });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await fn({ daemon, client, fake });
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
}

async function health(daemon: TestDaemon): Promise<Record<string, unknown>> {
  return await (await fetch(`${daemon.url}/health`)).json();
}

Deno.test("a spent hourly budget makes /health degraded naming it and when it frees, the conversation says so once, and `klbr budget default --reset` or `--raise` lifts it", async () => {
  await withBudgetDaemon("budget {\n model_requests_per_hour 2\n}\n", async (parts) => {
    const { daemon, client, fake } = parts;
    assert.equal((await answered(client, "one")).data.text, "answer 1");
    assert.equal((await answered(client, "two")).data.text, "answer 2");

    // The hour is spent: the third message is admitted, and its turn waits for the model.
    const ack = await client.request({ kind: "input", client_msg_id: "three", text: "three" });
    assert.equal(ack.kind, "ack");
    const paused = await waitRecord(client, "budget.exhausted", (r) => r.data.effect === PAUSED);
    assert.deepEqual([paused.data.what, paused.data.limit, paused.data.used], [
      "model_requests_per_hour",
      2,
      2,
    ]);
    assert.match(String(paused.data.until), /^\d{4}-\d\d-\d\dT/);
    assert.match(String(paused.data.lift), /deno task klbr budget default --reset/);

    const spent = await health(daemon);
    assert.equal(spent.status, "degraded");
    const reasons = (spent.reasons as string[]).join("\n");
    assert.match(
      reasons,
      /the budget model_requests_per_hour is spent \(2 of 2 used\): the agent's next model request waits until \d{4}-\d\d-\d\dT[\d:.]+Z \(in \d+ s\); deno task klbr budget default --reset lifts it now$/m,
    );
    const [over] = spent.over_budget as Record<string, unknown>[];
    assert.equal(over.what, "model_requests_per_hour");
    assert.equal(typeof over.frees_in_s, "number");
    assert.equal(fake.requests.filter((r) => r.method === "POST").length, 2);

    // The real CLI lifts it over the operator socket, and the paused turn answers.
    const reset = await cli("klbr", ["budget", "default", "--reset", "--state", daemon.stateDir]);
    assert.equal(reset.code, 0, reset.stderr);
    assert.match(reset.stdout, /^budget: the hourly windows start again now/m);
    assert.equal(
      (await waitRecord(client, "send", (r) => r.seq > paused.seq)).data.text,
      "answer 3",
    );
    const lifted = await health(daemon);
    assert.deepEqual([lifted.status, lifted.over_budget], ["ok", []]);
    const note = records(client, "operator").find((r) => r.data.op === "op.budget")!;
    assert.equal(note.data.reset, true);

    // A new pause is a new record; `--raise` lifts it for this run.
    assert.equal((await answered(client, "four")).data.text, "answer 4");
    await client.request({ kind: "input", client_msg_id: "five", text: "five" });
    const again = await waitRecord(
      client,
      "budget.exhausted",
      (r) => r.data.effect === PAUSED && r.seq > paused.seq,
    );
    const raise = await cli("klbr", [
      "budget",
      "default",
      "--raise",
      "3",
      "--state",
      daemon.stateDir,
    ]);
    assert.equal(raise.code, 0, raise.stderr);
    assert.match(raise.stdout, /model requests: 2 of 3 this hour/);
    assert.equal(
      (await waitRecord(client, "send", (r) => r.seq > again.seq)).data.text,
      "answer 5",
    );
    assert.equal(
      records(client, "budget.exhausted").filter((r) => r.data.effect === PAUSED).length,
      2,
    );

    // A mistyped limit is the caller's to fix: one line, exit 2, nothing sent.
    const bad = await cli("klbr", [
      "budget",
      "default",
      "--raise",
      "lots",
      "--state",
      daemon.stateDir,
    ]);
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /^klbr: cannot run budget: --raise needs a whole number of requests above 0 \(got "lots"\)\n$/,
    );
  });
});

const LOOPING_JOB = [
  "from klbr.llm import BudgetExceeded",
  "done = refused = 0",
  "for i in range(10):",
  "    try:",
  "        await llm(f'spin {i}')",
  "        done += 1",
  "    except BudgetExceeded:",
  "        refused += 1",
  "f'{done} done, {refused} refused'",
].join("\n");

Deno.test("jobs looping llm() spend the children's share of the hour and the conversation is still answered", async () => {
  await withBudgetDaemon("budget {\n model_requests_per_hour 6\n}\n", async (parts) => {
    const { daemon, client, fake } = parts;
    fake.enqueue({
      toolCall: { code: `await jobs.start(${JSON.stringify(LOOPING_JOB)}, name="loop")\nwait()` },
    });
    await client.request({ kind: "input", client_msg_id: "m1", text: "spin" });
    const done = await waitRecord(client, "job.state", (r) => r.data.to === "done");
    assert.equal((done.data.result as { value: string }).value, "'3 done, 7 refused'");
    const share = records(client, "budget.exhausted");
    assert.deepEqual(
      share.map((r) => [r.data.what, r.data.limit, r.data.used, r.data.effect]),
      [["child_model_requests_per_hour", 3, 3, "llm() and child agents are refused"]],
      "one record for seven refusals",
    );
    const spent = await health(daemon);
    assert.equal(spent.status, "degraded");
    assert.match((spent.reasons as string[]).join("\n"), /child_model_requests_per_hour/);

    // The job's completion wakes the agent, and the owner's next message is answered.
    await waitRecord(client, "send");
    assert.equal((await answered(client, "still there?")).data.text, "answer 2");
    const posts = fake.requests.filter((r) => r.method === "POST");
    assert.deepEqual([posts.filter(isTurn).length, posts.filter((r) => !isTurn(r)).length], [3, 3]);
    assert.equal(records(client, "budget.exhausted").some((r) => r.data.effect === PAUSED), false);
  });
});

Deno.test("a reply's scratchpad text past the cap is recorded as an excerpt naming an artifact with the whole text", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const whole = "a".repeat(60_000) + "b".repeat(60_000) + "THE END";
  fake.enqueue({
    text: [whole.slice(0, 60_000), whole.slice(60_000)],
    toolCall: { code: "wait()" },
  });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await client.request({ kind: "input", client_msg_id: "long", text: "think at length" });
    const pad = await waitRecord(client, "scratchpad");
    const text = String(pad.data.text);
    const artifact = pad.data.text_artifact as { id: string; bytes: number };
    assert.ok(text.length < 10_000, `the record keeps ${text.length} characters`);
    assert.ok(text.startsWith("aaaa") && text.endsWith("THE END"));
    assert.match(
      text,
      new RegExp(`the whole text is ${whole.length} bytes in artifact ${artifact.id}`),
    );
    assert.equal(artifact.bytes, whole.length);
    assert.equal(await Deno.readTextFile(join(daemon.stateDir, "artifacts", artifact.id)), whole);
    const reply = await waitRecord(client, "model.reply");
    assert.equal(reply.data.text_chars, whole.length);
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
});
