/**
 * A route's reachability check: one `GET <url>/models`, bounded, never a paid request. `serve`
 * runs it at start-up and `doctor` for its report; both say when the configured model is not
 * among the models the server lists. A refused model name is explained with the same list.
 *
 * @module
 */

/** How long one probe may take unless told otherwise. */
const PROBE_TIMEOUT_MS = 1500;

/** What a probe found: `problem` is `null` when anything answered over HTTP. */
export interface ProbeResult {
  problem: string | null;
  /** The HTTP status it answered with. */
  status?: number;
  /** The model ids it listed, when it answered an OpenAI-style list. */
  models?: string[];
}

/** Options for {@linkcode probeRoute} and {@linkcode listModels}. */
export interface ProbeOptions {
  /** @default {PROBE_TIMEOUT_MS} */
  timeoutMs?: number;
  /** The route's key; without one no `Authorization` header is sent (and a server may answer 401). */
  apiKey?: string;
  /** Replaces the global `fetch`. */
  fetch?: typeof fetch;
  /** What the request is, for a server's logs and the tests' fake. @default {"reachability"} */
  purpose?: string;
}

/**
 * Asks `GET <url>/models` once, within the timeout. Any HTTP answer counts as answering (a
 * 401 or 404 is for the first turn to report with its body); a refused connection, a failed
 * lookup or silence is the problem, in words. An OpenAI-style list (`{data: [{id}]}`) gives
 * `models`, unless the server serves any name (llama-server with one model).
 *
 * @example
 * ```ts
 * const { problem, models } = await probeRoute("http://127.0.0.1:8080/v1", { apiKey });
 * // problem: "tcp connect error: Connection refused (os error 111)"
 * ```
 */
export async function probeRoute(url: string, options: ProbeOptions = {}): Promise<ProbeResult> {
  const timeoutMs = options.timeoutMs ?? PROBE_TIMEOUT_MS;
  try {
    const response = await (options.fetch ?? fetch)(`${url.replace(/\/$/, "")}/models`, {
      // Says what the request is, to a server's logs and to the tests' fake model.
      headers: {
        "x-klbr-probe": options.purpose ?? "reachability",
        ...(options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` }),
      },
      signal: AbortSignal.timeout(timeoutMs),
    });
    const models = response.ok ? modelIds(await response.text().catch(() => "")) : undefined;
    if (!response.ok) await response.body?.cancel();
    return { problem: null, status: response.status, ...(models ? { models } : {}) };
  } catch (error) {
    return { problem: describeFetchError(error, timeoutMs) };
  }
}

/**
 * The ids of an OpenAI-style model list, or undefined for any other body and for a server that
 * serves its one model under any name: llama-server outside its router mode, whose single entry
 * is `owned_by: "llamacpp"` with a `meta` object (its router lists each model with a `status`).
 */
function modelIds(text: string): string[] | undefined {
  try {
    const data = (JSON.parse(text) as { data?: unknown }).data;
    if (!Array.isArray(data)) return undefined;
    const anyName = data.length === 1 && data[0]?.owned_by === "llamacpp" &&
      typeof data[0]?.meta === "object" && data[0]?.meta !== null;
    if (anyName) return undefined;
    return data.map((entry) => entry?.id).filter((id): id is string => typeof id === "string");
  } catch {
    return undefined;
  }
}

/**
 * The models the server lists, or why it could not tell (in words).
 *
 * @example
 * ```ts
 * await listModels(route.url, { apiKey }); // ["qwen3:8b", "llama3.1:8b"] | "HTTP 401"
 * ```
 */
export async function listModels(
  url: string,
  options: ProbeOptions = {},
): Promise<string[] | string> {
  const probe = await probeRoute(url, { purpose: "models", ...options });
  if (probe.models !== undefined) return probe.models;
  return probe.problem ?? `HTTP ${probe.status} without a model list`;
}

/**
 * The warning when a server lists its models and `model` is not among them, naming a few;
 * null when it is listed or the server lists none.
 *
 * @example
 * ```ts
 * modelNote("gpt-5", { problem: null, status: 200, models: ["qwen3:8b"] });
 * // 'model "gpt-5" is not among the models the server lists ("qwen3:8b")'
 * ```
 */
export function modelNote(model: string, probe: ProbeResult): string | null {
  const models = probe.models;
  if (models === undefined || models.length === 0 || models.includes(model)) return null;
  const shown = models.slice(0, 6).map((id) => `"${id}"`).join(", ");
  const more = models.length > 6 ? `, and ${models.length - 6} more` : "";
  return `model "${model}" is not among the models the server lists (${shown}${more})`;
}

/** A failed `fetch` in words: the cause Deno gives, without the URL it repeats. */
function describeFetchError(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && error.name === "TimeoutError") {
    return `no answer within ${timeoutMs} ms`;
  }
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  const text = cause instanceof Error ? cause.message : String(cause);
  return text.replace(/^error sending request for url \([^)]*\): /, "")
    .replace(/^client error \(Connect\): /, "").slice(0, 160);
}
