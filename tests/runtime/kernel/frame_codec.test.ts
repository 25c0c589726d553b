/**
 * The stdio frame codec at the byte level: exact encoding, each decoding failure with its own
 * code and message, and decoding that does not depend on where the byte stream was split.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { DEFAULT_MAX_FRAME_BYTES, encodeFrame, FrameDecoder } from "../../../runtime/kernel/mod.ts";
import { isKlbrError, KlbrError } from "../../../runtime/core/mod.ts";

/** What a decoder produced: every frame before the end, then either a clean close or an error. */
interface Decoded {
  frames: unknown[];
  error: unknown;
}

/** Feeds `chunks` to a fresh decoder, then ends it, and collects everything it produced. */
function decode(chunks: Uint8Array[], maxFrameBytes?: number): Promise<Decoded> {
  const decoder = new FrameDecoder({ maxFrameBytes });
  const frames: unknown[] = [];
  try {
    for (const chunk of chunks) decoder.push(chunk, (frame) => frames.push(frame));
    decoder.end();
  } catch (error) {
    return Promise.resolve({ frames, error });
  }
  return Promise.resolve({ frames, error: undefined });
}

/** Splits `bytes` at the given sorted cut points. */
function splitAt(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  let from = 0;
  for (const cut of cuts) {
    chunks.push(bytes.slice(from, cut));
    from = cut;
  }
  chunks.push(bytes.slice(from));
  return chunks;
}

