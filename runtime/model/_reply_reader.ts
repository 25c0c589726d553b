/**
 * Reads the body of a successful `/chat/completions` answer into a {@linkcode TurnBuilder},
 * whatever the server chose to send: a server-sent-event stream (OpenAI's format, ended by
 * `data: [DONE]`), one whole JSON completion (a server that ignores `stream: true`, or a
 * `stream #false` route; with or without a stray `data: [DONE]` after it), or an HTML page
 * (a proxy's or a web server's, at the wrong URL) or LM Studio's 200 error for a path it does
 * not serve — each a failure named as such.
 *
 * The body's first character decides, not the `content-type` header: servers mislabel both
 * ways (SSE to `stream: false`, JSON to `stream: true`, JSON labelled `text/event-stream`).
 *
 * @module
 */

import type { ProviderDelta, ReplyLike, TurnBuilder } from "./_provider_turn.ts";

/** What a {@linkcode ReplyError} carries beyond its message. */
export interface ReplyErrorDetails {
  /** What was received, e.g. `HTTP 200 text/html`. @default {the message} */
  detail?: string;
  /** The HTTP status an error in the body states as its `code` (llama-server: 400, 500). */
  status?: number;
  /** The error's `type` or textual `code`, e.g. `exceed_context_size_error`. */
  code?: string;
  /** The error as the server sent it. */
  body?: string;
}

/** Why a successful answer could not be read as a reply. */
export class ReplyError extends Error {
  /** `stream_error`: the server reported an error in the body; `not_api`: no chat completion at all. */
  readonly reason: "stream_error" | "not_api";
  /** What was received, e.g. `HTTP 200 text/html`. */
  readonly detail: string;
  /** The HTTP status an error in the body states, if it states one. */
  readonly status: number | undefined;
  /** The error's `type` or textual `code`, if it has one. */
  readonly code: string | undefined;
  /** The error as the server sent it, if it was one. */
  readonly body: string | undefined;

  /** Creates the error: `message` says what the body was, `details.detail` what was received. */
  constructor(
    reason: "stream_error" | "not_api",
    message: string,
    details: ReplyErrorDetails = {},
  ) {
    super(message);
    this.name = "ReplyError";
    this.reason = reason;
    this.detail = details.detail ?? message;
    this.status = details.status;
    this.code = details.code;
    this.body = details.body;
  }
}

/** Where {@linkcode readReply} puts what it reads. */
export interface ReplySink {
  /** The turn being assembled. */
  turn: TurnBuilder;
  /** Bytes arrived: the idle deadline starts again. */
  touch(): void;
  /** Each delta, as lossy animation; an error it throws ends the reading. */
  onDelta?: (delta: ProviderDelta) => void;
  /**
   * Called once, when an event stream ends without `[DONE]`, with the start of its text outside
   * any event (a proxy's words written without `data:`), at most 200 characters.
   */
  onUnframed?: (text: string) => void;
}

/** The most characters of a whole (non-streamed) body read before it is refused. */
const MAX_WHOLE_CHARS = 32 * 1024 * 1024;

/**
 * Reads `response`'s body into `sink.turn`. Returns the error `onDelta` threw, if it threw
 * (the reading stopped there); a body that ends early leaves the turn unfinished, for the
 * caller to report as cut.
 *
 * @throws {ReplyError} for an HTML page, a body that is no completion, or an error the server
 * sent inside the body. Errors of the connection (an abort, a reset) pass through as they are.
 */
export async function readReply(
  response: Response,
  sink: ReplySink,
): Promise<{ error: unknown } | undefined> {
  if (response.body === null) return undefined;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    let head = "";
    while (head.trim() === "") {
      const { value, done } = await reader.read();
      if (done) return undefined;
      sink.touch();
      head += value;
    }
    const first = head.trimStart()[0];
    if (first === "<" || first === "{" || first === "[") {
      const whole = await readWhole(reader, head, sink);
      return first === "<" ? refuseHtml(whole, response) : foldWhole(whole, { sink, response });
    }
    return await readEvents(reader, head, sink);
  } finally {
    // Releases the connection once the reply is read (or reading stopped); never throws.
    await reader.cancel().catch(() => {});
  }
}

/** The rest of a body that is not a stream, bounded. */
async function readWhole(
  reader: ReadableStreamDefaultReader<string>,
  head: string,
  sink: ReplySink,
): Promise<string> {
  let text = head;
  while (text.length <= MAX_WHOLE_CHARS) {
    const { value, done } = await reader.read();
    if (done) return text;
    sink.touch();
    text += value;
  }
  throw new ReplyError("not_api", `a body over ${MAX_WHOLE_CHARS} characters that is no stream`);
}

