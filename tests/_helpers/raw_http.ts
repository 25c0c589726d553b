/**
 * HTTP and WebSocket clients over a raw TCP socket, for tests that must send exactly the
 * headers they name: `fetch` and `WebSocket` drop or rewrite `Host` and `Origin`, and never
 * stop reading.
 *
 * @module
 */

/** A parsed HTTP response head and its body as text. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Reads from `conn` until the peer closes it or `done(text)` says the response is whole. */
async function readAll(conn: Deno.Conn, done: (text: string) => boolean): Promise<string> {
  const buf = new Uint8Array(64 * 1024);
  let text = "";
  for (let i = 0; i < 10_000; i++) {
    const n = await conn.read(buf);
    if (n === null) break;
    text += new TextDecoder().decode(buf.subarray(0, n));
    if (done(text)) break;
  }
  return text;
}

/** Whether `text` holds a whole response: its head, and its body by content-length. */
function complete(text: string): boolean {
  if (!text.includes("\r\n\r\n")) return false;
  const response = parse(text);
  if (response.status === 101) return true;
  const length = Number(response.headers["content-length"] ?? NaN);
  return Number.isFinite(length) && new TextEncoder().encode(response.body).length >= length;
}

function parse(text: string): RawResponse {
  const split = text.indexOf("\r\n\r\n");
  const head = split < 0 ? text : text.slice(0, split);
  const [statusLine, ...lines] = head.split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const at = line.indexOf(":");
    if (at > 0) headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
  }
  return {
    status: Number(statusLine.split(" ")[1]),
    headers,
    body: split < 0 ? "" : text.slice(split + 4),
  };
}

/**
 * Sends one HTTP/1.1 request with exactly `headers` (no `Host` unless given) and
 * `Connection: close`, and returns the response.
 */
export async function rawRequest(
  port: number,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<RawResponse> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const headers = { ...options.headers, connection: "close" };
    const body = options.body ?? "";
    const lines = [
      `${options.method ?? "GET"} ${options.path} HTTP/1.1`,
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      ...(body === "" ? [] : [`content-length: ${new TextEncoder().encode(body).length}`]),
    ];
    await conn.write(new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n" + body));
    return parse(await readAll(conn, () => false));
  } finally {
    try {
      conn.close();
    } catch { /* closed by the peer */ }
  }
}

/** A WebSocket client that reads only when asked: a client that stops reading, on purpose. */
export interface RawSocket {
  /** The upgrade response (101 when it upgraded). */
  response: RawResponse;
  /** Sends one text message (masked, as a client must). */
  send(text: string): Promise<void>;
  /** Reads whatever the socket holds now, up to `bytes`, or waits for the next data. */
  read(bytes?: number): Promise<Uint8Array | null>;
  close(): void;
}

/**
 * Opens `/v2` with exactly `headers` added to the upgrade request. Nothing is read after the
 * upgrade response until {@linkcode RawSocket.read} is called.
 */
export async function rawSocket(
  port: number,
  headers: Record<string, string> = {},
): Promise<RawSocket> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
  const all = {
    host: `127.0.0.1:${port}`,
    upgrade: "websocket",
    connection: "Upgrade",
    "sec-websocket-key": key,
    "sec-websocket-version": "13",
    ...headers,
  };
  const lines = ["GET /v2 HTTP/1.1", ...Object.entries(all).map(([k, v]) => `${k}: ${v}`)];
  await conn.write(new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n"));
  // A 101 has no body; a refusal has a body of its content-length (the connection stays open).
  const text = await readAll(conn, complete);
  return {
    response: parse(text),
    async send(message: string) {
      const payload = new TextEncoder().encode(message);
      const mask = crypto.getRandomValues(new Uint8Array(4));
      const length = payload.length < 126
        ? [0x80 | payload.length]
        : payload.length < 65536
        ? [0x80 | 126, payload.length >> 8, payload.length & 0xff]
        : [0x80 | 127, 0, 0, 0, 0, ...[24, 16, 8, 0].map((s) => (payload.length >>> s) & 0xff)];
      const frame = new Uint8Array(1 + length.length + 4 + payload.length);
      frame.set([0x81, ...length, ...mask]);
      payload.forEach((b, i) => (frame[1 + length.length + 4 + i] = b ^ mask[i % 4]));
      await conn.write(frame);
    },
    async read(bytes = 64 * 1024) {
      const buf = new Uint8Array(bytes);
      const n = await conn.read(buf);
      return n === null ? null : buf.subarray(0, n);
    },
    close() {
      try {
        conn.close();
      } catch { /* already closed */ }
    },
  };
}
