/**
 * The shared envelopes and their boundaries: what each side of each wire may send, the exact
 * refusals when it oversteps, envelopes surviving the frame codec whatever the chunking, and
 * `docs/protocol.md` staying true to the schemas.
 *
 * Byte-level codec failures live in `tests/runtime/kernel/frame_codec.test.ts`; ids in
 * `tests/runtime/core/ids.test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { encodeFrame, FrameDecoder } from "../runtime/kernel/mod.ts";
import {
  CellReply,
  ClientMessage,
  HostFrame,
  HostRequest,
  HostRpcReply,
  KlbrError,
  OPERATOR_KINDS,
  parseClientMessage,
  parseWorkerFrame,
  RunParams,
  SendParams,
  ServerMessage,
  WorkerFrame,
} from "../runtime/core/mod.ts";

function assertKlbr(error: unknown, code: string, message: string): true {
  assert.ok(error instanceof KlbrError, `expected a KlbrError, got ${String(error)}`);
  assert.equal(error.code, code);
  assert.equal(error.message, message);
  return true;
}

/** Decodes `chunks` with a fresh `FrameDecoder`; throws at the first bad frame. */
function decodeAll(chunks: Uint8Array[]): Promise<unknown[]> {
  const frames: unknown[] = [];
  const decoder = new FrameDecoder();
  try {
    for (const chunk of chunks) decoder.push(chunk, (frame) => frames.push(frame));
    decoder.end();
  } catch (error) {
    return Promise.reject(error);
  }
  return Promise.resolve(frames);
}

/** One valid frame of every host-only kind. */
const HOST_FRAMES: HostFrame[] = [
  {
    kind: "init",
    id: "rq_1",
    generation: 3,
    session: "default",
    workspace: "/home/owner/work",
    skills: {
      revision: "sk1",
      roots: ["/skills"],
      bodies: { workspace: "# workspace\n" },
      refused: [],
    },
    behavior: null,
  },
  { kind: "execute", id: "rq_2", cell: "cell_1", code: "1 + 1" },
  { kind: "cancel", id: "rq_3", target: "rq_2" },
  { kind: "hook", id: "rq_4", name: "attention.plan", args: { pending: [] } },
  { kind: "ping", id: "rq_5" },
  { kind: "shutdown", id: "rq_6" },
  { kind: "rpc_ok", id: "w1", result: { send_id: "snd_1", seq: 4 } },
  { kind: "rpc_error", id: "w2", code: "path_escape", message: "cannot run: cwd escapes" },
];

/** One valid frame of every worker kind. */
const WORKER_FRAMES: WorkerFrame[] = [
  { kind: "ok", id: "rq_5", result: {} },
  { kind: "error", id: "rq_9", code: "unknown_kind", message: "unknown kind 'nope'" },
  { kind: "stream", id: "rq_2", name: "stderr", text: "warning\n" },
  { kind: "rpc", id: "w1", parent: "rq_2", method: "local.send", params: { text: "hi" } },
  { kind: "rpc_cancel", id: "w1" },
];

Deno.test("`HostFrame` accepts one example of every host kind", () => {
  assert.deepEqual(HOST_FRAMES.map((f) => f.kind), [
    "init",
    "execute",
    "cancel",
    "hook",
    "ping",
    "shutdown",
    "rpc_ok",
    "rpc_error",
  ]);
  for (const frame of HOST_FRAMES) assert.deepEqual(HostFrame.parse(frame), frame);
});

Deno.test("`parseWorkerFrame()` accepts every worker kind and strips unknown fields", () => {
  for (const frame of WORKER_FRAMES) {
    assert.deepEqual(parseWorkerFrame({ ...frame, extra: true }), frame);
  }
});

Deno.test("`parseWorkerFrame()` refuses every host-only kind with role_forbidden", () => {
  // A worker that could forge `execute` or `rpc_ok` could speak for the host; the kinds are
  // refused even when the rest of the frame is a perfectly valid host frame.
  for (const frame of HOST_FRAMES) {
    assert.throws(
      () => parseWorkerFrame(frame),
      (error) =>
        assertKlbr(
          error,
          "role_forbidden",
          `cannot accept worker frame: kind "${frame.kind}" is host-only`,
        ),
    );
  }
});

