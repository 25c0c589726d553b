/**
 * What counts as loopback, for the listen address and for a browser's `Origin`.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";

/**
 * Returns whether a host name or address is loopback (127.0.0.0/8, ::1 or localhost).
 *
 * @example
 * ```ts
 * isLoopbackHost("127.0.0.1"); // true
 * isLoopbackHost("0.0.0.0");   // false
 * ```
 */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "");
  return bare === "localhost" || bare === "::1" || /^127(\.\d{1,3}){3}$/.test(bare);
}

/**
 * Returns whether an `Origin` header names an http(s) page on a loopback host.
 *
 * @example
 * ```ts
 * isLoopbackOrigin("http://127.0.0.1:8765"); // true
 * isLoopbackOrigin("https://evil.example");  // false
 * ```
 */
export function isLoopbackOrigin(origin: string): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  return (url.protocol === "http:" || url.protocol === "https:") && isLoopbackHost(url.hostname);
}

/**
 * Refuses a listen address that is not loopback.
 *
 * @throws {KlbrError} `not_loopback` naming the address.
 */
export function requireLoopbackHost(host: string): void {
  if (!isLoopbackHost(host)) {
    throw new KlbrError(
      "not_loopback",
      `cannot serve: the bind address must be loopback (127.0.0.0/8, ::1 or localhost) (got ${host})`,
    );
  }
}
