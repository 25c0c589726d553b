/**
 * The length-prefixed frame codec of the host ↔ workbench channel.
 *
 * A frame is a 4-byte big-endian unsigned length `N`, then `N` bytes of UTF-8 JSON encoding
 * one object. Decoding failures are distinct {@linkcode KlbrError} codes: `frame_truncated`,
 * `frame_oversize`, `frame_utf8`, `frame_json`.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";

/** The largest frame body either side accepts unless configured otherwise: 16 MiB. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

const HEADER_BYTES = 4;
const RETAINED_BUFFER_BYTES = 1024 * 1024;
const encoder = new TextEncoder();

/**
 * Encodes one JSON object as a frame.
 *
 * @example
 * ```ts
 * const bytes = encodeFrame({ kind: "ping", id: "rq_1" });
 * ```
 * @throws {KlbrError} `frame_oversize` when the encoded body exceeds `maxFrameBytes`.
 */
export function encodeFrame(
  value: Record<string, unknown>,
  maxFrameBytes: number = DEFAULT_MAX_FRAME_BYTES,
): Uint8Array {
  const body = encoder.encode(JSON.stringify(value));
  if (body.length > maxFrameBytes) {
    throw new KlbrError(
      "frame_oversize",
      `cannot encode frame: body is larger than the maximum of ${maxFrameBytes} bytes (got ${body.length})`,
    );
  }
  const out = new Uint8Array(HEADER_BYTES + body.length);
  new DataView(out.buffer).setUint32(0, body.length, false);
  out.set(body, HEADER_BYTES);
  return out;
}

/** Options for {@linkcode FrameDecoder}. */
export interface FrameDecoderOptions {
  /** The largest accepted frame body in bytes. @default {DEFAULT_MAX_FRAME_BYTES} */
  maxFrameBytes?: number;
}

/**
 * Decodes a stream of length-prefixed frames fed to it chunk by chunk, however the chunks cut
 * the frames. Unread bytes are kept in one buffer that grows by doubling and is compacted in
 * place, so a large frame arriving in small chunks costs linear, not quadratic, copying; a
 * buffer past 1 MiB is let go once it is read.
 *
 * @example
 * ```ts
 * const decoder = new FrameDecoder();
 * decoder.push(chunk, handle); // handle(frame) for each frame the chunk completed
 * decoder.end(); // throws frame_truncated when the input stopped inside a frame
 * ```
 */
export class FrameDecoder {
  readonly #maxFrameBytes: number;
  readonly #text = new TextDecoder("utf-8", { fatal: true });
  /** Unread bytes are `#buffer[#start, #end)`. */
  #buffer: Uint8Array = new Uint8Array(0);
  #view: DataView = new DataView(this.#buffer.buffer);
  #start = 0;
  #end = 0;

  /** Creates a decoder with an optional maximum frame size. */
  constructor(options: FrameDecoderOptions = {}) {
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  }

  /**
   * Takes the next chunk and hands each frame it completed to `onFrame`, in order.
   *
   * @throws {KlbrError} `frame_oversize` (a length prefix over the maximum), `frame_utf8` or
   *   `frame_json` (a body that does not decode), after the frames before it were handed on;
   *   the decoder is then unusable.
   */
  push(chunk: Uint8Array, onFrame: (frame: unknown) => void): void {
    this.#append(chunk);
    while (this.#end - this.#start >= HEADER_BYTES) {
      const length = this.#view.getUint32(this.#start, false);
      if (length > this.#maxFrameBytes) {
        throw new KlbrError(
          "frame_oversize",
          `cannot decode frame: length prefix exceeds the maximum of ${this.#maxFrameBytes} bytes (got ${length})`,
        );
      }
      if (this.#end - this.#start - HEADER_BYTES < length) break;
      const at = this.#start + HEADER_BYTES;
      this.#start = at + length;
      onFrame(decodeBody(this.#text, this.#buffer.subarray(at, at + length)));
    }
    if (this.#start === this.#end) {
      this.#start = 0;
      this.#end = 0;
      // One huge frame must not pin its buffer for the life of the worker.
      if (this.#buffer.length > RETAINED_BUFFER_BYTES) this.#reset(new Uint8Array(0));
    }
  }

  /**
   * Says the input ended.
   *
   * @throws {KlbrError} `frame_truncated` when it ended inside a frame.
   */
  end(): void {
    const unread = this.#end - this.#start;
    if (unread > 0) {
      throw new KlbrError(
        "frame_truncated",
        `cannot decode frame: input ended inside a frame (got ${unread} trailing bytes)`,
      );
    }
  }

  #append(chunk: Uint8Array): void {
    if (this.#end + chunk.length > this.#buffer.length) {
      const unread = this.#end - this.#start;
      const needed = unread + chunk.length;
      if (needed <= this.#buffer.length) {
        this.#buffer.copyWithin(0, this.#start, this.#end);
      } else {
        const grown = new Uint8Array(Math.max(needed, this.#buffer.length * 2, 4096));
        grown.set(this.#buffer.subarray(this.#start, this.#end), 0);
        this.#reset(grown);
      }
      this.#start = 0;
      this.#end = unread;
    }
    this.#buffer.set(chunk, this.#end);
    this.#end += chunk.length;
  }

  #reset(buffer: Uint8Array): void {
    this.#buffer = buffer;
    this.#view = new DataView(buffer.buffer);
  }
}

function decodeBody(decoder: TextDecoder, body: Uint8Array): unknown {
  let text: string;
  try {
    text = decoder.decode(body);
  } catch (cause) {
    throw new KlbrError(
      "frame_utf8",
      `cannot decode frame: body is not valid UTF-8 (got ${body.length} bytes)`,
      { cause },
    );
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new KlbrError(
      "frame_json",
      `cannot decode frame: body is not valid JSON (got ${JSON.stringify(text.slice(0, 60))})`,
      { cause },
    );
  }
}