Deno.test("`parseWorkerFrame()` refuses an unknown or missing kind with frame_unknown_kind", () => {
  const cases: [unknown, string][] = [
    [{ kind: "bogus", id: "x" }, '"bogus"'],
    [{ kind: "OK", id: "x" }, '"OK"'],
    [{ kind: "", id: "x" }, '""'],
    [{ kind: 7, id: "x" }, "7"],
    [{ id: "x" }, "null"],
    [{ kind: null }, "null"],
    [null, "null"],
    ["ok", "null"],
    [[{ kind: "ok" }], "null"],
  ];
  for (const [value, got] of cases) {
    assert.throws(
      () => parseWorkerFrame(value),
      (error) =>
        assertKlbr(
          error,
          "frame_unknown_kind",
          `cannot accept worker frame: unknown kind (got ${got})`,
        ),
    );
  }
});

Deno.test("`parseWorkerFrame()` refuses an unknown kind that came through the decoder", async () => {
  const [decoded] = await decodeAll([encodeFrame({ kind: "telemetry", id: "w9" })]);
  assert.throws(
    () => parseWorkerFrame(decoded),
    (error) =>
      assertKlbr(
        error,
        "frame_unknown_kind",
        'cannot accept worker frame: unknown kind (got "telemetry")',
      ),
  );
});

Deno.test("`parseWorkerFrame()` refuses a known kind with bad fields, naming each field", () => {
  const cases: [unknown, string][] = [
    [
      { kind: "stream", id: "rq_2", name: "stdin", text: "" },
      'stream name: Invalid option: expected one of "stdout"|"stderr"',
    ],
    [
      { kind: "stream", id: "", name: "stdout", text: "" },
      "stream id: Too small: expected string to have >=1 characters",
    ],
    [
      { kind: "rpc", id: "w1", parent: "rq_2", method: "local.send", params: [] },
      "rpc params: Invalid input: expected record, received array",
    ],
    [
      { kind: "error", id: "rq_1", code: "internal" },
      "error message: Invalid input: expected string, received undefined",
    ],
    [{ kind: "rpc_cancel" }, "rpc_cancel id: Invalid input: expected string, received undefined"],
  ];
  for (const [value, detail] of cases) {
    assert.throws(
      () => parseWorkerFrame(value),
      (error) => assertKlbr(error, "frame_invalid", `cannot accept worker frame: ${detail}`),
    );
  }
});

Deno.test("`HostRequest` refuses an unknown hook name and a negative generation", () => {
  assert.equal(
    HostRequest.safeParse({ kind: "hook", id: "rq_1", name: "turn.after", args: {} }).success,
    false,
  );
  assert.equal(HostRequest.safeParse({ ...HOST_FRAMES[0], generation: -1 }).success, false);
  assert.equal(HostRpcReply.safeParse({ kind: "rpc_error", id: "w1", code: "x" }).success, false);
});

Deno.test("`CellReply`, `RunParams` and `SendParams` hold the documented shapes and defaults", () => {
  const reply = {
    outcome: "ok",
    value: "2",
    stdout: "",
    stderr: "",
    error: null,
    wait: null,
    duration_ms: 1.5,
  };
  assert.deepEqual(CellReply.parse(reply), reply);
  assert.equal(CellReply.safeParse({ ...reply, outcome: "timed_out" }).success, false);
  assert.deepEqual(RunParams.parse({ argv: ["ls"] }), { argv: ["ls"], timeout_s: 60, cwd: null });
  assert.equal(RunParams.safeParse({ argv: [] }).success, false);
  assert.equal(RunParams.safeParse({ argv: ["sleep"], timeout_s: 0 }).success, false);
  assert.equal(RunParams.safeParse({ argv: ["sleep"], timeout_s: 24 * 3600 + 1 }).success, false);
  assert.equal(SendParams.safeParse({ text: "" }).success, false);
  assert.equal(SendParams.safeParse({ text: "x".repeat(1_000_001) }).success, false);
});

