// The daemon's log tells the story: each operator command that changes something is one line
// naming who sent it (the command line or the page), a refused one too, a read (`klbr budget`
// lifting nothing) none; a restart after a SIGKILL mid-cell is one `recovery.session` line; a
// daemon child killed under `serve` is one `daemon.exited` line, and serve exits with its code
// for the service manager to restart it.

import assert from "node:assert/strict";
import { join } from "node:path";
import { cli } from "../../_helpers/cli.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";

/** Resolves with the log's first line matching `pattern`, looking for 15 s at most. */
async function logLine(daemon: TestDaemon, pattern: RegExp): Promise<string> {
  for (let i = 0; i < 750; i++) {
    const line = daemon.logs().split("\n").find((l) => pattern.test(l));
    if (line !== undefined) return line;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`no log line matches ${pattern}:\n${daemon.logs()}`);
}

/** The JSON lines of a `--log-format json` daemon with the given event. */
function events(daemon: TestDaemon, event: string): Record<string, unknown>[] {
  return daemon.logs().split("\n").filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.event === event);
}

Deno.test("operator commands from the command line and the page are one log line each, naming who sent them", async () => {
  const daemon = await startTestDaemon({ logFormat: "json" });
  const page = await connectLane({ port: daemon.port, token: daemon.token, client: "web-test" });
  try {
    const base = ["--state", daemon.stateDir];
    const reset = await cli("klbr", ["reset", "default", ...base]);
    assert.equal(reset.code, 0, reset.stderr);
    await logLine(daemon, /"event":"operator\.reset"/);
    const [line] = events(daemon, "operator.reset");
    assert.equal(line.level, "info");
    assert.deepEqual(
      { op: line.op, session: line.session, client: line.client, by: line.by },
      { op: "reset", session: "default", client: "cli", by: "cli" },
    );
    assert.match(String(line.message), /^reset of session default by the command line: /);

    const stopped = await page.request({ kind: "op.stop", session: "default" });
    assert.equal(stopped.kind, "op.result");
    await logLine(daemon, /"event":"operator\.stop"/);
    const [stop] = events(daemon, "operator.stop");
    assert.deepEqual([stop.client, stop.by], ["web-test", "page"]);
    assert.match(String(stop.message), /^stop of session default by the page \(web-test\): /);

    // A refused command is a line too, with the refusal's code; a read is none.
    const refused = await page.request({
      kind: "op.cancel_cell",
      session: "default",
      cell: "cell_nope",
    });
    assert.equal(refused.kind, "error");
    await logLine(daemon, /"event":"operator\.refused"/);
    const [no] = events(daemon, "operator.refused");
    assert.deepEqual([no.level, no.op, no.code, no.by], [
      "warn",
      "cancel_cell",
      "not_found",
      "page",
    ]);
    assert.equal((await page.request({ kind: "op.status" })).kind, "op.result");
    assert.deepEqual(events(daemon, "operator.status"), []);
  } finally {
    await page.close();
    await daemon.stop();
  }
});

Deno.test("klbr budget that only shows the budgets leaves no line; one that lifts the hour does", async () => {
  const daemon = await startTestDaemon({ logFormat: "json" });
  try {
    const base = ["--state", daemon.stateDir];
    const shown = await cli("klbr", ["budget", ...base]);
    assert.equal(shown.code, 0, shown.stderr);
    const lifted = await cli("klbr", ["budget", "--reset", ...base]);
    assert.equal(lifted.code, 0, lifted.stderr);
    await logLine(daemon, /"event":"operator\.budget"/);
    // The read came first: had it left a line, it would be the first of two.
    const lines = events(daemon, "operator.budget");
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.match(String(lines[0].message), /the hourly windows start again now/);
  } finally {
    await daemon.stop();
  }
});

Deno.test("a restart after a SIGKILL inside a cell logs its recovery in one line", async () => {
  let holding = true;
  const fake = startFakeOpenAI({
    fallback: () => ({
      toolCall: { code: holding ? "import asyncio\nawait asyncio.sleep(60)" : "wait()" },
    }),
  });
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "m1", text: "hold on" });
    await client.waitFor((m) => m.kind === "record" && m.type === "cell.started");
    await daemon.kill();
    await client.closed;
    holding = false;
    daemon = await daemon.restart();
    const line = await logLine(daemon, / recovery\.session /);
    assert.match(
      line,
      /^\S+ INFO {2}recovery\.session session default after the daemon restarted: 1 frame\(s\) resumed, 0 abandoned \(0 input\(s\) given back\), 0 finished \(they had waited\), 1 cell\(s\) interrupted and not run again, 0 input\(s\) pending, offered to the next turn \(.*resumed_frames=1 .*interrupted_cells=1 /,
    );
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("serve logs a daemon child killed by SIGKILL and exits with its code", async () => {
  const daemon = await startTestDaemon({ via: "launcher" });
  const { pid } = JSON.parse(await Deno.readTextFile(join(daemon.stateDir, "daemon.json")));
  assert.notEqual(pid, daemon.pid, "the daemon is the launcher's child");
  Deno.kill(pid, "SIGKILL");
  const status = await daemon.exited();
  assert.equal(status.code, 137);
  assert.match(
    daemon.logs(),
    /^\S+ ERROR daemon\.exited the daemon exited with code 137 \(killed by SIGKILL: .*\); serve exits with it: as a service it is started again \(Restart=on-failure\), by hand start it again with deno task serve \(code=137 signal=SIGKILL\)$/m,
  );
});

Deno.test("serve exits with 128 + the number of whichever signal ended its daemon child (SIGALRM: 142)", async () => {
  const daemon = await startTestDaemon({ via: "launcher" });
  const { pid } = JSON.parse(await Deno.readTextFile(join(daemon.stateDir, "daemon.json")));
  assert.notEqual(pid, daemon.pid, "the daemon is the launcher's child");
  // A signal the daemon does not handle ends it as a crash does (SIGABRT, SIGSEGV), without
  // leaving a core file behind.
  Deno.kill(pid, "SIGALRM");
  const status = await daemon.exited();
  assert.equal(status.code, 142);
  assert.match(
    daemon.logs(),
    /^\S+ ERROR daemon\.exited the daemon exited with code 142 \(ended by SIGALRM\); .* \(code=142 signal=SIGALRM\)$/m,
  );
});
