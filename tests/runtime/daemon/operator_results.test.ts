// The daemon's real `/health` and each operator command's real result parse with the schemas in
// runtime/core/ that the page and the CLI read them by; the CLI prints them in words (tables),
// `--json` keeps the JSON. `context` is the request the next turn would send: the summary, the
// items with their tokens, what is left out and why.

import assert from "node:assert/strict";
import { cli } from "../../_helpers/cli.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient, sendAndWait } from "../../_helpers/lane_client.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import {
  ContextResult,
  HealthReport,
  OPERATOR_RESULTS,
  type OperatorResultKind,
  parseOperatorResult,
} from "../../../runtime/core/mod.ts";

/** Runs one operator command and returns its result, failing on a refusal. */
async function op(
  client: LaneClient,
  message: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const reply = await client.request({ session: "default", ...message });
  if (reply.kind !== "op.result") {
    throw new Error(`${message.kind} failed: ${JSON.stringify(reply)}`);
  }
  return reply.result;
}

/**
 * Kinds this test does not run: a token rotation would close this lane; cancelling needs a
 * running cell or job (tests/runtime/jobs covers `cancel-job`); a rollback needs an active
 * release that is not the last good one (its result is `activate`'s shape).
 */
const NOT_RUN = new Set(["op.token_rotate", "op.cancel_cell", "op.cancel_job", "op.rollback"]);

Deno.test("the real /health and every operator result parse with the schemas in runtime/core", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    fake.enqueue({ toolCall: { code: "await local.send('the word is zebra')\nwait()" } });
    await sendAndWait(client, "remember zebra");
    const health = HealthReport.parse(await (await fetch(`${daemon.url}/health`)).json());
    assert.equal(health.session_state, "running");

    const seen = new Set<string>();
    const check = async (message: Record<string, unknown>) => {
      const kind = message.kind as OperatorResultKind;
      const result = await op(client, message);
      seen.add(kind);
      return parseOperatorResult(kind, result) as Record<string, unknown>;
    };
    const status = await check({ kind: "op.status" });
    const session = (status.sessions as Record<string, { behavior_epoch: number }>).default;
    await check({ kind: "op.jobs" });
    await check({ kind: "op.candidates" });
    await check({ kind: "op.budget" });
    const frames = await check({ kind: "op.frames" }) as { frames: { frame_id: string }[] };
    assert.equal(frames.frames.length, 1);
    await check({ kind: "op.trace", target: frames.frames[0].frame_id });
    const context = await check({ kind: "op.context" }) as ContextResult;
    assert.ok(context.items.some((i) => i.preview.includes("the word is zebra")));
    const found = await check({ kind: "op.history_search", query: "zebra" }) as {
      results: unknown[];
    };
    assert.ok(found.results.length > 0);
    await check({ kind: "op.compact" });
    await check({ kind: "op.stop" });
    await check({ kind: "op.resume" });
    await check({ kind: "op.drain" });
    await check({ kind: "op.resume" });
    await check({ kind: "op.reset" });
    await check({ kind: "op.maintain", reason: "a schema check" });
    const { release } = await (async () => {
      const s = await op(client, { kind: "op.status" });
      const row = (s.sessions as Record<string, { active_release: string }>).default;
      return { release: `${daemon.stateDir}/releases/${row.active_release}` };
    })();
    await check({ kind: "op.activate", epoch: session.behavior_epoch, release });
    await check({ kind: "op.repair" });
    const missing = Object.keys(OPERATOR_RESULTS).filter((k) => !seen.has(k) && !NOT_RUN.has(k));
    assert.deepEqual(missing, [], "every operator result with a schema was parsed");
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("the CLI prints status, frames, trace, context and search in words; --json keeps the JSON", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    fake.enqueue({ toolCall: { code: "await local.send('the word is zebra')\nwait()" } });
    const { accepted } = await sendAndWait(client, "remember zebra");
    const frame = String(accepted.data.frame_id);
    const base = ["--state", daemon.stateDir];
    const run = async (args: string[]) => {
      const out = await cli("klbr", [...args, ...base]);
      assert.equal(out.code, 0, out.stderr);
      return out.stdout;
    };

    const status = await run(["status"]);
    assert.match(status, /^health: ok \(nothing to report\)$/m);
    assert.match(
      status,
      /^session +state +turn +pending inputs +jobs +timers +kernel +behaviour$/m,
    );
    assert.match(status, /^default +running +idle +0 +0 running, 0 pending +0 \(0 due\) +1 /m);
    assert.ok(status.split("\n").length < 20, `status is short:\n${status}`);

    const frames = await run(["frames", "default"]);
    assert.match(frames, /^frame +# +state +inputs +started +took +reason$/m);
    assert.match(frames, new RegExp(`^${frame} +1 +done +1 `, "m"));
    assert.match(frames, /klbr trace default <frame>/);

    const trace = await run(["trace", "default", frame]);
    assert.match(trace, /^trace +hook +origin +took +at +result$/m);
    assert.match(trace, /^tr_\S+ +attention\.plan +/m);

    const context = await run(["context", "default"]);
    assert.match(
      context,
      /^context of default on route main: \d+ of \d+ tokens \(\d+%; compaction at \d+\)$/m,
    );
    assert.match(context, /^\[#*\.*\]/m);
    assert.match(context, /^summary: none yet/m);
    assert.match(context, /^#\d+ +assistant +\d+ +await local\.send\('the word is zebra'\)/m);
    assert.match(context, /^left out:\n {2}nothing$/m);
    const json = ContextResult.parse(JSON.parse(await run(["context", "default", "--json"])));
    assert.equal(json.summary, null);

    const search = await run(["search", "default", "zebra"]);
    assert.match(search, /^ref +kind +at +snippet$/m);

    // After a repair every item is a summary: the view shows it and says what it covers.
    await run(["repair", "default"]);
    const repaired = await run(["context", "default"]);
    assert.match(
      repaired,
      /^summary \(context epoch 1, extractive, \d+ tokens, covers #1–#\d+\):$/m,
    );
    assert.match(repaired, /^items carried: 0$/m);
    assert.match(repaired, /^ {2}#1–#\d+ \(\d+\): covered by the summary of context epoch 1;/m);
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
  }
});
