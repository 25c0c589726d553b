// One item larger than the whole budget, through the real daemon, workbench and fake model: a
// cell that prints 1 MiB to stdout and to stderr on a route of 4,096 tokens. Its result (the bounded excerpt the turn
// keeps, about 8,000 characters of each stream) is more than the request can hold; the next request must
// still carry the call and its result, the result cut with a note, within the budget.

import assert from "node:assert/strict";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import {
  fakePromptTokens,
  isSummarizerRequest,
  type RecordedRequest,
  startFakeOpenAI,
} from "../../fakes/openai_server.ts";
import { assertProviderValid, turnRequests } from "../../_helpers/context.ts";

const records = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

/** A small local model's context. */
const CONTEXT_TOKENS = 4096;
const ROUTE_FIELDS = `    context_tokens ${CONTEXT_TOKENS}`;

type Message = { role: string; content: string | null; tool_call_id?: string };

/** A mebibyte on each stream: each is kept to its excerpt, together more than a request holds. */
const BIG_CELL = 'import sys\nprint("z" * 1048576)\nprint("e" * 1048576, file=sys.stderr)';

/** Runs {@linkcode BIG_CELL} on the first step, then waits. */
function model(request: RecordedRequest) {
  const messages = request.body.messages as Message[];
  const answered = messages.some((m) => m.role === "tool");
  return answered ? { toolCall: { code: "wait()" } } : { toolCall: { code: BIG_CELL } };
}

Deno.test("a cell result larger than the whole budget is cut with a note: the next request keeps the call and its result, within the budget", async () => {
  const fake = startFakeOpenAI({ countTokens: true, summarizer: "faithful", fallback: model });
  const daemon = await startTestDaemon({ modelUrl: fake.url, routeFields: ROUTE_FIELDS });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await client.request({ kind: "input", client_msg_id: "big", text: "print a mebibyte" });
    await client.waitFor((m) => m.kind === "record" && m.type === "turn.ended", 30_000);
    const requests = turnRequests(fake.requests);
    assert.ok(requests.length >= 2, `${requests.length} requests`);
    for (const [i, request] of fake.requests.filter((r) => r.method === "POST").entries()) {
      const tokens = fakePromptTokens(request.body);
      assert.ok(tokens <= CONTEXT_TOKENS, `request ${i}: ${tokens} tokens`);
      if (!isSummarizerRequest(request)) assertProviderValid(request.body.messages, `request ${i}`);
    }
    // The step after the cell sees its own call and the head of what it printed.
    const after = requests[1].body.messages as Message[];
    const result = after.find((m) => m.role === "tool");
    assert.ok(
      result !== undefined,
      `no result among ${
        JSON.stringify(after.slice(1).map((m) => [m.role, String(m.content).slice(0, 160)]))
      }`,
    );
    assert.match(String(result.content), /zzzz/);
    assert.match(String(result.content), /cut here to keep the request within its context budget/);
    const notes = after.filter((m) => m.role === "user").map((m) => String(m.content)).join("\n");
    assert.match(notes, /the newest items \(#\d+–#\d+\) are cut to fit this request/);
    assert.equal(records(client, "turn.ended").length, 1);
    assert.equal(records(client, "cell.finished").length, 2, "the cell did not run again");
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true });
    await Deno.remove(daemon.workspace, { recursive: true });
  }
});
