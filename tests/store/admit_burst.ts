/**
 * Child process for the crash test: admits inputs to the store of `Deno.args[0]` in a loop and
 * prints each input id on its own line only after `admitInput` has returned (committed).
 *
 * The loop is bounded by `Deno.args[1]` admissions; the parent normally SIGKILLs it long before.
 *
 * @module
 */

import { localDedupeKey } from "../../store/tables/dedupe_keys.ts";
import { admitInput } from "../../store/tables/inputs.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import { openStore } from "../../store/store.ts";

const [stateDir, max = "100000"] = Deno.args;
const store = openStore(stateDir);
ensureSession(store);
const encoder = new TextEncoder();
for (let i = 0; i < Number(max); i++) {
  const { inputId } = admitInput(store, {
    session: "default",
    sourceKind: "local",
    dedupeKey: localDedupeKey("burst", `m${i}`),
    conversationId: "local:main",
    author: "owner",
    body: { text: `message ${i}` },
  });
  // A synchronous write: the line is out before the next admission starts.
  Deno.stdout.writeSync(encoder.encode(`${inputId}\n`));
}
store.close();