/** Reads server-sent events until `[DONE]` or the end of the body. */
async function readEvents(
  reader: ReadableStreamDefaultReader<string>,
  head: string,
  sink: ReplySink,
): Promise<{ error: unknown } | undefined> {
  const parser = new EventParser();
  let events = parser.push(head);
  let ended = false;
  for (;;) {
    for (const event of events) {
      if (event.data.trim() === "[DONE]") {
        sink.turn.end();
        return undefined;
      }
      const failed = emit(sink, foldEvent(event, sink.turn));
      if (failed !== undefined) return failed;
    }
    if (ended) {
      if (parser.unframed !== "") sink.onUnframed?.(clip(parser.unframed));
      return undefined;
    }
    const { value, done } = await reader.read();
    ended = done;
    if (done) events = parser.flush();
    else {
      sink.touch();
      events = parser.push(value);
    }
  }
}

/** One event's chunk folded into the turn. */
function foldEvent(event: ServerEvent, turn: TurnBuilder): ProviderDelta[] {
  let data: unknown;
  try {
    data = JSON.parse(event.data);
  } catch {
    if (event.event === "error") throw new ReplyError("stream_error", clip(event.data));
    throw new ReplyError("stream_error", `an event that is not JSON: ${clip(event.data)}`);
  }
  const message = errorMessage(data) ??
    // llama-server's error object is not wrapped: `{code, message, type}`.
    (event.event === "error" && isObject(data) && typeof data.message === "string"
      ? data.message
      : undefined);
  if (event.event === "error" || message !== undefined) {
    throw new ReplyError("stream_error", message ?? clip(event.data), {
      ...errorCodes(data),
      body: event.data,
    });
  }
  return turn.add(data as ReplyLike);
}

/**
 * The status and code an error object in a body states: llama-server's `{code: 400, message,
 * type: "exceed_context_size_error"}` (bare, after the stream began), vLLM's and OpenRouter's
 * `{error: {code, message, type}}`. A `code` counts as a status only from 400 to 599.
 */
function errorCodes(data: unknown): { status?: number; code?: string } {
  const inner = isObject(data) && isObject(data.error) ? data.error : data;
  if (!isObject(inner)) return {};
  const { code, type } = inner;
  const status = typeof code === "number" && code >= 400 && code <= 599 ? code : undefined;
  const named = typeof type === "string" ? type : typeof code === "string" ? code : undefined;
  return {
    ...(status === undefined ? {} : { status }),
    ...(named === undefined ? {} : { code: named }),
  };
}

/**
 * LM Studio's words for a path it does not serve, which it answers with HTTP 200
 * (lmstudio-ai/lmstudio-bug-tracker#618): a route whose url lacks `/v1`.
 */
const UNSERVED_PATH = /^Unexpected endpoint or method\./;

/** A whole JSON body: one completion, or the server's error. */
function foldWhole(
  text: string,
  { sink, response }: { sink: ReplySink; response: Response },
): { error: unknown } | undefined {
  // A proxy may glue `data: [DONE]` after a JSON completion (decolua/9router#3492).
  const json = text.replace(/\s*(data:\s*\[DONE\]\s*)+$/, "");
  let data: unknown;
  try {
    data = JSON.parse(json);
  } catch {
    throw new ReplyError("not_api", `a body that is neither a stream nor JSON: ${clip(text)}`);
  }
  const message = errorMessage(data);
  if (message !== undefined && UNSERVED_PATH.test(message)) {
    const type = response.headers.get("content-type")?.split(";")[0] ?? "no content-type";
    throw new ReplyError("not_api", `an error for a path it does not serve: ${clip(message)}`, {
      detail: `HTTP ${response.status} ${type}`,
    });
  }
  if (message !== undefined) {
    throw new ReplyError("stream_error", message, { ...errorCodes(data), body: json });
  }
  if (!isObject(data) || !Array.isArray(data.choices)) {
    throw new ReplyError("not_api", `JSON that is no chat completion: ${clip(json)}`);
  }
  const deltas = sink.turn.add(data as ReplyLike);
  sink.turn.end();
  return emit(sink, deltas);
}

/** Hands deltas to `onDelta`; the error it throws is returned, to be rethrown as is. */
function emit(sink: ReplySink, deltas: ProviderDelta[]): { error: unknown } | undefined {
  if (sink.onDelta === undefined) return undefined;
  try {
    for (const delta of deltas) sink.onDelta(delta);
  } catch (error) {
    return { error };
  }
  return undefined;
}

/** An HTML page where a completion should be: named by its title. */
function refuseHtml(text: string, response: Response): never {
  const type = response.headers.get("content-type") ?? "no content-type";
  throw new ReplyError("not_api", `an HTML page: ${htmlTitle(text)}`, {
    detail: `HTTP ${response.status} ${type}`,
  });
}

/**
 * The title of an HTML page, or its first words when it has none.
 *
 * @example
 * ```ts
 * htmlTitle("<html><title>502 Bad Gateway</title></html>"); // "502 Bad Gateway"
 * ```
 */