/** One valid message of every operator kind. */
const OPERATOR_MESSAGES = [
  { kind: "op.status", request: "r1" },
  { kind: "op.reset", request: "r2", session: "default" },
  { kind: "op.compact", request: "r3", session: "default" },
  { kind: "op.repair", request: "r3r", session: "default" },
  { kind: "op.drain", request: "r4", session: "default" },
  { kind: "op.stop", request: "r5", session: "default" },
  { kind: "op.resume", request: "r5r", session: "default" },
  { kind: "op.activate", request: "r6", session: "default", epoch: 3, release: "3fa2" },
  {
    kind: "op.cancel_cell",
    request: "r8c",
    session: "default",
    cell: "cell_01JHMMRR878CS2QQ58HYY0RD73",
  },
  { kind: "op.jobs", request: "r7", session: "default" },
  { kind: "op.cancel_job", request: "r8", job: "job_01JD3QZ8X7M2V6B9K4T1R0N5PW" },
  { kind: "op.rollback", request: "r9", session: "default" },
  { kind: "op.maintain", request: "r10", session: "default", reason: "weekly" },
  { kind: "op.candidates", request: "r11", session: "default" },
  { kind: "op.trace", request: "r12", session: "default", target: "fr_01" },
  { kind: "op.token_rotate", request: "r13" },
  { kind: "op.budget", request: "r14", session: "default", reset: true },
  { kind: "op.context", request: "r15", session: "default" },
  { kind: "op.frames", request: "r16", session: "default", limit: 20 },
  { kind: "op.history_search", request: "r17", session: "default", query: "zebra" },
];

Deno.test("`parseClientMessage()` refuses every op.* kind to a client without the operator role", () => {
  assert.deepEqual(OPERATOR_MESSAGES.map((m) => m.kind), [...OPERATOR_KINDS]);
  for (const message of OPERATOR_MESSAGES) {
    assert.throws(
      () => parseClientMessage(message, "viewer"),
      (error) => {
        assertKlbr(
          error,
          "role_forbidden",
          `cannot run ${message.kind}: the operator role needs the token given at hello`,
        );
        assert.equal((error as KlbrError).status, 403);
        return true;
      },
    );
  }
});

Deno.test("`parseClientMessage()` checks the role before the fields of an op.* message", () => {
  // A client without the role learns nothing about what a valid operator message looks like.
  assert.throws(
    () => parseClientMessage({ kind: "op.activate" }, "viewer"),
    (error) => (error as KlbrError).code === "role_forbidden",
  );
});

Deno.test("`parseClientMessage()` accepts every op.* kind from the operator role", () => {
  for (const message of OPERATOR_MESSAGES) {
    assert.deepEqual(parseClientMessage(message, "operator"), message);
  }
});

Deno.test("`parseClientMessage()` accepts hello and ping from either role and input from the operator, with defaults", () => {
  for (const role of ["viewer", "operator"] as const) {
    assert.deepEqual(parseClientMessage({ kind: "hello" }, role), {
      kind: "hello",
      session: "default",
      since: 0,
    });
    assert.deepEqual(parseClientMessage({ kind: "ping" }, role), { kind: "ping" });
  }
  assert.deepEqual(
    parseClientMessage(
      { kind: "input", request: "r1", client_msg_id: "m1", text: "hé 🦀" },
      "operator",
    ),
    {
      kind: "input",
      request: "r1",
      client_msg_id: "m1",
      text: "hé 🦀",
      conversation: "local:default",
      author: "owner",
    },
  );
  // A read-only viewer (no token, where the configuration allows it) sends no input.
  assert.throws(
    () =>
      parseClientMessage(
        { kind: "input", request: "r1", client_msg_id: "m1", text: "x" },
        "viewer",
      ),
    (error) =>
      assertKlbr(
        error,
        "role_forbidden",
        "cannot accept input: this connection is read-only (it showed no token or session cookie)",
      ),
  );
});

Deno.test("`parseClientMessage()` answers a malformed message with invalid_input naming the field", () => {
  const cases: [unknown, string][] = [
    [
      { kind: "input", request: "r1", client_msg_id: "m1" },
      "input text: Invalid input: expected string, received undefined",
    ],
    [
      { kind: "input", request: "r1", client_msg_id: "m1", text: "" },
      "input text: Too small: expected string to have >=1 characters, or an attachment",
    ],
    [
      { kind: "input", request: "", client_msg_id: "m1", text: "x" },
      "input request: Too small: expected string to have >=1 characters",
    ],
    [
      { kind: "input", request: "r1", client_msg_id: "m".repeat(129), text: "x" },
      "input client_msg_id: Too big: expected string to have <=128 characters",
    ],
    [{ kind: "hello", since: -1 }, "hello since: Too small: expected number to be >=0"],
    [{ kind: "hello", since: 1.5 }, "hello since: Invalid input: expected int, received number"],
    [{ kind: "hello", session: "Not A Name" }, "hello session: expected a session name"],
    [{ kind: "hello", token: 42 }, "hello token: Invalid input: expected string, received number"],
    [null, "(root): Invalid input: expected object, received null"],
    [[], "(root): Invalid input: expected object, received array"],
  ];
  for (const [value, detail] of cases) {
    assert.throws(
      () => parseClientMessage(value, "operator"),
      (error) => assertKlbr(error, "invalid_input", `cannot accept client message: ${detail}`),
    );
  }
});

