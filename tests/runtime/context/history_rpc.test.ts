// The `history.*` RPCs as a cell calls them, against a real store: `history.read` pages a
// source's exact text, whatever characters it holds.

import assert from "node:assert/strict";
import { historyRpcs } from "../../../runtime/context/mod.ts";
import { bindRpcs } from "../../../runtime/kernel/mod.ts";
import { admitInputs } from "../../../store/tables/inputs.ts";
import type { Store } from "../../../store/store.ts";
import { withStore } from "../../_helpers/store.ts";

/** Calls `history.read` as the workbench does (arguments parsed, reply checked). */
async function read(
  store: Store,
  params: { id: string; offset?: number; length?: number },
): Promise<{ text: string; offset: number; next_offset: number | null }> {
  const bound = bindRpcs(historyRpcs, { store, session: "default" });
  const rpc = bound.find((b) => b.definition.name === "history.read")!;
  const ctx = {
    signal: new AbortController().signal,
    method: "history.read",
    parent: "x",
    cell: null,
  };
  return await rpc.run(params, ctx) as { text: string; offset: number; next_offset: number | null };
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
