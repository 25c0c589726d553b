// The fake model server itself: a streamed answer, and a stall the client walks away from,
// served in a process of their own, print nothing on stderr — in particular not Deno's
// warning about `request.signal`'s legacy abort, which every test file using the fake used to
// print once.

import assert from "node:assert/strict";

const FAKE = new URL("./openai_server.ts", import.meta.url).href;

const SCRIPT = `
import { startFakeOpenAI } from ${JSON.stringify(FAKE)};
const fake = startFakeOpenAI();
const ask = (signal) => fetch(fake.url + "/chat/completions", {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ model: "fake-model", stream: true, messages: [] }),
  signal,
});
fake.enqueue({ text: "hello" }, { text: "stuck", stall: true });
const answer = await (await ask()).text();
if (!answer.includes("[DONE]")) throw new Error("no complete stream: " + answer);
const leaving = new AbortController();
const stalled = await ask(leaving.signal);
const reader = stalled.body.getReader();
await reader.read();
leaving.abort();
await reader.read().catch(() => {});
await fake.close();
console.log("served");
`;

Deno.test("the fake serves a stream and a stall the client leaves without a warning on stderr", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-config", "--allow-net=127.0.0.1", "-"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(SCRIPT));
  await writer.close();
  const { success, stdout, stderr } = await child.output();
  const err = new TextDecoder().decode(stderr);
  assert.equal(new TextDecoder().decode(stdout).trim(), "served", err);
  assert.ok(success, err);
  assert.equal(err, "");
});
