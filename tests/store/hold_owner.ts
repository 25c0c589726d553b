/**
 * Child process for the owner-lock tests: opens the store of `Deno.args[0]` as owner.
 *
 * Prints one JSON line, `{"ready":true,"pid":…}` or `{"error":code,"message":…}`. When ready it
 * holds the store until its stdin closes (or 60 s pass, so a lost parent never strands it),
 * then closes the store and exits 0. A refusal exits 3.
 *
 * @module
 */

import { isKlbrError } from "../../runtime/core/mod.ts";
import { openStore } from "../../store/store.ts";

const stateDir = Deno.args[0];
let store;
try {
  store = openStore(stateDir);
} catch (error) {
  const code = isKlbrError(error) ? error.code : "internal";
  console.log(JSON.stringify({ error: code, message: (error as Error).message }));
  Deno.exit(3);
}
console.log(JSON.stringify({ ready: true, pid: Deno.pid }));
const limit = setTimeout(() => Deno.exit(4), 60_000);
for await (const _ of Deno.stdin.readable) {
  // Held until the parent closes stdin.
}
clearTimeout(limit);
store.close();
