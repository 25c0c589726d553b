// A server's context refusal in a session whose token estimate is far under the server's count:
// the route is calibrated on English, then the owner writes CJK, which the server's tokenizer
// counts at about one token a character and klbr's estimate (UTF-8 bytes / 4) at three quarters.
// The refusal states the request's real size; the route learns it with the context size, so
// the rebuilt request fits at the first retry (the session's in-process loop, the fake model
// server counting as a BPE tokenizer does, the real store in a temp dir).

import assert from "node:assert/strict";
import { fakePromptTokens } from "../../fakes/openai_server.ts";
import { withSessionLoop } from "../../_helpers/session_loop.ts";

/** About 4,000 CJK characters: some 4,000 of the server's tokens, 3,000 of klbr's estimate. */
const CJK = "東京の天気は晴れです。明日は雨が降るでしょう。".repeat(180);

Deno.test("a context refusal of CJK text in an English-calibrated session is fitted at the first retry: the prompt size the refusal states calibrates the route", async () => {
  // In llama-server's words (`n_prompt_tokens`), vLLM's and OpenAI's.
  for (const words of ["llama.cpp", "vllm", "openai"] as const) {
    const quirks = { context: { tokens: 3_000, words }, tokenizer: "bpe" as const };
    const fake = {
      countTokens: true,
      quirks,
      fallback: () => ({ toolCall: { code: "send('done')\nwait()" } }),
    };
    await withSessionLoop({ fake }, async (loop) => {
      for (const [i, text] of ["hello there", "how is the weather?", CJK].entries()) {
        loop.admit(text);
        await loop.settle(`turn ${i + 1}`, () => loop.records("turn.ended").length === i + 1);
      }
      const sizes = loop.chats().map((chat) => fakePromptTokens(chat.body, "bpe"));
      const ended = loop.records("turn.ended").map((e) => String(e.reason ?? ""));
      assert.deepEqual(
        ended.filter((reason) => reason.startsWith("model failed")),
        [],
        `${words}: the CJK turn failed; requests (the server's count): ${sizes}`,
      );
      assert.equal(loop.records("send").length, 3, `${words}: every message answered`);
      const refused = sizes.filter((size) => size > 3_000);
      assert.equal(refused.length, 1, `${words}: refused once: ${sizes}`);
      const [adapted] = loop.records("route.adapted");
      assert.deepEqual([adapted.setting, adapted.to], ["context_tokens", "3000"]);
    });
  }
});
