/**
 * What a failure of the disk or of SQLite means for the store, and what a person should do
 * about it: a full disk, an I/O error or a read-only file is `store_unavailable` (retriable once
 * the cause is fixed); a damaged file is `store_corrupt` (restore a backup). Any other SQLite
 * error (a constraint, a trigger's refusal) is not a store failure and passes through as is.
 *
 * @module
 */

import { KlbrError } from "../runtime/core/mod.ts";

/** The classes of store failure. */
export type StoreFailure = "full" | "corrupt" | "io" | "readonly";

// SQLite's primary result codes (the low byte of an extended code).
const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_CORRUPT = 11;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;
const SQLITE_NOTADB = 26;

const BY_MESSAGE: [RegExp, StoreFailure][] = [
  [/database or disk is full|No space left on device|os error 28/i, "full"],
  [/malformed|file is not a database|database corruption|os error 117/i, "corrupt"],
  [/disk I\/O error|os error 5\b/i, "io"],
  [
    /readonly database|Read-only file system|os error 30|unable to open database file|Operation not permitted|os error 1\b|Permission denied \(os error 13\)/i,
    "readonly",
  ],
];

/** Classifies an error thrown by SQLite or the file system; `undefined` when it is neither. */
export function storeFailure(error: unknown): StoreFailure | undefined {
  if (error instanceof KlbrError) {
    if (error.code === "store_corrupt") return "corrupt";
    return error.code === "store_unavailable"
      ? (error.cause as { failure?: StoreFailure } | undefined)?.failure ?? "io"
      : undefined;
  }
  if (!(error instanceof Error)) return undefined;
  const errcode = (error as { errcode?: unknown }).errcode;
  if (typeof errcode === "number") {
    switch (errcode & 0xff) {
      case SQLITE_FULL:
        return "full";
      case SQLITE_CORRUPT:
      case SQLITE_NOTADB:
        return "corrupt";
      case SQLITE_IOERR:
        return "io";
      case SQLITE_READONLY:
      case SQLITE_CANTOPEN:
        return "readonly";
    }
  }
  return BY_MESSAGE.find(([pattern]) => pattern.test(error.message))?.[1];
}

const ADVICE: Record<StoreFailure, string> = {
  full: "the disk is full; free space on it, then retry",
  io: "the disk reported an I/O error; check the disk, then retry",
  readonly:
    "the store cannot be written (read-only file system or file); make it writable, then retry",
  corrupt:
    "the store file is damaged; stop the daemon and restore a backup (deno task klbr restore <dir>)",
};

/**
 * The `KlbrError` a store failure becomes: `store_corrupt` for a damaged file, otherwise
 * `store_unavailable`; both answer HTTP 503, and the message says what to do.
 *
 * @example
 * ```ts
 * storeError("admit input", new Error("database or disk is full"), "full").code; // "store_unavailable"
 * ```
 */
export function storeError(action: string, error: unknown, failure: StoreFailure): KlbrError {
  const detail = error instanceof Error ? error.message : String(error);
  return new KlbrError(
    failure === "corrupt" ? "store_corrupt" : "store_unavailable",
    `cannot ${action}: ${ADVICE[failure]} (got ${detail.slice(0, 300)})`,
    {
      status: 503,
      cause: Object.assign(error instanceof Error ? error : new Error(detail), { failure }),
    },
  );
}

/** An injected `SQLITE_FULL`, as the `store-commit` fault point throws it. */
export function injectedSqliteFull(): Error {
  return Object.assign(new Error("database or disk is full (injected at store-commit)"), {
    code: "ERR_SQLITE_ERROR",
    errcode: SQLITE_FULL,
  });
}

const START_ADVICE: Record<Exclude<StoreFailure, "corrupt">, string> = {
  full: "the disk holding it is full; free space on it, then start again",
  io: "the disk reported an I/O error; check the disk, then start again",
  readonly:
    "it cannot be written (a read-only file system, or an immutable or read-only file); make it writable, then start again",
};

/**
 * The one-line refusal for a state directory that cannot be used at start, or `undefined`
 * when `error` is not a disk or store failure: `state_unusable` for a full, read-only or
 * failing disk, `store_corrupt` for a damaged store (restore a backup).
 *
 * @example
 * ```ts
 * unusableState("open store", ".klbr", new Error("Read-only file system (os error 30)"))?.code;
 * // "state_unusable"
 * ```
 */
export function unusableState(
  action: string,
  stateDir: string,
  error: unknown,
): KlbrError | undefined {
  if (error instanceof KlbrError) return undefined;
  const failure = storeFailure(error);
  if (failure === undefined) return undefined;
  const detail = (error instanceof Error ? error.message : String(error)).slice(0, 300);
  if (failure === "corrupt") {
    return new KlbrError(
      "store_corrupt",
      `cannot ${action}: the store in ${stateDir} is damaged (${detail}); restore a backup (deno task klbr restore <dir>) (got ${stateDir})`,
      { cause: error },
    );
  }
  return new KlbrError(
    "state_unusable",
    `cannot ${action}: the state directory ${stateDir} is unusable: ${
      START_ADVICE[failure]
    } (got ${detail})`,
    { cause: error },
  );
}
