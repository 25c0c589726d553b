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

/** Options for {@linkcode FrameDecoderStream}. */
export interface FrameDecoderOptions {
  /** The largest accepted frame body in bytes. @default {DEFAULT_MAX_FRAME_BYTES} */
  maxFrameBytes?: number;
}

/**
 * A `TransformStream` from raw bytes, split anywhere, to decoded JSON values.
 *
 * The stream errors with a {@linkcode KlbrError} on the first bad frame, and with
 * `frame_truncated` when the input ends inside a frame; a clean end between frames closes it.
 *
 * @example
 * ```ts
 * const frames = child.stdout.pipeThrough(new FrameDecoderStream());
 * for await (const frame of frames) console.log(frame);
 * ```
 */
export class FrameDecoderStream extends TransformStream<Uint8Array, unknown> {
  /** Creates a decoder with an optional maximum frame size. */
  constructor(options: FrameDecoderOptions = {}) {
    const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    const decoder = new TextDecoder("utf-8", { fatal: true });
    // Unread bytes are buffer[start, end). The buffer grows by doubling and is compacted in
    // place, so a large frame arriving in small chunks costs linear, not quadratic, copying.
    let buffer = new Uint8Array(0);
    let view = new DataView(buffer.buffer);
    let start = 0;
    let end = 0;
    super({
      transform(chunk, controller) {
        if (end + chunk.length > buffer.length) {
          const unread = end - start;
          const needed = unread + chunk.length;
          if (needed <= buffer.length) {
            buffer.copyWithin(0, start, end);
          } else {
            const grown = new Uint8Array(Math.max(needed, buffer.length * 2, 4096));
            grown.set(buffer.subarray(start, end), 0);
            buffer = grown;
            view = new DataView(buffer.buffer);
          }
          start = 0;
          end = unread;
        }
        buffer.set(chunk, end);
        end += chunk.length;
        while (end - start >= HEADER_BYTES) {
          const length = view.getUint32(start, false);
          if (length > maxFrameBytes) {
            throw new KlbrError(
              "frame_oversize",
              `cannot decode frame: length prefix exceeds the maximum of ${maxFrameBytes} bytes (got ${length})`,
            );
          }
          if (end - start - HEADER_BYTES < length) break;
          const body = buffer.subarray(start + HEADER_BYTES, start + HEADER_BYTES + length);
          start += HEADER_BYTES + length;
          controller.enqueue(decodeBody(decoder, body));
        }
        if (start === end) {
          start = 0;
          end = 0;
          if (buffer.length > RETAINED_BUFFER_BYTES) {
            // One huge frame must not pin its buffer for the life of the worker.
            buffer = new Uint8Array(0);
            view = new DataView(buffer.buffer);
          }
        }
      },
      flush() {
        const unread = end - start;
        if (unread > 0) {
          throw new KlbrError(
            "frame_truncated",
            `cannot decode frame: input ended inside a frame (got ${unread} trailing bytes)`,
          );
        }
      },
    });
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
