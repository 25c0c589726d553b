/**
 * Who may use a lane: the holder of the operator token, or a browser holding the session
 * cookie it got by showing that token once (the way Jupyter does it).
 *
 * The cookie is `HttpOnly; SameSite=Strict; Path=/` with no `Domain`, so only the daemon's
 * own host gets it and page scripts never see it. Browsers share cookies across the ports of a
 * host, so a page on another loopback port can set cookies the daemon's page will send: the
 * name holds the port and a part derived from the daemon's session key (another port's page
 * cannot know it), and a cookie the daemon did not sign is ignored, never taken for a revoked
 * one. Its value is an expiry, a nonce, a tag of the token it was made under, and an HMAC of
 * all three under the session key: nothing is stored per session, a restart keeps sessions,
 * and a rotated token turns every cookie made before into a revoked one.
 *
 * @module
 */

import { createHmac, timingSafeEqual } from "node:crypto";
import { checkOperatorToken, writeNewOperatorToken } from "./_operator_token.ts";

/** How long a session cookie lasts, in seconds (30 days). */
export const SESSION_MAX_AGE_S = 30 * 24 * 3600;

/**
 * What an upgrade or request showed: a cookie this daemon signed for the current token, one it
 * signed that no longer counts (made under an older token, or expired), or none it signed.
 */
export type CookieState = "valid" | "stale" | "absent";

/** Options for {@linkcode OperatorAuth}. */
export interface OperatorAuthOptions {
  /** Where the token file lives; {@linkcode OperatorAuth.rotate} writes it there. */
  stateDir: string;
  /** The current token. */
  token: string;
  /** The key cookies are signed with (`ensureSessionKey`); it outlives token rotations. */
  sessionKey: string;
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
 * const auth = new OperatorAuth({ stateDir, token, sessionKey: await ensureSessionKey(stateDir) });
 * const header = auth.issueCookie(8765); // Set-Cookie value after a good POST /auth
 * auth.readCookie(request.headers.get("cookie") ?? undefined, 8765); // "valid"
 * ```
 */
export class OperatorAuth {
  readonly #stateDir: string;
  readonly #now: () => number;
  readonly #listeners = new Set<() => void>();
  readonly #sessionKey: string;
  #token: string;
  /** Whether a connection without credentials may watch, read-only. */
  readonly viewWithoutToken: boolean;

  /** Holds the token; nothing is read or written until {@linkcode rotate}. */
  constructor(options: OperatorAuthOptions) {
    this.#stateDir = options.stateDir;
    this.#token = options.token;
    this.#sessionKey = options.sessionKey;
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

  /**
   * The cookie's name, `klbr_<port>_<12 hex characters>`: the port, since browsers share
   * cookies across ports, and a part of the session key's HMAC, which another port's page
   * cannot know.
   */
  cookieName(port: number): string {
    return `klbr_${port}_${this.#hmac(`klbr-cookie-name\0${port}`).slice(0, 12)}`;
  }

  /** A `Set-Cookie` value holding a new session for this port. */
  issueCookie(port: number): string {
    const expires = Math.floor(this.#now() / 1000) + SESSION_MAX_AGE_S;
    const nonce = Array.from(crypto.getRandomValues(new Uint8Array(16)), hex).join("");
    const tag = this.#tokenTag();
    const value = `${expires}.${nonce}.${tag}.${this.#mac(port, expires, nonce, tag)}`;
    return `${this.cookieName(port)}=${value}; ${attributes(SESSION_MAX_AGE_S)}`;
  }

  /** A `Set-Cookie` value that removes the session cookie. */
  clearCookie(port: number): string {
    return `${this.cookieName(port)}=; ${attributes(0)}`;
  }

  /**
   * Reads this port's session cookie from a `Cookie` header and checks it. Every value under
   * the name counts (a page on another port may have added one on a longer path, which the
   * browser sends first): one this daemon signed for the current token makes it `valid`; else
   * one it signed under an older token, or expired, makes it `stale`; anything else is ignored.
   */
  readCookie(header: string | undefined, port: number): CookieState {
    const name = this.cookieName(port);
    const values = (header ?? "").split(";").map((part) => part.trim())
      .filter((part) => part.startsWith(`${name}=`)).map((part) => part.slice(name.length + 1));
    const states = values.map((value) => this.#check(port, value));
    return states.includes("valid") ? "valid" : states.includes("stale") ? "stale" : "absent";
  }

  /**
   * Replaces the token with a new random one, written to the token file first. On return
   * the old token and every cookie made from it are refused, and every listener (the lane
   * server, which closes the connections they opened) has been told. `announce` is called
   * once the new token is in force, before the listeners; a failed write calls neither.
   */
  async rotate(options: { announce?: () => void } = {}): Promise<void> {
    this.#token = await writeNewOperatorToken(this.#stateDir);
    options.announce?.();
    for (const listener of [...this.#listeners]) listener();
  }

  /** Calls `listener` after each rotation; returns the function that removes it. */
  onRotate(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #check(port: number, value: string): CookieState {
    const match = /^(\d{1,12})\.([0-9a-f]{32})\.([0-9a-f]{16})\.([0-9a-f]{64})$/.exec(value);
    if (match === null) return "absent";
    const [, expiresText, nonce, tag, mac] = match;
    const expires = Number(expiresText);
    const expected = new TextEncoder().encode(this.#mac(port, expires, nonce, tag));
    if (!timingSafeEqual(expected, new TextEncoder().encode(mac))) return "absent";
    if (expires * 1000 <= this.#now() || tag !== this.#tokenTag()) return "stale";
    return "valid";
  }

  /** Names the current token without revealing it: a cookie made under another one is stale. */
  #tokenTag(): string {
    return this.#hmac(`klbr-token\0${this.#token}`).slice(0, 16);
  }

  #mac(port: number, expires: number, nonce: string, tag: string): string {
    return this.#hmac(`klbr-session\0${port}\0${expires}\0${nonce}\0${tag}`);
  }

  #hmac(text: string): string {
    return createHmac("sha256", this.#sessionKey).update(text).digest("hex");
  }
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, "0");
}

function attributes(maxAgeS: number): string {
  return `Max-Age=${maxAgeS}; Path=/; HttpOnly; SameSite=Strict`;
}
