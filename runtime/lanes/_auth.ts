/**
 * Who may use a lane: the holder of the operator token, or a browser holding the session
 * cookie it got by showing that token once (the way Jupyter does it).
 *
 * The cookie is `HttpOnly; SameSite=Strict; Path=/` with no `Domain`, so only the daemon's
 * own host gets it and page scripts never see it. Its value is an expiry, a nonce and an
 * HMAC of both under the current token: nothing is stored, a restart keeps sessions, and
 * rotating the token refuses every cookie made before.
 *
 * @module
 */

import { createHmac, timingSafeEqual } from "node:crypto";
import { checkOperatorToken, writeNewOperatorToken } from "./_operator_token.ts";

/** How long a session cookie lasts, in seconds (30 days). */
export const SESSION_MAX_AGE_S = 30 * 24 * 3600;

/** What an upgrade or request showed: a cookie that checks, one that does not, or none. */
export type CookieState = "valid" | "stale" | "absent";

/** Options for {@linkcode OperatorAuth}. */
export interface OperatorAuthOptions {
  /** Where the token file lives; {@linkcode OperatorAuth.rotate} writes it there. */
  stateDir: string;
  /** The current token. */
  token: string;
  /** Whether a connection without credentials may watch, read-only. @default {false} */
  viewWithoutToken?: boolean;
  /** The clock, in ms. @default {Date.now} */
  now?: () => number;
}

/**
 * The operator token, the session cookies made from it, and its rotation.
 *
 * @example
 * ```ts
 * const auth = new OperatorAuth({ stateDir, token });
 * const header = auth.issueCookie(8765); // Set-Cookie value after a good POST /auth
 * auth.readCookie(request.headers.get("cookie") ?? undefined, 8765); // "valid"
 * ```
 */
export class OperatorAuth {
  readonly #stateDir: string;
  readonly #now: () => number;
  readonly #listeners = new Set<() => void>();
  #token: string;
  /** Whether a connection without credentials may watch, read-only. */
  readonly viewWithoutToken: boolean;

  /** Holds the token; nothing is read or written until {@linkcode rotate}. */
  constructor(options: OperatorAuthOptions) {
    this.#stateDir = options.stateDir;
    this.#token = options.token;
    this.#now = options.now ?? Date.now;
    this.viewWithoutToken = options.viewWithoutToken ?? false;
  }

  /**
   * Checks a presented token in constant time.
   *
   * @throws {KlbrError} `token_missing`, `token_malformed` or `token_wrong`.
   */
  checkToken(presented: string | undefined): void {
    checkOperatorToken(presented, this.#token);
  }

  /** The cookie's name: the port is part of it, since browsers share cookies across ports. */
  cookieName(port: number): string {
    return `klbr_session_${port}`;
  }

  /** A `Set-Cookie` value holding a new session for this port. */
  issueCookie(port: number): string {
    const expires = Math.floor(this.#now() / 1000) + SESSION_MAX_AGE_S;
    const nonce = Array.from(crypto.getRandomValues(new Uint8Array(16)), hex).join("");
    const value = `${expires}.${nonce}.${this.#mac(port, expires, nonce)}`;
    return `${this.cookieName(port)}=${value}; ${attributes(SESSION_MAX_AGE_S)}`;
  }

  /** A `Set-Cookie` value that removes the session cookie. */
  clearCookie(port: number): string {
    return `${this.cookieName(port)}=; ${attributes(0)}`;
  }

  /** Reads this port's session cookie from a `Cookie` header and checks it. */
  readCookie(header: string | undefined, port: number): CookieState {
    const name = this.cookieName(port);
    const value = header?.split(";").map((part) => part.trim())
      .find((part) => part.startsWith(`${name}=`))?.slice(name.length + 1);
    if (value === undefined || value === "") return "absent";
    const match = /^(\d{1,12})\.([0-9a-f]{32})\.([0-9a-f]{64})$/.exec(value);
    if (match === null) return "stale";
    const expires = Number(match[1]);
    if (expires * 1000 <= this.#now()) return "stale";
    const expected = new TextEncoder().encode(this.#mac(port, expires, match[2]));
    return timingSafeEqual(expected, new TextEncoder().encode(match[3])) ? "valid" : "stale";
  }

  /**
   * Replaces the token with a new random one, written to the token file first. On return
   * the old token and every cookie made from it are refused, and every listener (the lane
   * server, which closes the connections they opened) has been told.
   */
  async rotate(): Promise<void> {
    this.#token = await writeNewOperatorToken(this.#stateDir);
    for (const listener of [...this.#listeners]) listener();
  }

  /** Calls `listener` after each rotation; returns the function that removes it. */
  onRotate(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #mac(port: number, expires: number, nonce: string): string {
    return createHmac("sha256", this.#token)
      .update(`klbr-session\0${port}\0${expires}\0${nonce}`)
      .digest("hex");
  }
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, "0");
}

function attributes(maxAgeS: number): string {
  return `Max-Age=${maxAgeS}; Path=/; HttpOnly; SameSite=Strict`;
}
