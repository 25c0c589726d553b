/**
 * The one mapping from a thrown error to what a client is told, shared by the HTTP routes and
 * the lane socket: a {@linkcode KlbrError} keeps its code, message and status; anything else
 * is a bug, logged with its stack and answered `internal` without revealing it.
 *
 * @module
 */

import { isKlbrError, type KlbrErrorCode, type Logger } from "../core/mod.ts";

/** What a client is told about a failed request. */
export interface ErrorReply {
  /** The HTTP status (400 for bad input unless the error names another). */
  status: number;
  code: KlbrErrorCode;
  message: string;
  /** True when the same request may succeed later, once the cause is fixed. */
  retriable: boolean;
}

/** Codes whose request may succeed later unchanged. */
const RETRIABLE: readonly KlbrErrorCode[] = ["store_unavailable", "shutting_down"];

/**
 * Turns any thrown value into the reply a client gets.
 *
 * @example
 * ```ts
 * const reply = errorReply(new KlbrError("not_found", "cannot use session x: it is not running"), log);
 * // { status: 400, code: "not_found", message: "cannot use session x: it is not running",
 * //   retriable: false }
 * ```
 */
export function errorReply(error: unknown, log: Logger): ErrorReply {
  if (isKlbrError(error)) {
    return {
      status: error.status ?? 400,
      code: error.code,
      message: error.message,
      retriable: RETRIABLE.includes(error.code),
    };
  }
  // Deno's own permissions refused the daemon: a boundary holding, not a bug.
  if (error instanceof Deno.errors.NotCapable || error instanceof Deno.errors.PermissionDenied) {
    log.warn("permission.refused", `the daemon's permissions refused: ${error.message}`);
    return {
      status: 403,
      code: "forbidden",
      message: `cannot finish: the daemon's permissions do not reach there (got ${error.message})`,
      retriable: false,
    };
  }
  log.error(
    "internal",
    `unexpected error: ${error instanceof Error ? error.stack : String(error)}`,
  );
  return { status: 500, code: "internal", message: "internal error", retriable: false };
}
