// A state directory whose files the daemon cannot read or write, as an owner meets it at the
// command line: `serve`, `token rotate` and the operator commands say so in one `klbr:` line
// naming the file and what to do, exit 1, never a Deno stack trace. As root, `chmod 000`
// stops nothing, so each case puts a directory where the file belongs.

import assert from "node:assert/strict";
import { join } from "node:path";
import { cli, type CliRun, initWithoutModel } from "../../_helpers/cli.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { tempDir } from "../../_helpers/temp.ts";
import { unforeseen } from "../../../main.ts";

/** One `klbr:` line matching `pattern`, exit 1, no trace of a crash anywhere in the output. */
function assertOneLineFailure(run: CliRun, pattern: RegExp): void {
  const output = run.stdout + run.stderr;
  assert.equal(run.code, 1, output);
  const lines = output.split("\n").filter((line) => line.startsWith("klbr"));
  assert.equal(lines.length, 1, output);
  assert.match(lines[0], pattern);
  assert.doesNotMatch(output, /Uncaught|^\s+at |Stack backtrace/m, "no stack trace");
}

/** Runs `serve` on `state` with `config`, on any free port; it is expected to stop by itself. */
function serve(state: string, config: string): Promise<CliRun> {
  return cli("serve", ["serve", "--state", state, "--config", config, "--port", "0"]);
}

Deno.test("serve with a directory where session.key belongs is one line naming the file and the fix", async () => {
  const { state, config } = await initWithoutModel(await tempDir());
  const key = join(state, "session.key");
  await Deno.mkdir(key);
  assertOneLineFailure(
    await serve(state, config),
    new RegExp(
      `^klbr: cannot read the session key: ${key} is a directory, not a file; move it aside, then start again \\(a new key is written\\) \\(got .*\\)$`,
    ),
  );
});

Deno.test("a directory where operator.token belongs: serve and token rotate say which file and what to do", async () => {
  const { state, config } = await initWithoutModel(await tempDir());
  const token = join(state, "operator.token");
  await Deno.remove(token);
  await Deno.mkdir(token);
  const pattern = new RegExp(
    `^klbr: cannot read the operator token: ${token} is a directory, not a file; move it aside, then deno task init --state ${state} writes a new token \\(got .*\\)$`,
  );
  assertOneLineFailure(await serve(state, config), pattern);
  assertOneLineFailure(await cli("klbr", ["token", "rotate", "--state", state]), pattern);
});

Deno.test("an operator command on a running daemon whose token file became a directory says so in one line", async () => {
  const daemon = await startTestDaemon();
  try {
    const token = join(daemon.stateDir, "operator.token");
    await Deno.remove(token);
    await Deno.mkdir(token);
    assertOneLineFailure(
      await cli("klbr", ["status", "--state", daemon.stateDir]),
      new RegExp(`^klbr: cannot read the operator token: ${token} is a directory, not a file;`),
    );
  } finally {
    await daemon.stop();
  }
});

Deno.test("serve that cannot write daemon.json once it listens is one line naming the file, and leaves no temp file", async () => {
  const { state, config } = await initWithoutModel(await tempDir());
  const address = join(state, "daemon.json");
  await Deno.mkdir(address);
  assertOneLineFailure(
    await serve(state, config),
    new RegExp(
      `^klbr: cannot write the daemon's address: ${address} is a directory, not a file; move it aside, then start again \\(got .*\\)$`,
    ),
  );
  for await (const entry of Deno.readDir(state)) {
    assert.doesNotMatch(entry.name, /\.tmp$/, "no temp file is left");
  }
});

Deno.test("init with --state under a plain file is one line naming the path and what to do", async () => {
  const file = join(await tempDir(), "file");
  await Deno.writeTextFile(file, "");
  const run = await cli("init", ["init", "--state", join(file, "state")]);
  assertOneLineFailure(
    run,
    /^klbr: cannot create the state directory: a part of .*\/file\/state is a file, not a directory; choose a path whose parents are directories \(got .*\)$/,
  );
});

Deno.test("an error klbr did not foresee is one line saying it is a bug to report, with where it came from", () => {
  const line = unforeseen(new TypeError("boom"), ["serve", "--port", "0"]);
  assert.match(
    line,
    /^cannot run klbr serve --port 0: unexpected TypeError: boom \(at tests\/runtime\/setup\/state_files\.test\.ts:\d+:\d+\); this is a bug in klbr, please report it with this line$/,
  );
  assert.equal(
    unforeseen("a string", []),
    "cannot run klbr: unexpected a string; this is a bug in klbr, please report it with this line",
  );
});
