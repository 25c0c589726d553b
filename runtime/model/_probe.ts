/**
 * A route's reachability check: one `GET <url>/models`, bounded, never a paid request. `serve`
 * runs it at start-up and `doctor` for its report.
 *
 * @module
 */

/** How long one probe may take unless told otherwise. */
export const PROBE_TIMEOUT_MS = 1500;

/** What a probe found: `problem` is `null` when anything answered over HTTP. */
export interface ProbeResult {
  problem: string | null;
  /** The HTTP status it answered with. */
  status?: number;
}

/**
 * Asks `GET <url>/models` once, within `timeoutMs`. Any HTTP answer counts as answering (a
 * 401 or 404 is for the first turn to report with its body); a refused connection, a failed
 * lookup or silence is the problem, in words.
 *
 * @example
 * ```ts
 * const { problem } = await probeRoute("http://127.0.0.1:8080/v1");
 * // "tcp connect error: Connection refused (os error 111)"
 * ```
 */
export async function probeRoute(url: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<ProbeResult> {
  try {
    const response = await fetch(`${url.replace(/\/$/, "")}/models`, {
      // Says what the request is, to a server's logs and to the tests' fake model.
      headers: { "x-klbr-probe": "reachability" },
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body?.cancel();
    return { problem: null, status: response.status };
  } catch (error) {
    return { problem: describeFetchError(error, timeoutMs) };
  }
}

/** A failed `fetch` in words: the cause Deno gives, without the URL it repeats. */
export function describeFetchError(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && error.name === "TimeoutError") {
    return `no answer within ${timeoutMs} ms`;
  }
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  const text = cause instanceof Error ? cause.message : String(cause);
  return text.replace(/^error sending request for url \([^)]*\): /, "")
    .replace(/^client error \(Connect\): /, "").slice(0, 160);
}
