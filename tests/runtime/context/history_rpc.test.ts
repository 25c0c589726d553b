// The `history.*` RPCs as a cell calls them, against a real store: `history.read` pages a
// source's exact text, whatever characters it holds, and reads on from where the opening cut an
// input, whatever its source; `history.search` refuses a query it cannot search whole, saying why.

import assert from "node:assert/strict";
import { isKlbrError } from "../../../runtime/core/mod.ts";
import { historyRpcs, renderInputs } from "../../../runtime/context/mod.ts";
import { bindRpcs } from "../../../runtime/kernel/mod.ts";
import { admitInputs, getInput } from "../../../store/tables/inputs.ts";
import type { Store } from "../../../store/store.ts";
import { admitDiscordMessage, withStore } from "../../_helpers/store.ts";

/** Calls `history.read` as the workbench does (arguments parsed, reply checked). */
async function read(
  store: Store,
  params: { id: string; offset?: number; length?: number },
): Promise<{ text: string; offset: number; total: number; next_offset: number | null }> {
  const bound = bindRpcs(historyRpcs, { store, session: "default" });
  const rpc = bound.find((b) => b.definition.name === "history.read")!;
  const ctx = {
    signal: new AbortController().signal,
    method: "history.read",
    parent: "x",
    cell: null,
  };
  return await rpc.run(params, ctx) as {
    text: string;
    offset: number;
    total: number;
    next_offset: number | null;
  };
}

Deno.test("history.read pages an emoji whole: no slice ends inside a character, every slice moves, and the slices join to the exact text", async () => {
  await withStore(async (store) => {
    const body = "ab😀cd🎉🎉e";
    const [outcome] = admitInputs(store, [{
      session: "default",
      sourceKind: "local",
      dedupeKey: "local:t:emoji",
      conversationId: "local:main",
      author: "owner",
      body,
    }]);
    const id = `input:${(outcome as { inputId: string }).inputId}`;
    for (const length of [1, 2, 3, 4]) {
      let offset: number | null = 0;
      let joined = "";
      for (let n = 0; offset !== null && n < body.length; n++) {
        const page: { text: string; next_offset: number | null } = await read(store, {
          id,
          offset,
          length,
        });
        assert.ok(page.text.isWellFormed(), `a slice of ${length} holds a lone surrogate`);
        assert.ok(page.text.length > 0, `a slice of ${length} at ${offset} is empty`);
        joined += page.text;
        offset = page.next_offset;
      }
      assert.equal(offset, null, `slices of ${length} never reached the end`);
      assert.equal(joined, body);
    }
  });
});

Deno.test("history.read of a Discord input the opening cut reads on exactly where the cut is, as its note says", async () => {
  await withStore(async (store) => {
    const text = 'The owner says "plan the garden":\n' + "roses, beans and a pond. ".repeat(80);
    const input = getInput(store, admitDiscordMessage(store, { text }))!;
    const opening = String(renderInputs([input], 200).content);
    const cut =
      /\n([^]*)\n\[… cut here: this input is (\d+) characters; await history\.read\("(input:[^"]+)", offset=(\d+)\) reads on from here\]$/
        .exec(opening);
    assert.ok(cut, `the opening names no read: ${opening}`);
    const [, shown, total, id, offset] = cut;
    const page = await read(store, { id, offset: Number(offset), length: 40 });
    assert.equal(page.total, Number(total), "the note and the read disagree on the input's length");
    const whole = await read(store, { id, length: 1_000_000 });
    assert.equal(whole.text.slice(0, Number(offset)), shown);
    assert.equal(page.text, text.slice(shown.length, shown.length + 40));
  });
});

Deno.test("history.search refuses a query of more than 32 words and one without a word the index keeps, each as invalid_input saying why", async () => {
  await withStore(async (store) => {
    const rpc = bindRpcs(historyRpcs, { store, session: "default" })
      .find((b) => b.definition.name === "history.search")!;
    const ctx = {
      signal: new AbortController().signal,
      method: "history.search",
      parent: "x",
      cell: null,
    };
    const refused = async (query: string, message: string) =>
      await assert.rejects(
        rpc.run({ query }, ctx),
        (e) => isKlbrError(e, "invalid_input") && e.message === message,
      );
    await refused(
      Array.from({ length: 40 }, (_, n) => `w${n}`).join(" "),
      "cannot search history: at most 32 words (got 40); shorten the query",
    );
    await refused("___", 'cannot search history: the query has no word to find (got "___")');
  });
});
