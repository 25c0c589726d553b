// Crash window "truncated control frames": mid-turn, the workbench writes half a frame and
// dies; or the host's write of an execute frame is cut off half way (`frame-write`). Either
// way the cell ends `killed` with the framing failure named and the effects it had committed
// listed, the kernel is replaced by a new generation, the provider sequence stays valid, and
// the next message is answered.

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import {
  checkStore,
  inputIds,
  nextMessageAnswered,
  removeDirs,
  rows,
  waitRecord,
  withDb,
} from "./_checks.ts";

const HALF_A_FRAME = [
  "import gc, os",
  "from klbr.frames import FrameChannel",
  "channel = next(o for o in gc.get_objects() if isinstance(o, FrameChannel))",
  "await local.send('before the cut')",
  // A header announcing 256 bytes, then a few of them, then the worker is gone.
  'os.write(channel.write_fd, b\'\\x00\\x00\\x01\\x00{"kind": "ok", "id"\')',
  "os._exit(3)",
].join("\n");

const cases: {
  name: string;
  env: Record<string, string>;
  code: string;
  failure: RegExp;
  effects: RegExp;
}[] = [
  {
    name: "the workbench writes half a frame and dies",
    env: {},
    code: HALF_A_FRAME,
    failure: /^frame_truncated: .*input ended inside a frame \(got 23 trailing bytes\)/,
    effects: /1\. local\.send snd_\w+ \(record \d+\): "before the cut"/,
  },
  {
    name: "the host's execute frame is cut off half way (frame-write)",
    env: { KLBR_FAULTS: "frame-write=fail@1" },
    code: "await local.send('never runs')",
    failure: /^worker_failed: .*injected fault at frame-write/,
    effects: /effects this cell committed: none/,
  },
];

for (const c of cases) {
  Deno.test(`window truncated-frames: ${c.name}; the cell ends killed and the session goes on`, async () => {
    const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
    fake.enqueue({ toolCall: { code: c.code } });
    const daemon = await startTestDaemon({ modelUrl: fake.url, env: c.env });
    try {
      const client = await connectLane({ port: daemon.port, token: daemon.token });
      await client.request({ kind: "input", client_msg_id: "cut", text: "go" });
      const finished = await waitRecord(client, "cell.finished");
      assert.equal(finished.data.outcome, "killed");
      const error = (finished.data.result as { error: { type: string; message: string } }).error;
      assert.match(`${error.type}: ${error.message}`, c.failure);
      // The model hears the cell did not finish, with what it had done; the turn goes on.
      await waitRecord(client, "frame.finished", (r) => r.data.state === "done");
      const tool = fake.requests.filter((r) => r.method === "POST")[1].body.messages
        .filter((m: { role: string }) => m.role === "tool").at(-1).content as string;
      assert.match(tool, /^outcome: killed\nthis cell did not finish/);
      assert.match(tool, c.effects);
      await client.close();
      const next = await nextMessageAnswered(daemon, fake, "after");
      // The kernel was replaced: the next cells ran in a later generation than the cut one.
      const generations = withDb(
        daemon.stateDir,
        (db) => rows(db, "SELECT generation FROM cells ORDER BY started_at"),
      )
        .map((r) => Number(r.generation));
      assert.ok(generations.at(-1)! > generations[0], `generations ${generations}`);
      const [replaced] = withDb(
        daemon.stateDir,
        (db) => rows(db, "SELECT reason FROM kernel_generations ORDER BY generation DESC LIMIT 1"),
      );
      assert.match(String(replaced.reason), /^failed: /, "the new generation says why");
      assert.equal(await daemon.stop(), 0);
      const acked = inputIds(daemon.stateDir);
      assert.ok(acked.includes(next.inputId));
      checkStore(daemon.stateDir, acked);
    } finally {
      await daemon.stop().catch(() => {});
      await fake.close();
      await removeDirs(daemon);
    }
  });
}
