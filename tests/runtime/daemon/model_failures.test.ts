// Honest retries through the real daemon: a refusal (a wrong key, an unknown model) is one
// model.failing record naming the cause and the fix, with no retry, and `/health` says so; the
// start-up probe and doctor say when the configured model is not among those the server lists.
// (A 429's Retry-After holding the next request back is proven in-process, without a daemon:
// tests/runtime/session/session_loop.test.ts.)

import assert from "node:assert/strict";
import { join } from "node:path";
import { type FakeOpenAIOptions, startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { cli } from "../../_helpers/cli.ts";
import { tempDir } from "../../_helpers/temp.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";

const records = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

const waitRecord = (client: LaneClient, type: string) =>
  client.waitFor<LaneRecord>((m) => m.kind === "record" && m.type === type, 30_000);

/** Runs `fn` against a daemon whose model is a fake with `fake` options; a short backoff. */
async function withDaemon(
  fake: FakeOpenAIOptions,
  daemonOptions: { routeFields?: string; env?: Record<string, string> },
  fn: (parts: { fake: ReturnType<typeof startFakeOpenAI>; daemon: TestDaemon }) => Promise<void>,
): Promise<void> {
  const server = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }), ...fake });
  // A 50 ms backoff: a retry the daemon scheduled by itself would come at once.
  const daemon = await startTestDaemon({
    modelUrl: server.url,
    routeFields: daemonOptions.routeFields,
    env: { KLBR_RETRY_BASE_MS: "50", ...daemonOptions.env },
  });
  try {
    await fn({ fake: server, daemon });
  } finally {
    await daemon.stop();
    await server.close();
  }
}

const health = async (daemon: TestDaemon) => await (await fetch(`${daemon.url}/health`)).json();

Deno.test("a 401 is one model.failing record naming the key variable, with no retry; the input stays pending", async () => {
  await withDaemon(
    { models: ["fake"], quirks: { apiKey: "sk-right" } },
    { routeFields: 'api_key_env "KLBR_FAKE_KEY"', env: { KLBR_FAKE_KEY: "sk-wrong-0000" } },
    async ({ fake, daemon }) => {
      const client = await connectLane({ port: daemon.port, token: daemon.token });
      await client.request({ kind: "input", client_msg_id: "k1", text: "hello?" });
      const failing = await waitRecord(client, "model.failing");
      const stalled = await waitRecord(client, "session.stalled");
      assert.equal(failing.data.attempt, 1);
      assert.equal(failing.data.of, 1);
      assert.equal(failing.data.next_retry_ms, null);
      assert.match(
        String(failing.data.error),
        /HTTP 401 .*; the server refused the key: set the environment variable KLBR_FAKE_KEY \(api_key_env of llm "main"\) to a valid key/,
      );
      assert.match(String(stalled.data.message), /refused the request/);
      assert.equal(records(client, "model.failing").length, 1);
      // One request: with a 50 ms backoff, a retry would have been scheduled before the stall.
      assert.equal(fake.requests.filter((r) => r.method === "POST").length, 1);
      const now = await health(daemon);
      assert.equal(now.model.state, "failing");
      assert.equal(now.stalled, true);
      assert.equal(now.retrying, null);
      assert.equal(now.pending_inputs, 1, "the input is not lost");
      await client.close();
    },
  );
});

Deno.test("an unknown model is named, with the models the server lists, in model.failing and the start-up block", async () => {
  await withDaemon(
    { profile: "openai", models: ["real-a", "real-b"] },
    {},
    async ({ fake, daemon }) => {
      const client = await connectLane({ port: daemon.port, token: daemon.token });
      await client.request({ kind: "input", client_msg_id: "m1", text: "hi" });
      const failing = await waitRecord(client, "model.failing");
      assert.equal(failing.data.next_retry_ms, null);
      assert.match(
        String(failing.data.error),
        /HTTP 404 \(got "The model `fake` does not exist or you do not have access to it\."\); the server does not serve model "fake": set model of llm "main" to one it lists \("real-a", "real-b"\)$/,
      );
      await waitRecord(client, "session.stalled");
      assert.equal(fake.requests.filter((r) => r.method === "POST").length, 1);
      // The start-up block said so before any input: the probe lists the models.
      assert.match(
        daemon.logs(),
        /main, fast, long: http:\/\/127\.0\.0\.1:\d+\/v1 model "fake" — answered \(HTTP 200\), but model "fake" is not among the models the server lists \("real-a", "real-b"\)/,
      );
      await client.close();
    },
  );
});

Deno.test("doctor warns when the configured model is not among those the server lists", async () => {
  const fake = startFakeOpenAI({ models: ["real-a", "real-b"], quirks: { apiKey: "sk-doc" } });
  try {
    const state = join(await tempDir(), "state");
    assert.equal((await cli("init", ["init", "--state", state])).code, 0);
    await Deno.writeTextFile(
      join(state, "config.kdl"),
      `llm "main" { url "${fake.url}"; model "fake"; api_key_env "KLBR_DOC_KEY"; }\n`,
    );
    const report = await cli("doctor", ["doctor", "--state", state], { KLBR_DOC_KEY: "sk-doc" });
    assert.match(
      report.stdout,
      /^warning: route main, fast, long: model "fake" is not among the models the server lists \("real-a", "real-b"\); set model of llm "main" to one of them$/m,
    );
    // The probe sent the route's key: the list came back.
    assert.equal(fake.probes.at(-1)?.headers.authorization, "Bearer sk-doc");
  } finally {
    await fake.close();
  }
});
