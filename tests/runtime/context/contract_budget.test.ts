// The contract (the system message with its skills list) is the model's instructions: a request
// that must be cut to its route's budget cuts other content and keeps the contract whole, and a
// route too small for the contract alone fails the request with a message naming the route,
// its context, what the contract needs and the fix, rather than sending the contract's start
// (the session's in-process loop, the fake model server refusing past a small context, the
// real store in a temp dir).

import assert from "node:assert/strict";
import { withSessionLoop } from "../../_helpers/session_loop.ts";

/** `count` skill ids of about 52 characters each: the contract lists them all. */
function skills(count: number): { revision: string; bodies: Record<string, string> } {
  const bodies: Record<string, string> = {};
  for (let i = 0; i < count; i++) bodies[`skill_${i}_${"x".repeat(44)}`] = `# skill_${i}\n`;
  return { revision: "r".repeat(64), bodies };
}

/** The fake server: refuses past 2,000 tokens in llama-server's words; a turn sends and waits. */
const FAKE = {
  quirks: { context: { tokens: 2_000, words: "llama.cpp" as const } },
  fallback: () => ({ toolCall: { code: "send('done')\nwait()" } }),
};

type Chat = { body: { messages: { role: string; content: string | null }[] } };

/** The system message of each request the server got. */
function contracts(chats: Chat[]): string[] {
  return chats.map((chat) => String(chat.body.messages[0].content));
}

Deno.test("a request cut to a small route's budget keeps its contract whole and cuts the opening instead", async () => {
  await withSessionLoop({ fake: FAKE }, async (loop) => {
    loop.session.skillsLoaded(skills(45));
    // The input is shorter than the contract, and the two together pass what the server holds.
    loop.admit(`please read this: ${"words ".repeat(530)}`);
    await loop.settle("the turn ended", () => loop.records("frame.finished").length === 1);
    const chats = loop.chats() as Chat[];
    const [whole, ...after] = contracts(chats);
    assert.ok(after.length > 0, "the refused request was made again");
    assert.ok(
      after.every((sent) => sent === whole),
      `a cut contract was sent: …${after[0]?.slice(-200)}`,
    );
    assert.deepEqual(loop.records("send").map((s) => s.text), ["done"]);
    const opening = String(chats[1].body.messages.at(-1)!.content);
    assert.match(opening, /cut here to keep the request within its context budget/);
  });
});

Deno.test("a route too small for its contract alone fails the request naming the route, its context, the contract's need and the fix, and sends no cut contract", async () => {
  await withSessionLoop({ fake: FAKE }, async (loop) => {
    loop.session.skillsLoaded(skills(120));
    loop.admit("hello");
    // No retry changes the configuration: the session waits for the owner, the input pending.
    await loop.settle("the session stalled", () => loop.records("session.stalled").length === 1);
    const [whole, ...after] = contracts(loop.chats() as Chat[]);
    assert.ok(after.every((sent) => sent === whole), "a cut contract was sent");
    assert.equal(after.length, 0, "refused once, and not asked again with a cut contract");
    const [ended] = loop.records("turn.ended");
    assert.match(
      String(ended.reason),
      /^cannot build a request for llm "main": its contract \(the system message and its skills list\) alone needs about \d+ tokens, more than the 2000 its requests may hold \(context_tokens 2000, learned from its server; configured 32768\); raise context_tokens of llm "main" \(and the server's context\), or remove skills \(got \d+ tokens for 2000\)$/,
    );
    const [failing] = loop.records("model.failing");
    assert.deepEqual([failing.route, failing.error], ["main", ended.reason]);
    assert.equal(loop.records("frame.abandoned").length, 1, "the input stays pending");
    assert.deepEqual(loop.records("send"), []);
  });
});
