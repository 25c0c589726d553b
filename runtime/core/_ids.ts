/**
 * Typed, sortable identifiers with a prefix per kind.
 *
 * An id is `<prefix>_<26 chars>`: 10 characters of millisecond time and 16 of randomness in
 * Crockford base32 (ULID layout), so ids of one kind sort by creation time as strings.
 *
 * @module
 */

import { KlbrError } from "./_errors.ts";

/** Prefix for each kind of id. */
export const ID_PREFIXES = {
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
} as const;

/** The kinds of id klbr mints. */
export type IdKind = keyof typeof ID_PREFIXES;

/** A branded id string of one kind, e.g. `Id<"input">`. */
export type Id<K extends IdKind> = string & { readonly __kind: K };

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
let lastTime = -1;
let lastRandom: number[] = [];

function encodeTime(ms: number): string {
  let out = "";
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

function randomDigits(): number[] {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b % 32);
}

/**
 * Increments base32 digits; within one millisecond ids still sort by creation.
 * Returns `undefined` when every digit is already at its maximum.
 */
function increment(digits: number[]): number[] | undefined {
  const next = digits.slice();
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i] < 31) {
      next[i]++;
      return next;
    }
    next[i] = 0;
  }
  return undefined;
}

/** One past the largest time 10 base32 characters hold: 2^50 ms, in the year 37648. */
const TIME_LIMIT = 2 ** 50;

/**
 * Mints a new id of the given kind; ids minted later in this process sort after earlier ones.
 *
 * Within one millisecond, and when the clock steps backwards, the time part stays at the
 * latest time seen and the random part counts up, so string order stays creation order.
 *
 * @example
 * ```ts
 * const id = newId("input"); // "in_01JD3…"
 * ```
 * @throws {KlbrError} `invalid_input` when `now` is not a whole number of milliseconds in
 * [0, 2^50).
 */
export function newId<K extends IdKind>(kind: K, now: number = Date.now()): Id<K> {
  if (!Number.isInteger(now) || now < 0 || now >= TIME_LIMIT) {
    throw new KlbrError(
      "invalid_input",
      `cannot mint ${kind} id: now must be a whole number of milliseconds from 0 to 2^50 - 1 (got ${now})`,
    );
  }
  if (now <= lastTime) {
    const next = increment(lastRandom);
    if (next === undefined) {
      // 2^80 ids in one millisecond: move to the next millisecond rather than wrap around.
      lastTime++;
      lastRandom = randomDigits();
    } else {
      lastRandom = next;
    }
  } else {
    lastTime = now;
    lastRandom = randomDigits();
  }
  const random = lastRandom.map((d) => ALPHABET[d]).join("");
  return `${ID_PREFIXES[kind]}_${encodeTime(lastTime)}${random}` as Id<K>;
}
