/**
 * The peers of the agent loop (figure 10): a durable one-tool agent loop in a process of its
 * own, either on the bare `openai` SDK (`sdk`) or on `@mariozechner/pi-agent-core` (`pi`, the
 * loop under OpenClaw). Both call the same model (streaming, one `python` tool), run the cell
 * in a persistent Python process (`cell_runner.py`, framed JSON over stdio) and commit every
 * message — user, assistant, tool result with the sends the cell made — in a transaction of its
 * own at `synchronous=FULL` before going on; a send reaches the client only after its commit.
 *
 * Wire: a WebSocket; the client sends `{"kind":"input","text":…}`, the loop answers
 * `{"kind":"send","text":…}` per send and `{"kind":"turn.ended"}`, one turn at a time. Run:
 * `deno run --allow-net=127.0.0.1 --allow-read --allow-write --allow-run --allow-env
 * agent_loop_peer.ts <sdk|pi> <db file> <model base url> <python>`; it prints its port.
 *
 * @module
 */

import { DatabaseSync, type StatementSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { Agent, type AgentTool } from "@mariozechner/pi-agent-core";
import type { Model } from "@mariozechner/pi-ai";
import { Type } from "typebox";

type CellResult = { stdout: string; sends: string[]; waited: boolean };

/** Every message in a row of its own, one `synchronous=FULL` transaction a message. */
class Journal {
  readonly #db: DatabaseSync;
  readonly #insert: StatementSync;
  constructor(path: string) {
    this.#db = new DatabaseSync(path);
    this.#db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
      CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, body TEXT NOT NULL);`);
    this.#insert = this.#db.prepare("INSERT INTO messages (kind, body) VALUES (?, ?)");
  }
  /** Commits `rows` in one transaction. */
  commit(rows: { kind: string; body: unknown }[]): void {
    this.#db.exec("BEGIN IMMEDIATE");
    for (const row of rows) this.#insert.run(row.kind, JSON.stringify(row.body));
    this.#db.exec("COMMIT");
  }
}

/** The persistent Python process. */
class Cell {
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #reader: ReadableStreamBYOBReader;
  constructor(python: string) {
    const script = fileURLToPath(new URL("./cell_runner.py", import.meta.url));
    const child = new Deno.Command(python, {
      args: [script],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#writer = child.stdin.getWriter();
    this.#reader = child.stdout.getReader({ mode: "byob" });
  }
  /** Runs `code` and returns what it printed, sent and whether it waited. */
  async run(code: string): Promise<CellResult> {
    const body = new TextEncoder().encode(JSON.stringify({ code }));
    const frame = new Uint8Array(4 + body.length);
    new DataView(frame.buffer).setUint32(0, body.length);
    frame.set(body, 4);
    await this.#writer.write(frame);
    const length = new DataView((await this.#read(4)).buffer).getUint32(0);
    return JSON.parse(new TextDecoder().decode(await this.#read(length)));
  }
  async #read(n: number): Promise<Uint8Array> {
    let buffer = new Uint8Array(n);
    let got = 0;
    while (got < n) {
      const { value, done } = await this.#reader.read(buffer.subarray(got));
      if (done || value === undefined) throw new Error("cannot run cell: python ended");
      buffer = new Uint8Array(value.buffer);
      got += value.length;
    }
    return buffer;
  }
}

const TOOL = {
  type: "function" as const,
  function: {
    name: "python",
    description: "Run Python",
    parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"] },
  },
};

type Notify = (message: Record<string, unknown>) => void;

/** One turn on the bare SDK: model, cell, model … until a cell waits or no tool is called. */
function sdkLoop(journal: Journal, cell: Cell, baseURL: string) {
  const client = new OpenAI({ baseURL, apiKey: "none" });
  const messages: OpenAI.ChatCompletionMessageParam[] = [];
  return async function sdkTurn(text: string, notify: Notify): Promise<void> {
    const user = { role: "user" as const, content: text };
    messages.push(user);
    journal.commit([{ kind: "user", body: user }]);
    for (;;) {
      const stream = await client.chat.completions.create({
        model: "instant",
        messages,
        tools: [TOOL],
        stream: true,
      });
      let content = "";
      const calls: {
        id: string;
        type: "function";
        function: { name: string; arguments: string };
      }[] = [];
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta;
        content += delta?.content ?? "";
        for (const call of delta?.tool_calls ?? []) {
          calls[call.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
          calls[call.index].id += call.id ?? "";
          calls[call.index].function.name += call.function?.name ?? "";
          calls[call.index].function.arguments += call.function?.arguments ?? "";
        }
      }
      const assistant = {
        role: "assistant" as const,
        content,
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      };
      messages.push(assistant);
      journal.commit([{ kind: "assistant", body: assistant }]);
      if (calls.length === 0) return;
      let waited = false;
      for (const call of calls) {
        const result = await cell.run(JSON.parse(call.function.arguments).code);
        const tool = { role: "tool" as const, tool_call_id: call.id, content: result.stdout };
        messages.push(tool);
        journal.commit([
          { kind: "tool", body: tool },
          ...result.sends.map((send) => ({ kind: "send", body: send })),
        ]);
        for (const send of result.sends) notify({ kind: "send", text: send });
        waited ||= result.waited;
      }
      if (waited) return;
    }
  };
}

/** One turn on pi-agent-core: each message committed at its `message_end`. */
function piLoop(journal: Journal, cell: Cell, baseUrl: string) {
  const model: Model<"openai-completions"> = {
    id: "instant",
    name: "instant",
    api: "openai-completions",
    provider: "instant",
    baseUrl,
    reasoning: false,
    input: ["text"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: 128_000,
    maxTokens: 4_096,
  };
  let sends: string[] = [];
  let notify: Notify = () => {};
  const python: AgentTool = {
    name: "python",
    label: "python",
    description: "Run Python",
    parameters: Type.Object({ code: Type.String() }),
    execute: async (_id, params) => {
      const result = await cell.run((params as { code: string }).code);
      sends.push(...result.sends);
      return {
        content: [{ type: "text", text: result.stdout }],
        details: {},
        terminate: result.waited,
      };
    },
  };
  const agent = new Agent({
    initialState: { systemPrompt: "", model, tools: [python] },
    getApiKey: () => "none",
  });
  agent.subscribe((event) => {
    if (event.type !== "message_end") return;
    const made = sends;
    sends = [];
    journal.commit([
      { kind: event.message.role, body: event.message },
      ...made.map((send) => ({ kind: "send", body: send })),
    ]);
    for (const send of made) notify({ kind: "send", text: send });
  });
  return async function piTurn(text: string, to: Notify): Promise<void> {
    notify = to;
    await agent.prompt(text);
  };
}

/** Serves one loop on a free loopback port; resolves with the port. */
export function serveLoop(
  kind: "sdk" | "pi",
  options: { db: string; baseUrl: string; python: string },
): Promise<number> {
  const journal = new Journal(options.db);
  const cell = new Cell(options.python);
  const turn = (kind === "sdk" ? sdkLoop : piLoop)(journal, cell, options.baseUrl);
  let queue = Promise.resolve();
  return new Promise((resolve) => {
    Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: (addr) => resolve(addr.port) },
      (req) => {
        const { socket, response } = Deno.upgradeWebSocket(req);
        const notify: Notify = (message) => socket.send(JSON.stringify(message));
        socket.onmessage = (event) => {
          const { text } = JSON.parse(String(event.data));
          queue = queue.then(() => turn(text, notify)).then(
            () => notify({ kind: "turn.ended" }),
            (error) => notify({ kind: "error", message: String(error) }),
          );
        };
        return response;
      },
    );
  });
}

if (import.meta.main) {
  const [kind, db, baseUrl, python] = Deno.args;
  console.log(await serveLoop(kind as "sdk" | "pi", { db, baseUrl, python }));
}
