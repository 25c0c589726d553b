// End-to-end context management against the real daemon, the real workbench and the fake
// model over HTTP: a conversation that outgrows its route's budget is compacted automatically
// (the long model's summary used when it passes its check, the extractive one when the model
// fails), every request stays provider-valid and within budget, and a fact of the first turn
// that no request holds any more is found with history.search and read back exactly.

import assert from "node:assert/strict";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { openStore } from "../../../store/store.ts";
import { readCalibration } from "../../../store/tables/token_counts.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import {
  faithfulSummary,
  fakePromptTokens,
  isSummarizerRequest,
  startFakeOpenAI,
} from "../../fakes/openai_server.ts";
import {
  assertProviderValid,
  CONTEXT_TOKENS,
  ROUTE_FIELDS,
  turnRequests,
} from "../../_helpers/context.ts";

const records = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

const FILLER = "The owner describes the garden at length: roses, beans, a pond and a fence. "
  .repeat(5);
const FACT = "Remember this for later: the vault code is ZEPHYR-7731.";

Deno.test("a long conversation passes its budget and is compacted automatically; requests stay valid and within budget; history finds the first turn's fact", async () => {
  let summaries = 0;
  const fake = startFakeOpenAI({
    countTokens: true,
    // The first summary fails (the model is down): the extractive one is used and says why.
    summarizer: (request) =>
      summaries++ === 0 ? { status: 503, message: "the long model is down" } : {
        text: faithfulSummary(JSON.parse(request.body.messages[1].content)),
        usage: { prompt_tokens: fakePromptTokens(request.body) },
      },
    fallback: (request) => {
      const last = request.body.messages.at(-1).content as string;
      const n = /turn (\d+):/.exec(last)?.[1] ?? "x";
      return {
        text: `draft ${n}: I should answer turn ${n} briefly.`,
        toolCall: { code: `await local.send('reply ${n}')\nwait()` },
      };
    },
  });
  const daemon = await startTestDaemon({ modelUrl: fake.url, routeFields: ROUTE_FIELDS });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    let turns = 0;
    const say = async (text: string) => {
      turns++;
      await client.request({ kind: "input", client_msg_id: `t${turns}`, text });
      await client.waitFor((m) =>
        m.kind === "record" && m.type === "turn.ended" &&
        records(client, "turn.ended").length >= turns, 30_000);
    };
    const firstInput = `turn 1: ${FILLER}${FACT}`;
    await say(firstInput);
    // Bounded: two compactions come well before 80 turns at this budget.
    while (records(client, "context.compacted").length < 2 && turns < 80) {
      await say(`turn ${turns + 1}: ${FILLER}`);
    }
    const compacted = records(client, "context.compacted");
    assert.ok(compacted.length >= 2, `compacted ${compacted.length} times in ${turns} turns`);
    assert.equal(compacted[0].data.source, "extractive");
    assert.match(String(compacted[0].data.fallback_reason), /HTTP 503/);
    assert.equal(compacted[1].data.source, "model");

    // The fact is in no request any more: not whole, not in the summary's excerpts.
    const before = turnRequests(fake.requests).at(-1)!;
    assert.ok(!JSON.stringify(before.body.messages).includes("ZEPHYR-7731"));
    fake.enqueue({
      toolCall: {
        code: [
          'found = await history.search("vault code ZEPHYR")',
          // This cell's own code matches too: take the input.
          'hit = [h for h in found if h.kind == "input"][0]',
          "page = await history.read(hit.id, length=100000)",
          "print(hit.id, found.truncated)",
          "print(page.text, end='')",
          "wait()",
        ].join("\n"),
      },
    });
    await say(`turn ${turns + 1}: what was the vault code?`);
    const cell = records(client, "cell.finished").at(-1)!;
    const stdout = (cell.data.result as { stdout: string }).stdout;
    const [first, ...rest] = stdout.split("\n");
    assert.match(first, /^input:in_\w+ False$/);
    assert.equal(rest.join("\n"), firstInput, "read back exactly");

    // Every request was provider-valid and within the budget, as the fake counts tokens.
    for (const [i, request] of fake.requests.filter((r) => r.method === "POST").entries()) {
      const tokens = fakePromptTokens(request.body);
      assert.ok(tokens <= CONTEXT_TOKENS, `request ${i}: ${tokens} tokens`);
      if (!isSummarizerRequest(request)) assertProviderValid(request.body.messages, `request ${i}`);
    }

    // The summary the last request carries names covered sends as sent and drafts as drafts.
    const summary = turnRequests(fake.requests).at(-1)!.body.messages[1].content as string;
    assert.match(
      summary,
      /^\[runtime\] \[summary of \d+ earlier items, #1–#\d+; epoch 2, written by the long model\]/,
    );
    const [, sent, drafts] = summary.split(
      /\nMessages you sent \(these reached the conversation\):\n|\nYour scratchpad notes \(never delivered to anyone\):\n/,
    );
    const named = [...sent.matchAll(/- to local:default: reply (\d+) \(delivered\) \[send:\d+\]/g)];
    assert.ok(named.length > 0, "covered sends are named as delivered");
    for (const [, n] of named) {
      assert.ok(!sent.includes(`draft ${n}:`), `draft ${n} is not among the sent messages`);
    }
    assert.match(drafts, /- draft \d+: I should answer turn \d+ briefly\. \[item:\d+\]/);
    await client.close();
    assert.equal(await daemon.stop(), 0);
    // The main route's estimate was calibrated from the fake's prompt_tokens (a third of a
    // byte each, against the raw quarter): about 4/3 provider tokens per raw token.
    const store = openStore(daemon.stateDir, { create: false });
    try {
      const calibration = readCalibration(store, "default", "main")!;
      assert.ok(calibration.samples >= turns, `${calibration.samples} samples`);
      assert.ok(calibration.ratio > 1.25 && calibration.ratio < 1.45, `ratio ${calibration.ratio}`);
      assert.ok(readCalibration(store, "default", "long")!.samples >= 1, "long is calibrated too");
    } finally {
      store.close();
    }
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true });
    await Deno.remove(daemon.workspace, { recursive: true });
  }
});

Deno.test("a spooled cell output is searchable whole and read back by its bytes", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    fake.enqueue({ toolCall: { code: "print('y' * 20_000 + ' the quetzal nests here')" } }, {
      toolCall: {
        code: [
          'found = await history.search("quetzal nests")',
          'hit = [h for h in found if h.kind == "artifact"][0]',
          "page = await history.read(hit.id, offset=20_000, length=100)",
          "print(page.unit, page.total, repr(page.text), page.next_offset)",
          "wait()",
        ].join("\n"),
      },
    });
    await client.request({ kind: "input", client_msg_id: "art", text: "print a lot" });
    const read = await client.waitFor<LaneRecord>(
      (m) =>
        m.kind === "record" && m.type === "cell.finished" &&
        records(client, "cell.finished").length >= 2,
      30_000,
    );
    assert.equal(
      (read.data.result as { stdout: string }).stdout,
      "bytes 20024 ' the quetzal nests here\\n' None\n",
    );
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true });
    await Deno.remove(daemon.workspace, { recursive: true });
  }
});
