/**
 * The page's side of authentication: the token from a `#token=` address (read at load and on
 * every hash change, then removed from the address bar) is posted once to `POST /auth`,
 * which answers with an `HttpOnly` session cookie. The page never keeps the token; the
 * browser sends the cookie with the lane's upgrade.
 *
 * @module
 */

import { HealthReport } from "../../runtime/core/mod.ts";
import { isObject } from "./json_value.ts";
import type { HealthInfo } from "./lane_client.ts";

/** What `POST /auth` said. */
export type Exchange = { ok: true } | { ok: false; code: string; message: string };

/** Where an older page kept the token; read once, exchanged, then removed. */
export const LEGACY_TOKEN_KEY = "klbr:token";

/** Takes a token from the URL fragment and removes it from the address bar. */
export function tokenFromHash(): string | undefined {
  const match = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (match === null) return undefined;
  history.replaceState(null, "", location.pathname + location.search);
  try {
    return decodeURIComponent(match[1]).trim();
  } catch {
    return match[1];
  }
}

/** Takes a token an older page left in `localStorage`, removing it. */
export function legacyStoredToken(): string | undefined {
  try {
    const token = localStorage.getItem(LEGACY_TOKEN_KEY) ?? undefined;
    localStorage.removeItem(LEGACY_TOKEN_KEY);
    return token;
  } catch {
    return undefined;
  }
}

/** Posts the token to `/auth`; on `ok` the browser holds the session cookie. */
export async function exchangeToken(token: string): Promise<Exchange> {
  try {
    const response = await fetch("/auth", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token }),
      credentials: "same-origin",
      cache: "no-store",
    });
    if (response.ok) return { ok: true };
    const body: unknown = await response.json().catch(() => ({}));
    return {
      ok: false,
      code: isObject(body) && typeof body.code === "string" ? body.code : "error",
      message: isObject(body) && typeof body.message === "string"
        ? body.message
        : `the daemon answered HTTP ${response.status}`,
    };
  } catch (error) {
    return { ok: false, code: "unreachable", message: `cannot reach the daemon (${error})` };
  }
}

/** Removes the session cookie (`DELETE /auth`). */
export async function signOut(): Promise<void> {
  try {
    await fetch("/auth", { method: "DELETE", credentials: "same-origin" });
  } catch { /* the daemon is down: the cookie stays until it expires */ }
}

/** Reads a `/health` body; tolerant of fields it does not know and of missing ones. */
export function readHealthBody(body: unknown): HealthInfo | undefined {
  if (!isObject(body)) return undefined;
  const sandbox = typeof body.sandbox === "string"
    ? {
      mode: body.sandbox,
      reason: typeof body.sandbox_reason === "string" ? body.sandbox_reason : null,
      network: body.sandbox_network === true,
    }
    : undefined;
  const model = isObject(body.model) && typeof body.model.state === "string"
    ? {
      state: body.model.state,
      error: typeof body.model.error === "string" ? body.model.error : null,
      route: typeof body.model.route === "string" ? body.model.route : null,
    }
    : undefined;
  return {
    sandbox,
    status: typeof body.status === "string" ? body.status : "unknown",
    reasons: Array.isArray(body.reasons)
      ? body.reasons.filter((r): r is string => typeof r === "string")
      : [],
    model,
    report: HealthReport.safeParse(body).data,
  };
}

/** Asks `/health` how the daemon is; undefined when it cannot be reached or read. */
export async function readHealth(): Promise<HealthInfo | undefined> {
  try {
    // A failing daemon answers 503 with the same body: read it either way.
    const response = await fetch("/health", { cache: "no-store" });
    return readHealthBody(await response.json());
  } catch {
    return undefined;
  }
}
