/**
 * Typed ids: a prefix per kind, and string order that is creation order.
 *
 * Minting keeps process-wide state (the latest time seen), so tests that inject `now` use
 * times at or after the real clock and never move it far ahead.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { ID_PREFIXES, type IdKind, KlbrError, newId } from "../../../runtime/core/mod.ts";

const KINDS = Object.keys(ID_PREFIXES) as IdKind[];
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** Reads the millisecond time back out of an id's first 10 body characters. */
function timeOf(id: string): number {
  const body = id.slice(id.indexOf("_") + 1);
  let ms = 0;
  for (const char of body.slice(0, 10)) ms = ms * 32 + ALPHABET.indexOf(char);
  return ms;
}

function assertKlbr(error: unknown, code: string, message: string): true {
  assert.ok(error instanceof KlbrError, `expected a KlbrError, got ${String(error)}`);
  assert.equal(error.code, code);
  assert.equal(error.message, message);
  return true;
}

/** Asserts that string order equals the order of the array, with no duplicates. */
function assertCreationOrder(ids: string[]): void {
  for (let i = 1; i < ids.length; i++) {
    assert.ok(ids[i - 1] < ids[i], `id ${i} (${ids[i]}) does not sort after ${ids[i - 1]}`);
  }
}

Deno.test("`newId()` gives each kind its own prefix and a 26-character base32 body", () => {
  assert.deepEqual(ID_PREFIXES, {
    input: "in",
    frame: "fr",
    cell: "cell",
    event: "ev",
    generation: "gen",
    send: "snd",
    request: "rq",
    turn: "turn",
    client: "cl",
    call: "call",
    job: "job",
    draft: "dr",
    outbox: "ob",
    patch: "pa",
    timer: "tm",
    model_call: "mc",
    maintenance: "mt",
    trace: "tr",
    candidate: "cd",
  });
  assert.equal(new Set(Object.values(ID_PREFIXES)).size, KINDS.length);
  for (const kind of KINDS) {
    const id = newId(kind);
    assert.match(id, new RegExp(`^${ID_PREFIXES[kind]}_[0-9A-HJKMNP-TV-Z]{26}$`));
  }
});

Deno.test("`newId()` encodes the injected time in the first ten body characters", () => {
  const now = Date.now() + 5;
  const id = newId("event", now);
  assert.equal(timeOf(id), now);
});

Deno.test("`newId()` sorts ids in creation order across milliseconds", () => {
  const start = Date.now() + 10;
  const ids = Array.from({ length: 200 }, (_, i) => newId("input", start + i));
  assertCreationOrder(ids);
  assert.deepEqual(ids.map(timeOf), Array.from({ length: 200 }, (_, i) => start + i));
});

Deno.test("`newId()` sorts many ids minted within one millisecond in creation order", () => {
  const now = Date.now() + 300;
  const ids = Array.from({ length: 5000 }, () => newId("event", now));
  assertCreationOrder(ids);
  assert.ok(ids.every((id) => timeOf(id) === now));
});

Deno.test("`newId()` keeps creation order across kinds sharing one millisecond", () => {
  const now = Date.now() + 400;
  const ids = KINDS.map((kind) => newId(kind, now));
  // Prefixes differ, so compare the bodies: they come from one counter.
  assertCreationOrder(ids.map((id) => id.slice(id.indexOf("_") + 1)));
});

Deno.test("`newId()` keeps creation order when the clock steps backwards", () => {
  const now = Date.now() + 500;
  const first = newId("turn", now);
  const second = newId("turn", now - 60_000);
  const third = newId("turn", 0);
  assertCreationOrder([first, second, third]);
  // The time part stays at the latest time seen rather than going back.
  assert.equal(timeOf(second), now);
  assert.equal(timeOf(third), now);
});

Deno.test("`newId()` sorts ids in creation order for any non-decreasing clock", () => {
  fc.assert(
    fc.property(fc.array(fc.nat({ max: 3 }), { minLength: 1, maxLength: 60 }), (steps) => {
      let now = Date.now() + 600;
      const ids = steps.map((step) => newId("cell", now += step));
      assertCreationOrder(ids);
    }),
    { numRuns: 200 },
  );
});

Deno.test("`newId()` refuses a time that is negative, fractional or beyond 2^50 ms", () => {
  const bad: [number, string][] = [
    [-1, "-1"],
    [1.5, "1.5"],
    [Number.NaN, "NaN"],
    [Number.POSITIVE_INFINITY, "Infinity"],
    [2 ** 50, "1125899906842624"],
  ];
  for (const [now, shown] of bad) {
    assert.throws(
      () => newId("input", now),
      (error) =>
        assertKlbr(
          error,
          "invalid_input",
          `cannot mint input id: now must be a whole number of milliseconds from 0 to 2^50 - 1 (got ${shown})`,
        ),
    );
  }
});
