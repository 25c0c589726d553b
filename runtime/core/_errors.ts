/**
 * The one error class every klbr domain throws for bad input or a refused operation.
 *
 * Callers branch on {@linkcode KlbrError.code}, never on the message text. Messages read
 * "cannot <action>: <reason> (got <value>)".
 *
 * @module
 */

/** Every stable error code. A closed union: add a code here before throwing it. */
export type KlbrErrorCode =
  | "invalid_input"
  | "usage"
  | "port_in_use"
  | "no_daemon"
  | "invalid_config"
  | "not_found"
  | "epoch_moved"
  | "release_invalid"
  | "sqlite_too_old"
  | "foreign_store"
  | "owner_locked"
  | "state_missing"
  | "state_unusable"
  | "store_unavailable"
  | "store_corrupt"
  | "frame_truncated"
  | "frame_oversize"
  | "frame_utf8"
  | "frame_json"
  | "frame_unknown_kind"
  | "frame_invalid"
  | "role_forbidden"
  | "path_escape"
  | "path_invalid"
  | "worker_failed"
  | "worker_timeout"
  | "cell_failed"
  | "hook_failed"
  | "token_missing"
  | "token_malformed"
  | "token_wrong"
  | "token_revoked"
  | "since_beyond_head"
  | "too_many_connections"
  | "too_many_attempts"
  | "sandbox_unavailable"
  | "forbidden"
  | "not_loopback"
  | "shutting_down"
  | "provider_failed"
  | "skill_invalid"
  | "over_budget"
  | "limit_reached"
  | "internal";

/** Options for {@linkcode KlbrError}. */
export interface KlbrErrorOptions {
  /** HTTP status the server answers with; omitted means 400 for input errors. */
  status?: number;
  /** The underlying failure, kept for logs. */
  cause?: unknown;
}

/**
 * A refused operation with a stable code.
 *
 * @example
 * ```ts
 * throw new KlbrError("epoch_moved", "cannot activate release 3fa2: epoch moved (expected 7, found 8)");
 * ```
 */
export class KlbrError extends Error {
  /** The stable, snake_case code callers branch on. */
  readonly code: KlbrErrorCode;
  /** The HTTP status this error maps to, when it crosses the server boundary. */
  readonly status: number | undefined;

  /** Creates an error with a code, a "cannot …" message and optional status and cause. */
  constructor(code: KlbrErrorCode, message: string, options: KlbrErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "KlbrError";
    this.code = code;
    this.status = options.status;
  }
}

/**
 * Throws when an invariant that only a bug can break does not hold.
 *
 * Bad input is never an assertion: it gets a {@linkcode KlbrError}.
 *
 * @throws {Error} `AssertionError` naming the broken invariant.
 */
export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) {
    const error = new Error(`klbr invariant broken: ${message}`);
    error.name = "AssertionError";
    throw error;
  }
}

/** Returns whether `error` is a {@linkcode KlbrError} with the given code. */
export function isKlbrError(error: unknown, code?: KlbrErrorCode): error is KlbrError {
  return error instanceof KlbrError && (code === undefined || error.code === code);
}
