// Crash window "failed artifact writes": a cell's long output cannot be spooled (a full disk,
// injected at `artifact-write`; or an artifacts directory that cannot be written, made
// immutable with chattr). The cell still ends with its outcome, its output truncated in place
// with the failure named; the provider sequence stays valid; `/health` says the artifact store
// is degraded until a write succeeds, then ok again.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { checkStore, inputIds, nextMessageAnswered, removeDirs, waitRecord } from "./_checks.ts";

const LONG = { toolCall: { code: "print('x' * 50_000 + 'END')" } };

async function chattr(flag: "+i" | "-i", path: string): Promise<void> {
  const out = await new Deno.Command("chattr", { args: [flag, path] }).output();
  assert.equal(out.code, 0, `chattr ${flag} ${path}: ${new TextDecoder().decode(out.stderr)}`);
}

const cases = [
  {
    name: "a full disk (injected at artifact-write)",
    env: { KLBR_FAULTS: "artifact-write=fail@1" } as Record<string, string>,
    failure: /No space left on device \(os error 28\)/,
    before: (_artifacts: string) => Promise.resolve(),
    after: (_artifacts: string) => Promise.resolve(),
  },
  {
    name: "an artifacts directory that cannot be written (chattr +i)",
    env: {} as Record<string, string>,
    failure: /Operation not permitted|Permission denied/,
    before: (artifacts: string) => chattr("+i", artifacts),
    after: (artifacts: string) => chattr("-i", artifacts),
  },
];

for (const c of cases) {
  Deno.test(`window artifact-write: ${c.name} ends the cell with an outcome; /health is degraded until a write succeeds`, async () => {
    const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
    const daemon = await startTestDaemon({ modelUrl: fake.url, env: c.env });
    const artifacts = join(daemon.stateDir, "artifacts");
    try {
      await c.before(artifacts);
      fake.enqueue(LONG);
      const client = await connectLane({ port: daemon.port, token: daemon.token });
      await client.request({ kind: "input", client_msg_id: "long", text: "print a lot" });
      const finished = await waitRecord(client, "cell.finished");
      assert.equal(finished.data.outcome, "ok", "the cell keeps its own outcome");
      const result = finished.data.result as Record<string, string>;
      assert.equal(result.stdout_artifact, undefined);
      assert.match(result.stdout_artifact_error, c.failure);
      assert.match(
        result.stdout,
        /the whole output could not be kept: writing its artifact failed/,
      );
      assert.ok(result.stdout.endsWith("END\n"), "the excerpt keeps the tail");
      assert.ok(result.stdout.length < 7_000, "the output is truncated in place");
      await waitRecord(client, "frame.finished");
      // The model was told, in the tool result of a valid sequence.
      const tool = fake.requests.filter((r) => r.method === "POST")[1].body.messages.at(-1);
      assert.equal(tool.role, "tool");
      assert.match(tool.content, /could not be kept/);
      const degraded = await (await fetch(`${daemon.url}/health`)).json();
      assert.equal(degraded.status, "degraded");
      assert.equal(degraded.ok, true, "admission still works");
      assert.equal(degraded.artifacts.state, "degraded");
      assert.match(degraded.artifacts.error, c.failure);
      assert.equal(typeof degraded.artifacts.since, "number");

      // The cause goes away; the next long output is spooled and /health is ok again.
      await c.after(artifacts);
      fake.enqueue(LONG);
      await client.request({ kind: "input", client_msg_id: "again", text: "and again" });
      const second = await waitRecord(
        client,
        "cell.finished",
        (r) =>
          r.seq > finished.seq &&
          /END\n$/.test(String((r.data.result as { stdout: string }).stdout)),
      );
      const spooled = second.data.result as { stdout_artifact: { id: string; bytes: number } };
      assert.equal(spooled.stdout_artifact.bytes, 50_004);
      await waitRecord(client, "frame.finished", (r) => r.seq > second.seq);
      const healthy = await (await fetch(`${daemon.url}/health`)).json();
      assert.equal(healthy.status, "ok", JSON.stringify(healthy.reasons));
      assert.equal(healthy.artifacts.state, "ok");
      await client.close();
      await nextMessageAnswered(daemon, fake, "after");
      assert.equal(await daemon.stop(), 0);
      const acked = inputIds(daemon.stateDir);
      checkStore(daemon.stateDir, acked);
    } finally {
      await c.after(artifacts).catch(() => {});
      await daemon.stop().catch(() => {});
      await fake.close();
      await removeDirs(daemon);
    }
  });
}
