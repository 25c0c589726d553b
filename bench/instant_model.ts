/**
 * A model that answers instantly, for the agent loop's own cost: an OpenAI-compatible
 * `POST /v1/chat/completions` on 127.0.0.1 that streams its whole scripted answer (one tool
 * call, or text) in a single chunk, then the finish chunk and `[DONE]`, and stamps when each
 * request arrived and when its answer was written. Also a null server: `POST /null` answers an
 * empty 200, the floor of one HTTP round trip.
 *
 * @module
 */

import { KlbrError } from "../runtime/core/mod.ts";

/** What the model answers one request with. */
export type InstantAnswer = { code: string } | { text: string };

/** One request, stamped with `performance.now()` in the bench process. */
export interface StampedRequest {
  /** When its headers arrived. */
  arrivedAt: number;
  /** When its answer was written whole. */
  answeredAt: number;
}

/** A running instant model. */
export interface InstantModel {
  /** The base URL for a route, `http://127.0.0.1:<port>/v1`. */
  url: string;
  /** `http://127.0.0.1:<port>/null`: answers an empty 200. */
  nullUrl: string;
  /** Every chat request so far. */
  requests: StampedRequest[];
  /** Stops the server. */
  close(): Promise<void>;
}

const ENCODER = new TextEncoder();

function chunk(delta: Record<string, unknown>, finish: string | null): string {
  return `data: ${
    JSON.stringify({
      id: "chatcmpl-instant",
      object: "chat.completion.chunk",
      created: 1,
      model: "instant",
      choices: [{ index: 0, delta, finish_reason: finish }],
    })
  }\n\n`;
}

/** The whole stream of one answer: one content chunk, the finish chunk and `[DONE]`. */
function stream(answer: InstantAnswer, call: number): string {
  const delta = "code" in answer
    ? {
      role: "assistant",
      content: "",
      tool_calls: [{
        index: 0,
        id: `call_instant_${call}`,
        type: "function",
        function: { name: "python", arguments: JSON.stringify({ code: answer.code }) },
      }],
    }
    : { role: "assistant", content: answer.text };
  const finish = "code" in answer ? "tool_calls" : "stop";
  return chunk(delta, null) + chunk({}, finish) + "data: [DONE]\n\n";
}

/**
 * Starts the model; `answer` picks the answer of each request from its messages.
 *
 * @throws {KlbrError} `internal` when the port cannot be opened.
 * @example
 * ```ts
 * const model = startInstantModel(() => ({ code: "wait()" }));
 * ```
 */
export function startInstantModel(
  answer: (request: { messages: unknown[] }) => InstantAnswer,
): InstantModel {
  const requests: StampedRequest[] = [];
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/null") {
        await req.body?.cancel();
        return new Response(null, { status: 200 });
      }
      if (path.endsWith("/models")) {
        return Response.json({ object: "list", data: [{ id: "instant", object: "model" }] });
      }
      const arrivedAt = performance.now();
      const body = await req.json() as { messages?: unknown[] };
      const index = requests.length;
      const stamp: StampedRequest = { arrivedAt, answeredAt: 0 };
      requests.push(stamp);
      const text = stream(answer({ messages: body.messages ?? [] }), index);
      const bytes = ENCODER.encode(text);
      return new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(bytes);
            controller.close();
            stamp.answeredAt = performance.now();
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      );
    });
  } catch (cause) {
    throw new KlbrError("internal", "cannot start the instant model: no port", { cause });
  }
  const port = (server.addr as Deno.NetAddr).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    nullUrl: `http://127.0.0.1:${port}/null`,
    requests,
    close: () => server.shutdown(),
  };
}

/**
 * Times `count` HTTP round trips to the null server (a small JSON POST, an empty 200), after
 * `warmup` untimed ones, with the fetch the daemon's provider uses; returns the samples in ms.
 */
export async function timeNullRoundTrips(
  url: string,
  count: number,
  warmup: number,
): Promise<number[]> {
  const samples: number[] = [];
  const body = JSON.stringify({ model: "instant", messages: [{ role: "user", content: "x" }] });
  for (let i = 0; i < warmup + count; i++) {
    const t0 = performance.now();
    const response = await fetch(url, { method: "POST", body });
    await response.arrayBuffer();
    if (i >= warmup) samples.push(performance.now() - t0);
  }
  return samples;
}
