// Requests within their budget, against real SQLite: the newest items that fit, never starting
// inside a tool group, the rest named as left out; the opening's inputs cut to their share
// with the exact read that gives them whole; a hook's oversized result cut to the budget; and
// the calibration that follows the provider's count.

import { withStore } from "../../_helpers/store.ts";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  buildRequest,
  type ContextBudget,
  fitMessages,
  messagesTokens,
  rawLimits,
  renderInputs,
} from "../../../runtime/context/mod.ts";
import type { InputRecord } from "../../../store/tables/inputs.ts";
import { appendProviderItems, lastItemIdx } from "../../../store/tables/provider_items.ts";
import { type Store } from "../../../store/store.ts";
import { recordCalibration } from "../../../store/tables/token_counts.ts";

const BUDGET: ContextBudget = { contextTokens: 4096, compactAt: 0.75, summaryShare: 0.1 };

/** Appends `groups`: each a user message or an assistant with `calls` tool calls and results. */
function appendGroups(store: Store, groups: { calls: number; size: number }[]) {
  let id = 0;
  for (const group of groups) {
    const text = "x".repeat(group.size);
    if (group.calls === 0) {
      appendProviderItems(store, "default", null, [{ role: "user", content: text }]);
      continue;
    }
    const ids = Array.from({ length: group.calls }, () => `c${++id}`);
    appendProviderItems(store, "default", null, [
      {
        role: "assistant",
        content: text,
        tool_calls: ids.map((c) => ({
          id: c,
          type: "function",
          function: { name: "python", arguments: "{}" },
        })),
      },
      ...ids.map((c) => ({ role: "tool", tool_call_id: c, content: text })),
    ]);
  }
}

Deno.test("`buildRequest()` stays within the budget, never starts inside a tool group, and always carries the newest item", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          calls: fc.integer({ min: 0, max: 3 }),
          size: fc.integer({ min: 0, max: 6000 }),
        }),
        {
          minLength: 1,
          maxLength: 40,
        },
      ),
      async (groups) => {
        await withStore((store) => {
          appendGroups(store, groups);
          const built = buildRequest(store, "default", {
            route: "main",
            budget: BUDGET,
            system: "contract",
            opening: [{ role: "user", content: "the opening" }],
          });
          assert.ok(built.rawTokens <= built.limits.request);
          assert.equal(built.rawTokens, messagesTokens(built.messages));
          const items = built.messages.slice(1, -1).filter((m) =>
            !(typeof m.content === "string" && m.content.startsWith("[runtime]"))
          );
          assert.notEqual(items[0]?.role, "tool");
          // The newest item is always carried: cut when its group alone passes the budget.
          assert.equal(built.carried.at(-1)?.idx, lastItemIdx(store, "default"));
          // Every tool result in the request follows its call.
          const calls = new Set<string>();
          for (const m of items) {
            for (const c of (m.tool_calls ?? []) as { id: string }[]) calls.add(c.id);
            if (m.role === "tool") assert.ok(calls.has(m.tool_call_id as string));
          }
          if (built.omitted !== null) {
            assert.match(
              String(built.messages[1].content),
              new RegExp(
                `${built.omitted.count} older items \\(#1–#${built.omitted.toIdx}\\) are left out`,
              ),
            );
          }
        });
      },
    ),
    { numRuns: 40 },
  );
});

Deno.test("`buildRequest()` reads only the newest items it can hold, however long the history", async () => {
  await withStore((store) => {
    appendGroups(store, Array.from({ length: 3000 }, () => ({ calls: 0, size: 200 })));
    const built = buildRequest(store, "default", {
      route: "main",
      budget: BUDGET,
      system: "contract",
      opening: [],
    });
    assert.ok(built.overCompact);
    assert.equal(built.omitted?.fromIdx, 1);
    const kept = built.messages.length - 2;
    assert.equal(built.omitted!.toIdx, 3000 - kept);
    assert.ok(kept > 10 && kept < 100, `kept ${kept}`);
  });
});

