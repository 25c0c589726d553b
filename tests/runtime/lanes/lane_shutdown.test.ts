// What a lane client sees when the daemon shuts down: every message the daemon read before it
// closed the socket is answered first, and the close says why (1001, "the daemon is shutting
// down"), so a client can tell a refused request from a lost one (docs/protocol.md).

import assert from "node:assert/strict";
import { SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { type AppFetch, createApp, listenApp, OperatorAuth } from "../../../runtime/lanes/mod.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { MemoryLaneHost, TEST_TOKEN } from "../../ui/_memory_lane_host.ts";

/** A host whose `op.status` answers only once the test lets it. */
class HeldStatusHost extends MemoryLaneHost {
  readonly release = Promise.withResolvers<void>();
  override async operate(
    message: Parameters<MemoryLaneHost["operate"]>[0],
    from: { session: string },
  ): Promise<Record<string, unknown>> {
    if (message.kind === "op.status") {
      this.operations.push(message);
      await this.release.promise;
      return { held: true };
    }
    return super.operate(message, from);
  }
}

Deno.test("`Listening.close()` answers every message a lane read before it closes the lane with 1001", async () => {
  const host = new HeldStatusHost();
  const auth = new OperatorAuth({
    stateDir: "/nonexistent",
    token: TEST_TOKEN,
    sessionKey: "5e".repeat(32),
  });
  const address = { host: "127.0.0.1", port: 0 };
  const app = createApp({
    lanes: host,
    auth,
    address: () => address,
    health: () => ({ ok: true }),
    log: SILENT_LOGGER,
  });
  const listening = await listenApp(app.fetch as AppFetch, {
    hostname: "127.0.0.1",
    port: 0,
    maxSilent: 256,
    silentMs: 3_000,
  });
  address.port = listening.port;
  const client = await connectLane({ port: listening.port, token: TEST_TOKEN });
  // A command the daemon has read and is still answering when the shutdown closes the lane.
  client.send({ kind: "op.status", request: "held" });
  for (let i = 0; i < 500 && host.operations.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.equal(host.operations.length, 1, "the daemon read the command");
  const closed = listening.close(5_000);
  host.release.resolve();
  const event = await client.closed;
  assert.equal(await closed, true, "every socket closed within the grace");
  const answers = client.messages.filter((m) => "request" in m && m.request === "held");
  assert.deepEqual(answers.map((m) => m.kind), ["op.result"], "answered once, before the close");
  assert.deepEqual([event.code, event.reason], [1001, "the daemon is shutting down"]);
});
