/**
 * `doctor --probe`'s look at Discord, telling a refused token from a Discord it cannot reach:
 * one `GET /users/@me` (HTTP 401 → the token was refused; a network error, a timeout or a 5xx →
 * the API is unreachable and the token was not checked) and one gateway connection that waits
 * for Hello (op 10) and closes without identifying (no session is started).
 *
 * @module
 */

import type { DiscordConfig, Secret } from "../config/mod.ts";
import { DiscordRest } from "./_rest.ts";

/** What the probe found: lines to print, and the problems (each one line). */
export interface DiscordProbe {
  lines: string[];
  problems: string[];
}

/**
 * Probes the API with the token and the gateway for Hello, each within `timeoutMs`.
 *
 * @example
 * ```ts
 * const { lines, problems } = await probeDiscord(config.discord, { token });
 * ```
 */
export async function probeDiscord(
  config: DiscordConfig,
  options: { token: Secret; timeoutMs?: number },
): Promise<DiscordProbe> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const lines: string[] = [];
  const problems: string[] = [];
  const stop = new AbortController();
  const rest = new DiscordRest({
    apiUrl: config.api_url,
    token: options.token,
    timeoutMs,
    signal: stop.signal,
  });
  const result = await rest.request("GET", "/users/@me");
  if (result.kind === "ok") {
    const me = result.json as { id?: string; username?: string };
    lines.push(`  token ok: GET /users/@me is bot ${me.username} (${me.id})`);
  } else if (result.kind === "lost") {
    problems.push(
      `discord: ${config.api_url} is unreachable (${result.reason}); the token was not checked: check the network, or api_url`,
    );
  } else if (result.status === 401) {
    problems.push(
      `discord: GET /users/@me refused the token (HTTP 401): reset it in the developer portal (Bot → Reset Token) and set ${config.token_env}`,
    );
  } else {
    problems.push(`discord: GET /users/@me answered HTTP ${result.status}: ${result.text}`);
  }
  const hello = await gatewayHello(config.gateway_url, timeoutMs);
  if (hello === null) lines.push(`  gateway ok: ${config.gateway_url} said Hello`);
  else {
    problems.push(`discord: the gateway ${config.gateway_url} is unreachable (${hello})`);
  }
  return { lines, problems };
}

/** Connects to the gateway and waits for Hello; null when it came, else why not. */
function gatewayHello(url: string, timeoutMs: number): Promise<string | null> {
  const target = new URL(url);
  target.searchParams.set("v", "10");
  target.searchParams.set("encoding", "json");
  const { promise, resolve } = Promise.withResolvers<string | null>();
  let socket: WebSocket;
  try {
    socket = new WebSocket(target);
  } catch (error) {
    return Promise.resolve(error instanceof Error ? error.message : String(error));
  }
  const timer = setTimeout(() => finish(`no Hello within ${timeoutMs} ms`), timeoutMs);
  function finish(outcome: string | null): void {
    clearTimeout(timer);
    resolve(outcome);
    if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING) {
      socket.close(1000);
    }
  }
  socket.onmessage = function onHello(event) {
    try {
      if (JSON.parse(String(event.data))?.op === 10) return finish(null);
    } catch { /* not JSON: not Discord */ }
    finish("the first frame was not Hello (op 10)");
  };
  socket.onerror = function onError(event) {
    finish(event instanceof ErrorEvent && event.message ? event.message : "connection error");
  };
  socket.onclose = function onClose(event) {
    finish(`closed with ${event.code} before Hello`);
  };
  return promise;
}
