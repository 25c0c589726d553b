/**
 * A `/v2` client over a bare TCP socket that writes without reading: it sends its frames and
 * leaves the daemon's answers in the kernel until it is told to read them — what a stuck or
 * hostile client does, and what a WebSocket API that always reads cannot do.
 *
 * @module
 */

/** One text message the daemon sent, parsed. */
export type SilentMessage = { kind: string; [key: string]: unknown };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A client connected with {@linkcode openSilentLane}: `sendAll` writes, nothing is read
 * until `startReading`.
 *
 * @example
 * ```ts
 * const lane = await openSilentLane({ port, token, client: "flood" });
 * await lane.sendAll(inputs);
 * lane.startReading();
 * await lane.until((m) => m.kind === "ack" && m.request === "last");
 * ```
 */
export class SilentLane {
  readonly #conn: Deno.TcpConn;
  /** Bytes read after the upgrade's answer, not yet a whole frame. */
  #pending: Uint8Array;
  #reading = false;
  #closed = false;
  /** Every text message read so far, in order. */
  readonly messages: SilentMessage[] = [];
  #waiters: { done: () => boolean; resolve: () => void }[] = [];

  /** Wraps an upgraded connection whose first bytes after the answer are `rest`. */
  constructor(conn: Deno.TcpConn, rest: Uint8Array) {
    this.#conn = conn;
    this.#pending = rest;
  }

  /** Writes each message as one masked text frame, all in as few writes as the kernel takes. */
  async sendAll(messages: readonly Record<string, unknown>[]): Promise<void> {
    const frames = messages.map((m) => maskedFrame(0x1, encoder.encode(JSON.stringify(m))));
    const total = frames.reduce((n, f) => n + f.length, 0);
    const bytes = new Uint8Array(total);
    let at = 0;
    for (const frame of frames) {
      bytes.set(frame, at);
      at += frame.length;
    }
    for (let written = 0; written < bytes.length;) {
      written += await this.#conn.write(bytes.subarray(written));
    }
  }

  /** Starts reading the daemon's frames (what waited in the kernel first). */
  startReading(): void {
    if (this.#reading) return;
    this.#reading = true;
    this.#readLoop().catch(() => this.#end());
  }

  /**
   * Resolves once `done` holds over the messages read; rejects after `timeoutMs` or when the
   * socket closed first.
   */
  until(done: (messages: SilentMessage[]) => boolean, timeoutMs = 60_000): Promise<void> {
    if (done(this.messages)) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`silent lane: not done within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiters.push({
        done: () => this.#closed || done(this.messages),
        resolve: () => {
          clearTimeout(timer);
          if (done(this.messages)) resolve();
          else reject(new Error("silent lane: the socket closed first"));
        },
      });
    });
  }

  /** Closes the TCP socket. */
  close(): void {
    if (!this.#closed) this.#conn.close();
    this.#end();
  }

  async #readLoop(): Promise<void> {
    const chunk = new Uint8Array(1 << 16);
    for (;;) {
      this.#parseFrames();
      const n = await this.#conn.read(chunk);
      if (n === null) return this.#end();
      const next = new Uint8Array(this.#pending.length + n);
      next.set(this.#pending);
      next.set(chunk.subarray(0, n), this.#pending.length);
      this.#pending = next;
    }
  }

  /** Takes every whole frame out of what was read. */
  #parseFrames(): void {
    let offset = 0;
    const buf = this.#pending;
    for (;;) {
      if (buf.length - offset < 2) break;
      const opcode = buf[offset] & 0x0f;
      let length = buf[offset + 1] & 0x7f;
      let header = 2;
      if (length === 126) {
        if (buf.length - offset < 4) break;
        length = (buf[offset + 2] << 8) | buf[offset + 3];
        header = 4;
      } else if (length === 127) {
        if (buf.length - offset < 10) break;
        length = Number(new DataView(buf.buffer, buf.byteOffset + offset + 2, 8).getBigUint64(0));
        header = 10;
      }
      if (buf.length - offset < header + length) break;
      const payload = buf.subarray(offset + header, offset + header + length);
      offset += header + length;
      if (opcode === 0x1) this.messages.push(JSON.parse(decoder.decode(payload)));
      else if (opcode === 0x8) this.#end();
    }
    this.#pending = buf.slice(offset);
    this.#waiters = this.#waiters.filter((w) => {
      if (!w.done()) return true;
      w.resolve();
      return false;
    });
  }

  #end(): void {
    this.#closed = true;
    for (const waiter of this.#waiters) waiter.resolve();
    this.#waiters = [];
  }
}

/** One client frame: FIN, `opcode`, masked `payload`. */
function maskedFrame(opcode: number, payload: Uint8Array): Uint8Array {
  const size = payload.length;
  const header = size < 126 ? 2 : size < 65_536 ? 4 : 10;
  const frame = new Uint8Array(header + 4 + size);
  frame[0] = 0x80 | opcode;
  if (size < 126) frame[1] = 0x80 | size;
  else if (size < 65_536) {
    frame[1] = 0x80 | 126;
    frame[2] = size >> 8;
    frame[3] = size & 0xff;
  } else {
    frame[1] = 0x80 | 127;
    new DataView(frame.buffer, 2, 8).setBigUint64(0, BigInt(size));
  }
  const mask = crypto.getRandomValues(new Uint8Array(4));
  frame.set(mask, header);
  for (let i = 0; i < size; i++) frame[header + 4 + i] = payload[i] ^ mask[i & 3];
  return frame;
}

/**
 * Connects to `/v2` on 127.0.0.1 over bare TCP, upgrades and sends `hello` with the token;
 * reads nothing past the upgrade's answer.
 *
 * @throws {Error} when the daemon does not answer the upgrade with 101.
 */
export async function openSilentLane(
  options: { port: number; token: string; client: string },
): Promise<SilentLane> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: options.port });
  const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
  await conn.write(encoder.encode(
    `GET /v2 HTTP/1.1\r\nHost: 127.0.0.1:${options.port}\r\nUpgrade: websocket\r\n` +
      `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  ));
  let head = new Uint8Array(0);
  const chunk = new Uint8Array(4096);
  for (let i = 0; i < 100; i++) {
    const n = await conn.read(chunk);
    if (n === null) break;
    const next = new Uint8Array(head.length + n);
    next.set(head);
    next.set(chunk.subarray(0, n), head.length);
    head = next;
    const end = decoder.decode(head).indexOf("\r\n\r\n");
    if (end < 0) continue;
    const status = decoder.decode(head.subarray(0, end));
    if (!status.startsWith("HTTP/1.1 101")) {
      conn.close();
      throw new Error(`cannot open a silent lane: the upgrade was answered ${status}`);
    }
    const lane = new SilentLane(conn, head.slice(end + 4));
    await lane.sendAll([{ kind: "hello", token: options.token, client: options.client }]);
    return lane;
  }
  conn.close();
  throw new Error("cannot open a silent lane: no answer to the upgrade");
}