Deno.test("`parseClientMessage()` names the kind field for an unknown or missing kind", () => {
  const expected =
    "kind: Invalid discriminator value. Expected 'hello' | 'page' | 'input' | 'ping' | " +
    "'op.status' | 'op.reset' | 'op.compact' | 'op.repair' | 'op.drain' | 'op.stop' | 'op.resume' | " +
    "'op.activate' | " +
    "'op.cancel_cell' | 'op.jobs' | 'op.cancel_job' | " +
    "'op.rollback' | 'op.maintain' | 'op.candidates' | 'op.trace' | 'op.token_rotate' | " +
    "'op.budget' | 'op.context' | 'op.frames' | 'op.history_search'";
  for (const [value, prefix] of [[{ kind: "record" }, "record "], [{}, ""]] as const) {
    assert.throws(
      () => parseClientMessage(value, "operator"),
      (error) =>
        assertKlbr(error, "invalid_input", `cannot accept client message: ${prefix}${expected}`),
    );
  }
});

Deno.test("`parseClientMessage()` names each bad field of an operator's op.activate", () => {
  assert.throws(
    () =>
      parseClientMessage(
        { kind: "op.activate", request: "r6", session: "default", epoch: -1, release: "" },
        "operator",
      ),
    (error) =>
      assertKlbr(
        error,
        "invalid_input",
        "cannot accept client message: op.activate epoch: Too small: expected number to be >=0; " +
          "release: Too small: expected string to have >=1 characters",
      ),
  );
});

Deno.test("`ServerMessage` refuses a record whose seq is not a positive integer", () => {
  const record = { kind: "record", session: "default", seq: 1, at: 0, type: "operator", data: {} };
  assert.equal(ServerMessage.safeParse(record).success, true);
  assert.equal(ServerMessage.safeParse({ ...record, seq: 0 }).success, false);
  assert.equal(ServerMessage.safeParse({ ...record, seq: 2.5 }).success, false);
  assert.equal(ServerMessage.safeParse({ ...record, data: [] }).success, false);
});

// ---------------------------------------------------------------------------------------
// Envelopes through the codec, split anywhere

/** `fc.record` without null-prototype objects, which JSON can never produce. */
function plainRecord<T>(model: { [K in keyof T]: fc.Arbitrary<T[K]> }): fc.Arbitrary<T> {
  return fc.record(model, { noNullPrototype: true }) as fc.Arbitrary<T>;
}

const text = fc.oneof(
  fc.constant(""),
  fc.string({ unit: "binary" }),
  fc.string({ unit: "grapheme" }),
  fc.constantFrom("é", "日本語", "🦀", "a\u0000b", "\u2028\u2029", "\ud800"),
);
const nonEmpty = fc.string({ unit: "binary", minLength: 1, maxLength: 12 });
// JSON cannot carry -0, so values are normalised through JSON first.
const json = fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.parse(JSON.stringify(v)) as unknown);
// zod drops a "__proto__" key of a record (it never becomes the prototype); leave it out.
const jsonRecord = fc.dictionary(text.filter((k) => k !== "__proto__"), json, {
  maxKeys: 4,
  noNullPrototype: true,
});

const hostRequest: fc.Arbitrary<HostRequest> = fc.oneof(
  plainRecord({
    kind: fc.constant("init" as const),
    id: nonEmpty,
    generation: fc.nat(),
    session: text,
    workspace: text,
    skills: plainRecord({
      revision: text,
      roots: fc.array(text, { maxLength: 3 }),
      bodies: fc.dictionary(text.filter((k) => k !== "__proto__"), text, {
        maxKeys: 3,
        noNullPrototype: true,
      }),
      refused: fc.array(plainRecord({ id: text, root: text, reason: text }), { maxLength: 2 }),
    }),
    behavior: fc.option(plainRecord({ revision: text, path: text }), { nil: null }),
  }),
  plainRecord({ kind: fc.constant("execute" as const), id: nonEmpty, cell: text, code: text }),
  plainRecord({ kind: fc.constant("cancel" as const), id: nonEmpty, target: nonEmpty }),
  plainRecord({
    kind: fc.constant("hook" as const),
    id: nonEmpty,
    name: fc.constantFrom("attention.plan", "model.plan", "context.prepare", "turn.next"),
    args: jsonRecord,
  }),
  plainRecord({ kind: fc.constantFrom("ping" as const, "shutdown" as const), id: nonEmpty }),
);

