/**
 * One REST request to Discord at a time per caller, each with a timeout, under Discord's
 * per-route buckets and its global limit. A 429 is returned to the caller with its
 * `retry_after`, never retried here: the sender decides. Not `@discordeno/rest`, whose requests
 * cannot be aborted or timed out (`docs/discord.md`, "How it works").
 *
 * @module
 */

import type { Secret } from "../config/mod.ts";

/** What one request came back with. */
export type RestResult =
  | { kind: "ok"; status: number; json: unknown }
  /** A 429: not processed; retry after `retryAfterMs`. */
  | { kind: "rate_limited"; status: 429; retryAfterMs: number; global: boolean; text: string }
  /** Any other 4xx: Discord refused the request. */
  | { kind: "refused"; status: number; text: string }
  /** A 5xx, a timeout or a network error: the outcome is not known. */
  | { kind: "lost"; reason: string };

/** Options for {@linkcode DiscordRest}. */
export interface DiscordRestOptions {
  apiUrl: string;
  token: Secret;
  timeoutMs: number;
  /** Aborts every wait and request (the daemon stops). */
  signal: AbortSignal;
}

/**
 * Why a request did not give the caller what it wanted: the reason it was lost, else its HTTP
 * status.
 *
 * @example
 * ```ts
 * failureText({ kind: "refused", status: 403, text: "" }); // "HTTP 403"
 * ```
 */
export function failureText(result: RestResult): string {
  return result.kind === "lost" ? result.reason : `HTTP ${result.status}`;
}

/** Requests a second Discord allows a bot in all. */
const GLOBAL_PER_SECOND = 50;

/** The route a bucket is keyed by: the method and path with every id but the major one. */
export function routeKey(method: string, path: string): string {
  const major = path.match(/^\/(channels|guilds|webhooks)\/(\d+)/);
  const rest = path.slice(major?.[0].length ?? 0).replace(/\/\d+/g, "/:id")
    .replace(/\/reactions\/[^/]+/, "/reactions/:emoji");
  return `${method} ${major?.[0] ?? ""}${rest}`;
}

/** Waits `ms`, or less when `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Discord's REST API for the transport, with its buckets.
 *
 * @example
 * ```ts
 * const rest = new DiscordRest({ apiUrl, token, timeoutMs: 15_000, signal });
 * const result = await rest.request("GET", "/users/@me");
 * ```
 */
export class DiscordRest {
  #o: DiscordRestOptions;
  /** A route's bucket: Discord's hash with the route's major id, which the hash leaves out. */
  #bucketOfRoute = new Map<string, string>();
  #buckets = new Map<string, { remaining: number; resetAt: number }>();
  #globalUntil = 0;
  #recent: number[] = [];

  /** Creates the client. */
  constructor(options: DiscordRestOptions) {
    this.#o = options;
  }

  /** How long a request on `route` must wait for its bucket and the global limit, in ms. */
  waitFor(route: string, now = Date.now()): number {
    let wait = Math.max(0, this.#globalUntil - now);
    const bucket = this.#buckets.get(this.#bucketOfRoute.get(route) ?? route);
    if (bucket !== undefined && bucket.remaining <= 0 && bucket.resetAt > now) {
      wait = Math.max(wait, bucket.resetAt - now);
    }
    this.#recent = this.#recent.filter((at) => at > now - 1000);
    if (this.#recent.length >= GLOBAL_PER_SECOND) {
      wait = Math.max(wait, this.#recent[0] + 1000 - now);
    }
    return wait;
  }

  /**
   * Sends one request once its bucket allows, and classifies the answer. Never throws: a
   * network error or a timeout is `lost`.
   */
  async request(
    method: string,
    path: string,
    options: { body?: unknown; timeoutMs?: number } = {},
  ): Promise<RestResult> {
    const route = routeKey(method, path);
    for (let wait = this.waitFor(route); wait > 0; wait = this.waitFor(route)) {
      await sleep(wait, this.#o.signal);
      if (this.#o.signal.aborted) return { kind: "lost", reason: "the daemon stopped" };
    }
    this.#recent.push(Date.now());
    const timeoutMs = options.timeoutMs ?? this.#o.timeoutMs;
    const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), this.#o.signal]);
    try {
      const response = await fetch(`${this.#o.apiUrl.replace(/\/$/, "")}${path}`, {
        method,
        headers: {
          authorization: `Bot ${this.#o.token.reveal()}`,
          "user-agent": "DiscordBot (klbr, 0.1.0)",
          ...(options.body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal,
      });
      const text = await response.text();
      return this.#classify(route, response, text);
    } catch (error) {
      const reason = this.#o.signal.aborted
        ? "the daemon stopped during the request"
        : signal.aborted
        ? `no answer within ${timeoutMs} ms`
        : `network error: ${error instanceof Error ? error.message : error}`;
      return { kind: "lost", reason };
    }
  }

  #classify(route: string, response: Response, text: string): RestResult {
    const h = response.headers;
    const now = Date.now();
    const bucketId = h.get("x-ratelimit-bucket");
    // One hash names a route's bucket in every channel, but each channel has its own limit.
    const major = route.match(/ \/(channels|guilds|webhooks)\/\d+/)?.[0] ?? "";
    if (bucketId !== null) this.#bucketOfRoute.set(route, `${bucketId}${major}`);
    const remaining = Number(h.get("x-ratelimit-remaining"));
    const resetAfter = Number(h.get("x-ratelimit-reset-after"));
    if (
      h.has("x-ratelimit-remaining") && Number.isFinite(remaining) && Number.isFinite(resetAfter)
    ) {
      this.#buckets.set(this.#bucketOfRoute.get(route) ?? route, {
        remaining,
        resetAt: now + resetAfter * 1000,
      });
    }
    if (response.status === 429) {
      let body: { retry_after?: unknown; global?: unknown } = {};
      try {
        body = JSON.parse(text);
      } catch { /* the header says it */ }
      const seconds = typeof body.retry_after === "number"
        ? body.retry_after
        : Number(h.get("retry-after") ?? 1);
      const retryAfterMs = Math.max(1, Math.ceil((Number.isFinite(seconds) ? seconds : 1) * 1000));
      const global = body.global === true || h.get("x-ratelimit-global") === "true";
      if (global) this.#globalUntil = now + retryAfterMs;
      return { kind: "rate_limited", status: 429, retryAfterMs, global, text: text.slice(0, 200) };
    }
    if (response.ok) {
      let json: unknown = null;
      try {
        json = text === "" ? null : JSON.parse(text);
      } catch { /* not JSON: no body */ }
      return { kind: "ok", status: response.status, json };
    }
    if (response.status >= 400 && response.status < 500) {
      return { kind: "refused", status: response.status, text: text.slice(0, 200) };
    }
    return { kind: "lost", reason: `HTTP ${response.status}: ${text.slice(0, 200)}` };
  }
}
