/**
 * What counts as loopback, for the listen address, and what a request must name to be
 * answered: its `Host` a loopback host with the daemon's port (no DNS rebinding), its
 * `Origin`, when it has one, exactly the daemon's own origin.
 *
 * Addresses are parsed, never pattern-matched: `127.999.0.1` is not an address, so it is a
 * refusal with a reason, not a bind that fails later.
 *
 * @module
 */

import { isIP } from "node:net";
import { KlbrError } from "../core/mod.ts";

/** Where the daemon listens: a loopback host and the port it really got. */
export interface ListenAddress {
  /** The bind host as given (`127.0.0.1`, `::1`, `localhost`). */
  host: string;
  /** The port; 0 only before the server is listening. */
  port: number;
}

/**
 * Returns whether a host name or address is loopback: `localhost`, an IPv4 address in
 * 127.0.0.0/8 or the IPv6 address `::1` (brackets allowed). Case-insensitive, like DNS.
 *
 * @example
 * ```ts
 * isLoopbackHost("127.0.0.1");   // true
 * isLoopbackHost("127.999.0.1"); // false: not an address
 * isLoopbackHost("0.0.0.0");     // false
 * ```
 */
export function isLoopbackHost(host: string): boolean {
  const lower = host.toLowerCase();
  const bare = lower.startsWith("[") && lower.endsWith("]") ? lower.slice(1, -1) : lower;
  if (bare === "localhost") return true;
  const family = isIP(bare);
  if (family === 4) return bare.split(".")[0] === "127";
  if (family === 6) return expandIPv6(bare) === "0:0:0:0:0:0:0:1";
  return false;
}

/** Writes an IPv6 address with all eight groups, without leading zeros. */
function expandIPv6(address: string): string {
  if (address.includes(".")) return address; // an IPv4 tail: ::ffff:127.0.0.1 is not ::1
  const [head, tail] = address.includes("::") ? address.split("::") : [address, undefined];
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const zeros = tail === undefined ? [] : Array(8 - left.length - right.length).fill("0");
  return [...left, ...zeros, ...right].map((group) => group.replace(/^0+(?=.)/, "")).join(":");
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

/**
 * The daemon's own origin, as a browser serialises it: `http://127.0.0.1:8765`,
 * `http://[::1]:8765`.
 *
 * @example
 * ```ts
 * ownOrigin({ host: "::1", port: 8765 }); // "http://[::1]:8765"
 * ```
 */
export function ownOrigin(address: ListenAddress): string {
  const host = address.host.toLowerCase().replace(/^\[|\]$/g, "");
  return `http://${isIP(host) === 6 ? `[${host}]` : host}:${address.port}`;
}

/**
 * Refuses a request whose `Host` does not name a loopback host with the daemon's port: a
 * page that reached the daemon through a rebound DNS name names that name.
 *
 * @throws {KlbrError} `forbidden` (403) naming the `Host` given, or its absence.
 */
export function checkHost(host: string | undefined, address: ListenAddress): void {
  if (host === undefined || host === "") {
    throw new KlbrError("forbidden", "cannot answer: the request has no Host header (got none)", {
      status: 403,
    });
  }
  const match = /^(\[[^\]]*\]|[^:\[\]]+):(\d{1,5})$/.exec(host);
  if (match === null || !isLoopbackHost(match[1]) || Number(match[2]) !== address.port) {
    throw new KlbrError(
      "forbidden",
      `cannot answer: Host must be a loopback host with port ${address.port} (got ${
        JSON.stringify(host)
      })`,
      { status: 403 },
    );
  }
}

/**
 * Refuses a request whose `Origin` is present and is not exactly the daemon's own origin
 * (scheme, host and port, as a browser writes it). No `Origin` is a native client, which
 * must still authenticate.
 *
 * @throws {KlbrError} `forbidden` (403) naming the `Origin` given.
 */
export function checkOrigin(origin: string | undefined, address: ListenAddress): void {
  if (origin === undefined) return;
  const own = ownOrigin(address);
  if (origin !== own) {
    throw new KlbrError(
      "forbidden",
      `cannot answer: Origin must be the daemon's own origin ${own} (got ${
        JSON.stringify(origin)
      })`,
      { status: 403 },
    );
  }
}