const workerFrame: fc.Arbitrary<WorkerFrame> = fc.oneof(
  plainRecord({ kind: fc.constant("ok" as const), id: text, result: json }),
  fc.record(
    {
      kind: fc.constant("error" as const),
      id: text,
      code: text,
      message: text,
      traceback: text,
    },
    { requiredKeys: ["kind", "id", "code", "message"], noNullPrototype: true },
  ),
  plainRecord({
    kind: fc.constant("stream" as const),
    id: nonEmpty,
    name: fc.constantFrom("stdout" as const, "stderr" as const),
    text,
  }),
  plainRecord({
    kind: fc.constant("rpc" as const),
    id: nonEmpty,
    parent: text,
    method: text,
    params: jsonRecord,
  }),
  plainRecord({ kind: fc.constant("rpc_cancel" as const), id: nonEmpty }),
);

/** Chunk sizes to cut a byte stream with: one byte at a time, or an arbitrary cycle of sizes. */
const chunkSizes = fc.oneof(
  fc.constant([1]),
  fc.array(fc.integer({ min: 1, max: 97 }), { minLength: 1, maxLength: 8 }),
);

function chunk(bytes: Uint8Array, sizes: readonly number[]): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const size = sizes[i % sizes.length];
    chunks.push(bytes.slice(at, at + size));
    at += size;
  }
  return chunks;
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

Deno.test("host requests survive encoding and decoding at any chunk boundaries", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(hostRequest, { maxLength: 8 }), chunkSizes, async (frames, sizes) => {
      const bytes = concat(frames.map((f) => encodeFrame(f)));
      const decoded = await decodeAll(chunk(bytes, sizes));
      assert.deepEqual(decoded.map((f) => HostRequest.parse(f)), frames);
    }),
    { numRuns: 150 },
  );
});

Deno.test("worker frames survive encoding and decoding at any chunk boundaries", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(workerFrame, { maxLength: 8 }), chunkSizes, async (frames, sizes) => {
      const bytes = concat(frames.map((f) => encodeFrame(f)));
      const decoded = await decodeAll(chunk(bytes, sizes));
      assert.deepEqual(decoded.map(parseWorkerFrame), frames);
    }),
    { numRuns: 150 },
  );
});

// ---------------------------------------------------------------------------------------
// docs/protocol.md stays true to the schemas

/** Every ```json block of a markdown section, parsed. */
function jsonBlocks(markdown: string, heading: string): unknown[] {
  const start = markdown.indexOf(`\n## ${heading}`);
  assert.ok(start >= 0, `docs/protocol.md has no "## ${heading}" section`);
  const end = markdown.indexOf("\n## ", start + 1);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]));
}

function kindsOf(
  schema: { options: readonly { shape: { kind: { value?: unknown } } }[] },
): string[] {
  return schema.options.map((o) => String(o.shape.kind.value));
}

Deno.test("docs/protocol.md shows a valid example of every host ↔ workbench kind", async () => {
  const markdown = await Deno.readTextFile(new URL("../docs/protocol.md", import.meta.url));
  const seen = new Set<string>();
  for (const example of jsonBlocks(markdown, "Host ↔ workbench")) {
    const host = HostFrame.safeParse(example);
    const worker = WorkerFrame.safeParse(example);
    assert.ok(host.success || worker.success, `not a frame: ${JSON.stringify(example)}`);
    seen.add((example as { kind: string }).kind);
  }
  const all = [...kindsOf(HostRequest), ...kindsOf(HostRpcReply), ...kindsOf(WorkerFrame)];
  assert.deepEqual(all.filter((k) => !seen.has(k)), []);
});

Deno.test("docs/protocol.md shows a valid example of every v2 lane kind", async () => {
  const markdown = await Deno.readTextFile(new URL("../docs/protocol.md", import.meta.url));
  const seen = new Set<string>();
  for (const example of jsonBlocks(markdown, "Client ↔ daemon")) {
    const client = ClientMessage.safeParse(example);
    const server = ServerMessage.safeParse(example);
    assert.ok(client.success || server.success, `not a message: ${JSON.stringify(example)}`);
    seen.add((example as { kind: string }).kind);
  }
  const all = [...kindsOf(ClientMessage), ...kindsOf(ServerMessage)];
  assert.deepEqual(all.filter((k) => !seen.has(k)), []);
});