export function htmlTitle(html: string): string {
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1];
  const text =
    (title ?? html.replace(/<(script|style)[\s\S]*?<\/\1>/gi, " ").replace(/<[^>]*>/g, " "))
      .replace(/&amp;/g, "&").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'").replace(/\s+/g, " ").trim();
  return clip(text === "" ? "(untitled)" : text, 120);
}

/**
 * The error message inside a body: `{error: {message}}` (OpenAI, vLLM), `{error: "…"}`
 * (Ollama), `{object: "error", message}` (Mistral, older vLLM), `{detail}` (FastAPI servers).
 * A validation error's list (pydantic's `[{loc, msg}]`: FastAPI's `detail`; Mistral's 422 under
 * `message`, as `{detail: [...]}` or the list itself) is put in words, each location with its
 * message: "stream_options.include_usage: Extra inputs are not permitted".
 */
export function errorMessage(data: unknown): string | undefined {
  if (!isObject(data)) return undefined;
  const { error } = data;
  if (typeof error === "string") return error;
  if (isObject(error)) {
    return typeof error.message === "string" ? error.message : JSON.stringify(error);
  }
  const mistral = typeof data.object === "string" && data.object.toLowerCase() === "error";
  if (mistral && typeof data.message === "string") return data.message;
  if (data.choices !== undefined) return undefined;
  if (typeof data.detail === "string") return data.detail;
  return validationWords(mistral ? data.message : undefined) ?? validationWords(data.detail);
}

/** A pydantic validation list (or `{detail: list}`) in words; undefined for anything else. */
function validationWords(value: unknown): string | undefined {
  const list = isObject(value) ? value.detail : value;
  if (!Array.isArray(list)) return undefined;
  const words = list.filter(isObject).filter((entry) => typeof entry.msg === "string")
    .map((entry) => {
      const loc = Array.isArray(entry.loc) ? entry.loc.map(String) : [];
      const at = (loc[0] === "body" ? loc.slice(1) : loc).join(".");
      return at === "" ? String(entry.msg) : `${at}: ${entry.msg}`;
    });
  return words.length === 0 ? undefined : words.join("; ");
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function clip(text: string, max = 200): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/** One server-sent event: its `event` name (absent for plain messages) and its joined data. */
interface ServerEvent {
  event: string | undefined;
  data: string;
}

/**
 * The event-stream format (WHATWG HTML, "server-sent events"): lines end in CR, LF or CRLF,
 * `:` starts a comment (OpenRouter sends `: OPENROUTER PROCESSING`), `data` lines join with
 * newlines, and a blank line ends an event. One field beyond the format: llama-server's
 * `error` line, read as an `error` event.
 */
class EventParser {
  #rest = "";
  #data: string[] = [];
  #event: string | undefined;
  #unframed = "";

  /** The start of the lines that are no field of the format, joined; a little over 200 characters at most. */
  get unframed(): string {
    return this.#unframed;
  }

  /** Takes more text; returns the events it completed. */
  push(text: string): ServerEvent[] {
    let all = this.#rest + text;
    // A CR at the very end may be half of a CRLF: its line waits for the next push.
    const cr = all.endsWith("\r") ? "\r" : "";
    if (cr !== "") all = all.slice(0, -1);
    const lines = all.split(/\r\n|\r|\n/);
    this.#rest = (lines.pop() ?? "") + cr;
    const events: ServerEvent[] = [];
    for (const line of lines) {
      const event = this.#line(line);
      if (event !== undefined) events.push(event);
    }
    return events;
  }

  /** The end of the body: an event without its blank line still counts. */
  flush(): ServerEvent[] {
    const rest = this.#rest.replace(/\r$/, "");
    this.#rest = "";
    // A line that is not blank completes no event; only the blank line added here does.
    if (rest !== "") this.#line(rest);
    const open = this.#line("");
    return open === undefined ? [] : [open];
  }

  #line(line: string): ServerEvent | undefined {
    if (line === "") {
      if (this.#data.length === 0) return (this.#event = undefined);
      const event = { event: this.#event, data: this.#data.join("\n") };
      this.#data = [];
      this.#event = undefined;
      return event;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") this.#data.push(value);
    else if (field === "event") this.#event = value;
    else if (field === "error") {
      // llama-server writes a failure after the stream began as an `error:` line, a field the
      // format does not define, and ends with `data: [DONE]` all the same
      // (`server_sent_event(sink, "error", …)` in its server.cpp): it is an error event.
      this.#event = "error";
      this.#data.push(value);
    } else if (field !== "id" && field !== "retry" && this.#unframed.length <= 200) {
      // The format ignores the line; it is kept for the failure, as a proxy's words may be in it.
      this.#unframed = `${this.#unframed} ${line}`.trimStart().slice(0, 201);
    }
    return undefined;
  }
}