Deno.test("`renderInputs()` keeps a burst of large inputs within its share and names the exact reads", () => {
  const inputs: InputRecord[] = Array.from({ length: 120 }, (_, i) => ({
    id: `in_${i}`,
    session: "default",
    sourceKind: "local",
    dedupeKey: `local:${i}`,
    conversationId: "local:default",
    author: "owner",
    body: `${i} `.repeat(500_000),
    receivedAt: 1,
    admittedAt: 1,
    seq: i + 1,
    status: "consumed",
    frameId: "f",
    disposition: null,
    dispositionReason: null,
  }));
  const limit = 2000;
  const opening = renderInputs(inputs, limit);
  const text = String(opening.content);
  assert.ok(messagesTokens([opening]) < limit + 300, `${messagesTokens([opening])} tokens`);
  assert.match(text, /^\[input in_0 from owner in local:default\]\n0 0 0/);
  assert.match(text, /await history\.read\("input:in_0", offset=\d+\) reads on from here/);
  assert.match(
    text,
    /more inputs of this turn are not shown; read each with await history\.read\(id\): input:in_\d+/,
  );
  // A short input is given whole.
  const short = renderInputs([{ ...inputs[0], body: "hello" }], limit);
  assert.equal(short.content, "[input in_0 from owner in local:default]\nhello");
});

Deno.test("`renderInputs()` and `fitMessages()` never cut a character in half", () => {
  // An emoji outside the BMP is two UTF-16 units; a cut between them leaves a lone surrogate,
  // which JSON carries as `\ud83d` and servers refuse (nlohmann::json in llama-server, serde_json
  // in Rust servers: "lone leading surrogate").
  const body = `a${"😀".repeat(2_000)}`;
  const input: InputRecord = {
    id: "in_1",
    session: "default",
    sourceKind: "discord",
    dedupeKey: "discord:1",
    conversationId: "discord:42",
    author: "owner",
    body,
    receivedAt: 1,
    admittedAt: 1,
    seq: 1,
    status: "consumed",
    frameId: "f",
    disposition: null,
    dispositionReason: null,
  };
  for (let limit = 100; limit < 140; limit++) {
    const text = String(renderInputs([input], limit).content);
    assert.ok(text.isWellFormed(), `half a character in the opening within ${limit} tokens`);
    const offset = Number(/offset=(\d+)/.exec(text)?.[1]);
    assert.ok(body.slice(0, offset).isWellFormed(), `offset ${offset} is inside a character`);
    const fitted = fitMessages([{ role: "user", content: body }], limit + 200)!;
    assert.ok(String(fitted[0].content).isWellFormed(), `half a character in a fitted message`);
  }
});

Deno.test("`fitMessages()` cuts the longest contents to the budget and never drops a message", () => {
  const messages = [
    { role: "system", content: "contract" },
    { role: "user", content: "y".repeat(40_000) },
    { role: "assistant", content: null, tool_calls: [{ id: "c", type: "function" }] },
    { role: "tool", tool_call_id: "c", content: "z".repeat(20_000) },
  ];
  const fitted = fitMessages(messages, 3000)!;
  assert.ok(messagesTokens(fitted) <= 3000);
  assert.deepEqual(fitted.map((m) => m.role), ["system", "user", "assistant", "tool"]);
  assert.match(
    String(fitted[1].content),
    /\[… cut here to keep the request within its context budget\]$/,
  );
  assert.equal(fitMessages([{ role: "system", content: "x" }], 10), undefined);
});

Deno.test("calibration moves a route's limits after the provider reports more tokens", async () => {
  await withStore((store) => {
    const before = rawLimits(store, "default", "main", BUDGET);
    assert.equal(before.ratio, 1.25);
    assert.equal(before.request, Math.floor(4096 / 1.25));
    recordCalibration(store, "default", { route: "main", estimated: 1000, reported: 2000 });
    const after = rawLimits(store, "default", "main", BUDGET);
    assert.equal(after.request, 2048);
    assert.equal(after.compact, Math.floor(4096 * 0.75 / 2));
    assert.equal(rawLimits(store, "default", "long", BUDGET).ratio, 1.25, "per route");
  });
});
