// serve's launcher starts the daemon before it has found the interpreter and probed
// bubblewrap, and hands both over on the daemon's stdin: the daemon touches no state before the
// hand-over, uses the launcher's probe instead of its own, and where children cannot be
// confined it is replaced by one started under the unconfined permission set.

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  daemonArgs,
  derivePermissionInput,
  encodeHandoff,
  readHandoff,
} from "../../../runtime/setup/mod.ts";
import { cli } from "../../_helpers/cli.ts";
import { REPO_ROOT, startTestDaemon } from "../../_helpers/daemon.ts";
import { tempDir } from "../../_helpers/temp.ts";

const HANDOFF = {
  python: { executable: "/py/bin/python3", home: "/py" },
  sandbox: {
    mode: "bwrap" as const,
    reason: null,
    network: false,
    userns: true,
    usernsReason: null,
  },
};

function streamOf(...parts: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return ReadableStream.from(parts.map((part) => encoder.encode(part)));
}

Deno.test("`readHandoff()` reads the one line `encodeHandoff()` writes, across chunks", async () => {
  const line = new TextDecoder().decode(encodeHandoff(HANDOFF));
  assert.ok(line.endsWith("\n"));
  const cut = Math.floor(line.length / 2);
  assert.deepEqual(await readHandoff(streamOf(line.slice(0, cut), line.slice(cut))), HANDOFF);
  assert.deepEqual(await readHandoff(streamOf(line, "anything after it")), HANDOFF);
});

Deno.test("`readHandoff()` refuses a stream that ends early, a line that is not JSON or not a hand-over", async () => {
  await assert.rejects(
    readHandoff(streamOf('{"python":')),
    /cannot start the daemon: the launcher's hand-over ended before one whole line/,
  );
  await assert.rejects(
    readHandoff(streamOf()),
    /ended before one whole line of at most 64 KiB \(got 0 bytes\)/,
  );
  await assert.rejects(readHandoff(streamOf("nope\n")), /hand-over is not JSON/);
  await assert.rejects(
    readHandoff(streamOf(JSON.stringify({ ...HANDOFF, sandbox: { mode: "maybe" } }) + "\n")),
    /hand-over is not one/,
  );
});

/** Starts `main.ts daemon --handoff` as the launcher would, with stdin piped to the test. */
async function handoffDaemon(stateDir: string, env: Record<string, string>) {
  const configPath = join(await tempDir(), "config.kdl");
  await Deno.writeTextFile(configPath, 'llm "main" {\n    url "http://127.0.0.1:9/v1"\n}\n');
  const input = await derivePermissionInput({ stateDir, configPath, port: 0 }, env);
  const unconfined = {
    ...input,
    sandbox: {
      mode: "none" as const,
      reason: "x",
      network: true,
      userns: false,
      usernsReason: null,
    },
  };
  return {
    input,
    child: new Deno.Command(Deno.execPath(), {
      args: [...daemonArgs(unconfined), "--handoff"],
      cwd: REPO_ROOT,
      clearEnv: true,
      env,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn(),
  };
}

Deno.test("a daemon started with --handoff writes nothing when its launcher closes without handing over", async () => {
  const stateDir = join(await tempDir(), "never-created");
  const env = { ...Deno.env.toObject(), KLBR_WORKSPACE: await tempDir(), NO_COLOR: "1" };
  const { child } = await handoffDaemon(stateDir, env);
  await child.stdin.close();
  const out = await child.output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 1, stderr);
  assert.match(stderr, /^klbr: cannot start the daemon: the launcher's hand-over ended before/m);
  await assert.rejects(Deno.stat(stateDir), Deno.errors.NotFound);
});

Deno.test("a daemon started with --handoff reports the launcher's probe, not one of its own", async () => {
  const stateDir = join(await tempDir(), "state");
  const env = { ...Deno.env.toObject(), KLBR_WORKSPACE: await tempDir(), NO_COLOR: "1" };
  const { input, child } = await handoffDaemon(stateDir, env);
  // This machine has bubblewrap (the daemon's own probe would say bwrap); the hand-over says not.
  assert.equal(input.sandbox.mode, "bwrap");
  const writer = child.stdin.getWriter();
  await writer.write(encodeHandoff({
    python: input.python,
    sandbox: {
      mode: "none",
      reason: "the launcher's probe said so",
      network: true,
      userns: false,
      usernsReason: null,
    },
  }));
  await writer.close();
  let output = "";
  const decoder = new TextDecoderStream();
  const pump = child.stdout.pipeThrough(decoder).pipeTo(
    new WritableStream({ write: (text) => void (output += text) }),
  );
  const stderr = new Response(child.stderr).text();
  try {
    let port: number | undefined;
    for (let i = 0; i < 600 && port === undefined; i++) {
      port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)\//.exec(output)?.[1]) || undefined;
      if (port === undefined) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.ok(port !== undefined, output);
    const health = await (await fetch(`http://127.0.0.1:${port}/health`)).json();
    assert.deepEqual([health.sandbox, health.sandbox_reason], [
      "none",
      "the launcher's probe said so",
    ]);
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await pump;
    await stderr;
  }
});

Deno.test("serve without bubblewrap replaces the daemon it started confined by an unconfined one", async () => {
  const env = { KLBR_BWRAP: "/nonexistent/bwrap" };
  const daemon = await startTestDaemon({ via: "launcher", env });
  try {
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.ok, true);
    assert.deepEqual([health.sandbox, health.sandbox_reason], [
      "none",
      "bubblewrap is not installed (no /nonexistent/bwrap; Debian package bubblewrap)",
    ]);
    // Only the daemon that serves ever logged: the one started first said nothing.
    assert.equal(daemon.logs().match(/sandbox\.unconfined/g)?.length, 1, daemon.logs());
  } finally {
    await daemon.stop();
  }
});

Deno.test("serve with a Python that does not run stops the daemon it started before any state exists", async () => {
  const dir = await tempDir();
  const state = join(dir, "state");
  const config = join(dir, "config.kdl");
  await Deno.writeTextFile(config, 'llm "main" {\n    url "http://127.0.0.1:9/v1"\n}\n');
  const run = await cli("serve", ["serve", "--state", state, "--config", config, "--port", "0"], {
    KLBR_PYTHON: "/nonexistent/python3",
    KLBR_WORKSPACE: dir,
  });
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr, /^klbr: cannot find python: it does not run/m);
  assert.doesNotMatch(run.stdout + run.stderr, /listening on/);
  await assert.rejects(Deno.stat(state), Deno.errors.NotFound);
});
