// What the model is told, read from the request bodies of one session through the real daemon:
// the contract of the first turn (and its size), the notice after a workbench reset, a spooled
// output's excerpt, a child agent's own contract and tool, and a maintenance turn whose skill
// leaves message 0 of the turns after it byte-for-byte as before.

import assert from "node:assert/strict";
import { estimateTokens } from "../../../store/tables/provider_items.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, frameOf, type LaneClient, sendAndWait } from "../../_helpers/lane_client.ts";
import { type RecordedRequest, startFakeOpenAI } from "../../fakes/openai_server.ts";

const WAIT = { toolCall: { code: "wait()" } };

type Message = { role: string; content: string | null };
const messagesOf = (r: RecordedRequest) => r.body.messages as Message[];
const system = (r: RecordedRequest) => String(messagesOf(r)[0].content);

function finishedFrames(client: LaneClient): number {
  return client.messages.filter((m) => m.kind === "record" && m.type === "frame.finished").length;
}

Deno.test("the requests of a session tell the model what it needs: contract, reset, spooled output, child agent, maintenance", async () => {
  // Whatever is not scripted (the turn the child agent's completion wakes) just waits.
  const fake = startFakeOpenAI({ fallback: () => WAIT });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  const chats = () => fake.requests.filter((r) => r.method === "POST");
  try {
    // Turn 1: a long output, then wait.
    fake.enqueue({ toolCall: { code: 'print("x" * 20000)' } }, WAIT);
    await sendAndWait(client, "one");
    const [first, second] = chats();
    const contract = system(first);
    for (
      const needed of [
        "await local.send(text)",
        "await discord.send(text)",
        "delivered once",
        'key="…"',
        "coroutines: await every one",
        "call `wait()` in a cell",
        "await open_file(path)",
        "await run(argv, timeout=60)",
        'await history.search("words")',
        "await history.read(id)",
        "await read_artifact(id)",
        "display(png_bytes)",
        "Limits: 50 model steps a turn",
      ]
    ) assert.ok(contract.includes(needed), `the contract says ${needed}`);
    const tokens = estimateTokens(contract);
    assert.ok(tokens < 1_000, `the contract stays under 1,000 tokens (got ${tokens})`);
    // The spooled output reaches the model as an excerpt naming its artifact.
    const result = messagesOf(second).at(-1)!;
    assert.equal(result.role, "tool");
    assert.match(String(result.content), /in artifact [a-z0-9_]+/);
    // The tool the model sees says nothing of speech: its contract does.
    assert.doesNotMatch(JSON.stringify(first.body.tools), /local\.send/);

    // A reset between turns: the next request says the workbench was restarted.
    const reset = await client.request({ kind: "op.reset", request: "r1", session: "default" });
    assert.equal(reset.kind, "op.result", JSON.stringify(reset));
    fake.enqueue(
      { toolCall: { code: 'r = await agent("count to three")\nprint(r)\nwait()' } },
      { text: "one, two, three" },
    );
    await sendAndWait(client, "two");
    const [afterReset, child] = chats().slice(2);
    assert.match(
      String(messagesOf(afterReset).at(-1)!.content),
      /^\[runtime\] your workbench was restarted since your last step: variables and imports are gone\./,
    );
    assert.equal(system(afterReset), contract, "message 0 is byte-stable across turns");
    // The child agent reads a child's contract: no speech, how to return.
    assert.match(system(child), /^You are a child agent of klbr/);
    assert.match(system(child), /cannot speak to any conversation/);
    assert.doesNotMatch(system(child), /local\.send/);

    // The child agent's job wakes the agent when it ends: that turn finishes first.
    await client.waitFor(() => finishedFrames(client) === 3, 60_000);
    // A maintenance turn carries the skill; the turn after it has message 0 as before.
    const maintain = await client.request({
      kind: "op.maintain",
      request: "m1",
      session: "default",
    });
    assert.equal(maintain.kind, "op.result", JSON.stringify(maintain));
    await frameOf(client, String(maintain.kind === "op.result" && maintain.result.input_id));
    const maintenance = chats().at(-1)!;
    assert.match(system(maintenance), /This is a maintenance turn\./);
    await sendAndWait(client, "four");
    assert.equal(system(chats().at(-1)!), contract, "message 0 after the maintenance turn");
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
});