/** A frame built by hand: a big-endian length followed by raw body bytes. */
function rawFrame(body: Uint8Array, length: number = body.length): Uint8Array {
  const out = new Uint8Array(4 + body.length);
  new DataView(out.buffer).setUint32(0, length, false);
  out.set(body, 4);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

function assertKlbr(error: unknown, code: string, message: string): void {
  assert.ok(error instanceof KlbrError, `expected a KlbrError, got ${String(error)}`);
  assert.equal(error.code, code);
  assert.equal(error.message, message);
}

const utf8 = new TextEncoder();

// A small stream with a multi-byte character, an astral character and empty strings, so that
// splits land inside a length prefix, inside a body and inside one UTF-8 sequence.
const SMALL_FRAMES = [
  { kind: "ping", id: "rq_1" },
  { kind: "stream", id: "rq_2", name: "stdout", text: "é🦀" },
  { kind: "ok", id: "", result: "" },
];
const SMALL_STREAM = concat(SMALL_FRAMES.map((f) => encodeFrame(f)));

Deno.test("`encodeFrame()` writes a big-endian byte length and then the UTF-8 JSON body", () => {
  const bytes = encodeFrame({ kind: "ping", id: "rq_1" });
  const body = utf8.encode('{"kind":"ping","id":"rq_1"}');
  assert.deepEqual(bytes, rawFrame(body));
  assert.deepEqual([...bytes.subarray(0, 4)], [0, 0, 0, body.length]);
});

Deno.test("`encodeFrame()` counts the length in bytes, not UTF-16 code units", () => {
  // "é" is one code unit and two bytes; "🦀" is two code units and four bytes.
  const bytes = encodeFrame({ t: "é🦀" });
  const length = new DataView(bytes.buffer).getUint32(0, false);
  assert.equal(length, utf8.encode('{"t":"é🦀"}').length);
  assert.equal(length, 14);
});

Deno.test("`encodeFrame()` refuses a body one byte above the maximum", () => {
  const value = { t: "x".repeat(10) }; // {"t":"xxxxxxxxxx"} is 18 bytes
  assert.equal(encodeFrame(value, 18).length, 22);
  assert.throws(() => encodeFrame(value, 17), (error: unknown) => {
    assertKlbr(
      error,
      "frame_oversize",
      "cannot encode frame: body is larger than the maximum of 17 bytes (got 18)",
    );
    return true;
  });
});

Deno.test("`encodeFrame()` refuses a body above the default maximum of 16 MiB", () => {
  assert.equal(DEFAULT_MAX_FRAME_BYTES, 16 * 1024 * 1024);
  const value = { t: "x".repeat(DEFAULT_MAX_FRAME_BYTES) };
  assert.throws(() => encodeFrame(value), (error: unknown) => {
    assertKlbr(
      error,
      "frame_oversize",
      `cannot encode frame: body is larger than the maximum of 16777216 bytes (got ${
        DEFAULT_MAX_FRAME_BYTES + 8
      })`,
    );
    return true;
  });
});

Deno.test("`FrameDecoder` round-trips several frames written in one chunk", async () => {
  const result = await decode([SMALL_STREAM]);
  assert.equal(result.error, undefined);
  assert.deepEqual(result.frames, SMALL_FRAMES);
});

Deno.test("`FrameDecoder` closes with no frames on empty input and on empty chunks", async () => {
  assert.deepEqual(await decode([]), { frames: [], error: undefined });
  const empty = new Uint8Array(0);
  assert.deepEqual(await decode([empty, empty]), { frames: [], error: undefined });
});

Deno.test("`FrameDecoder` decodes a frame of exactly the maximum size", async () => {
  const frame = encodeFrame({ t: "abc" }); // 11-byte body
  const result = await decode([frame], 11);
  assert.deepEqual(result, { frames: [{ t: "abc" }], error: undefined });
});

Deno.test("`FrameDecoder` fails with frame_truncated when input ends inside the header", async () => {
  const result = await decode([encodeFrame({ a: 1 }), new Uint8Array([0, 0])]);
  // The complete frame before the cut is still delivered.
  assert.deepEqual(result.frames, [{ a: 1 }]);
  assertKlbr(
    result.error,
    "frame_truncated",
    "cannot decode frame: input ended inside a frame (got 2 trailing bytes)",
  );
});

Deno.test("`FrameDecoder` fails with frame_truncated when input ends inside the body", async () => {
  const whole = encodeFrame({ text: "hello" }); // 16-byte body
  const result = await decode([whole.subarray(0, 4 + 5)]);
  assert.deepEqual(result.frames, []);
  assertKlbr(
    result.error,
    "frame_truncated",
    "cannot decode frame: input ended inside a frame (got 9 trailing bytes)",
  );
});

Deno.test("`FrameDecoder` fails with frame_oversize on a length prefix above the maximum", async () => {
  const result = await decode([rawFrame(utf8.encode('{"t":"abcd"}'))], 11);
  assertKlbr(
    result.error,
    "frame_oversize",
    "cannot decode frame: length prefix exceeds the maximum of 11 bytes (got 12)",
  );
});

Deno.test("`FrameDecoder` refuses an oversize prefix as soon as the header arrives", () => {
  // Waiting for 4 GiB that never comes would hang the host; the header alone must fail it.
  const decoder = new FrameDecoder();
  assert.throws(() => decoder.push(new Uint8Array([0xff, 0xff, 0xff, 0xff]), () => {}), (error) => {
    assertKlbr(
      error,
      "frame_oversize",
      "cannot decode frame: length prefix exceeds the maximum of 16777216 bytes (got 4294967295)",
    );
    return true;
  });
});

Deno.test("`FrameDecoder` fails with frame_utf8 on a body that is not UTF-8", async () => {
  const cases: [string, number[]][] = [
    ["a lone continuation byte", [0x80]],
    ["an invalid byte", [0x22, 0xff, 0x22]],
    ["an overlong encoding of '/'", [0x22, 0xc0, 0xaf, 0x22]],
    ["an encoded surrogate", [0x22, 0xed, 0xa0, 0x80, 0x22]],
    ["a cut multi-byte sequence", [0x22, 0xe2, 0x82, 0x22]],
  ];
  for (const [name, body] of cases) {
    const result = await decode([encodeFrame({ before: 1 }), rawFrame(new Uint8Array(body))]);
    assert.deepEqual(result.frames, [{ before: 1 }], name);
    assertKlbr(
      result.error,
      "frame_utf8",
      `cannot decode frame: body is not valid UTF-8 (got ${body.length} bytes)`,
    );
  }
});

Deno.test("`FrameDecoder` fails with frame_json on a body that is not JSON", async () => {
  const cases: [string, string][] = [
    ["{", '"{"'],
    ["", '""'],
    ["{'kind': 'ok'}", `"{'kind': 'ok'}"`],
    ['{"a":1}{"b":2}', '"{\\"a\\":1}{\\"b\\":2}"'],
    // The message quotes only the first 60 characters of a long body.
    ["[" + "1,".repeat(100), JSON.stringify("[" + "1,".repeat(100)).slice(0, 61) + '"'],
  ];
  for (const [body, quoted] of cases) {
    const result = await decode([rawFrame(utf8.encode(body))]);
    assertKlbr(
      result.error,
      "frame_json",
      `cannot decode frame: body is not valid JSON (got ${quoted})`,
    );
  }
});

Deno.test("`FrameDecoder` stops at the first bad frame and drops what follows", async () => {
  const bytes = concat([
    encodeFrame({ n: 1 }),
    rawFrame(utf8.encode("nope")),
    encodeFrame({ n: 2 }),
  ]);
  const result = await decode([bytes]);
  assert.deepEqual(result.frames, [{ n: 1 }]);
  assert.ok(isKlbrError(result.error, "frame_json"));
});

Deno.test("`FrameDecoder` decodes the same frames at every single split point", async () => {
  for (let cut = 0; cut <= SMALL_STREAM.length; cut++) {
    const result = await decode(splitAt(SMALL_STREAM, [cut]));
    assert.deepEqual(result, { frames: SMALL_FRAMES, error: undefined }, `split at ${cut}`);
  }
});

Deno.test("`FrameDecoder` decodes the same frames at every pair of split points", async () => {
  for (let first = 0; first <= SMALL_STREAM.length; first++) {
    for (let second = first; second <= SMALL_STREAM.length; second++) {
      const result = await decode(splitAt(SMALL_STREAM, [first, second]));
      assert.deepEqual(
        result,
        { frames: SMALL_FRAMES, error: undefined },
        `split at ${first} and ${second}`,
      );
    }
  }
});

Deno.test("`FrameDecoder` decodes a stream fed one byte at a time", async () => {
  const bytes = [...SMALL_STREAM].map((b) => new Uint8Array([b]));
  assert.deepEqual(await decode(bytes), { frames: SMALL_FRAMES, error: undefined });
});

Deno.test("`FrameDecoder` reports every prefix that ends mid-frame as truncated", async () => {
  const boundaries = new Set<number>([0]);
  let at = 0;
  for (const frame of SMALL_FRAMES) {
    at += encodeFrame(frame).length;
    boundaries.add(at);
  }
  for (let end = 0; end <= SMALL_STREAM.length; end++) {
    const result = await decode(splitAt(SMALL_STREAM.subarray(0, end), [Math.floor(end / 2)]));
    const complete = [...boundaries].filter((b) => b > 0 && b <= end).length;
    assert.deepEqual(result.frames, SMALL_FRAMES.slice(0, complete), `prefix of ${end}`);
    if (boundaries.has(end)) {
      assert.equal(result.error, undefined, `prefix of ${end}`);
    } else {
      const last = Math.max(...[...boundaries].filter((b) => b <= end));
      assertKlbr(
        result.error,
        "frame_truncated",
        `cannot decode frame: input ended inside a frame (got ${end - last} trailing bytes)`,
      );
    }
  }
});

Deno.test("`FrameDecoder` decodes a large frame that arrives in small chunks", async () => {
  // Exercises the decoder's buffer growth and in-place compaction across a thousand chunks.
  const text = "ü".repeat(512 * 1024); // 1 MiB of two-byte characters
  const bytes = encodeFrame({ text });
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += 1000) chunks.push(bytes.subarray(i, i + 1000));
  const result = await decode([...chunks, encodeFrame({ after: true })]);
  assert.equal(result.error, undefined);
  assert.deepEqual(result.frames, [{ text }, { after: true }]);
});

Deno.test("`FrameDecoder` fails only with a frame code on arbitrary bytes", async () => {
  const codes = new Set(["frame_truncated", "frame_oversize", "frame_utf8", "frame_json"]);
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ maxLength: 64 }),
      fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 4 }),
      async (bytes, sizes) => {
        const chunks: Uint8Array[] = [];
        for (let at = 0, i = 0; at < bytes.length; i++) {
          const size = sizes[i % sizes.length];
          chunks.push(bytes.slice(at, at + size));
          at += size;
        }
        const result = await decode(chunks, 32);
        if (result.error !== undefined) {
          assert.ok(
            result.error instanceof KlbrError && codes.has(result.error.code),
            `unexpected failure: ${String(result.error)}`,
          );
        }
      },
    ),
    { numRuns: 300 },
  );
});
