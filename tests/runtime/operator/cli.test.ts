// The operator CLI against a daemon that goes away mid-command: the command ends at once with
// a line saying the connection closed, not after the whole reply timeout (10 minutes by
// default) with "no reply". The daemon here is a loopback WebSocket that reads the command and
// closes, as a daemon does when it drains (1001) or dies.

import assert from "node:assert/strict";
import { join } from "node:path";
import { KlbrError } from "../../../runtime/core/mod.ts";
import { runOperatorCommand } from "../../../runtime/operator/mod.ts";
import { tempDir } from "../../_helpers/temp.ts";

Deno.test("an operator command whose daemon closes the connection before answering fails at once, naming the close", async () => {
  const state = await tempDir();
  await Deno.writeTextFile(join(state, "operator.token"), "a".repeat(64) + "\n", { mode: 0o600 });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const { socket, response } = Deno.upgradeWebSocket(request);
    socket.onmessage = (event) => {
      const kind = JSON.parse(String(event.data)).kind;
      if (kind !== "hello") socket.close(1001, "the daemon is shutting down");
    };
    return response;
  });
  const timeoutMs = 10_000;
  const started = Date.now();
  try {
    await assert.rejects(
      runOperatorCommand("compact", ["default"], {
        stateDir: state,
        port: server.addr.port,
        json: false,
        timeoutMs,
      }),
      (error: unknown) => {
        assert.ok(error instanceof KlbrError, String(error));
        assert.equal(error.code, "not_found");
        assert.match(
          error.message,
          /^cannot run op\.compact: the daemon closed the connection before it answered \(close 1001: the daemon is shutting down\); /,
        );
        return true;
      },
    );
    assert.ok(Date.now() - started < timeoutMs / 2, "it waited for the reply timeout");
  } finally {
    await server.shutdown();
  }
});
