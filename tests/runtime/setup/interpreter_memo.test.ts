// serve's launcher probes bubblewrap with the interpreter the last daemon was handed
// (`<state>/interpreter.json`) while its interpreter lookup still runs, and uses that probe only
// when the lookup names the same interpreter. A wrapper around bwrap logs every probe the
// launcher runs, so each case can say which interpreters were probed.

import assert from "node:assert/strict";
import { join } from "node:path";
import { resolvePython } from "../../../runtime/kernel/mod.ts";
import { INTERPRETER_FILE, rememberedInterpreter } from "../../../runtime/setup/mod.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { tempDir } from "../../_helpers/temp.ts";

/** A `bwrap` that appends the command of each launcher probe to `log`, then runs bwrap. */
async function loggingBwrap(dir: string): Promise<{ bwrap: string; probes: () => string[] }> {
  const bwrap = join(dir, "bwrap");
  const log = join(dir, "probes.log");
  await Deno.writeTextFile(
    bwrap,
    `#!/bin/sh\ncase "$*" in *"print(os.getpid())"*)\n` +
      `  prev=; for a in "$@"; do [ "$prev" = "--" ] && echo "$a" >> '${log}'; prev=$a; done;;\n` +
      `esac\nexec /usr/bin/bwrap "$@"\n`,
  );
  await Deno.chmod(bwrap, 0o755);
  return {
    bwrap,
    probes: () => {
      try {
        return Deno.readTextFileSync(log).trim().split("\n").filter(Boolean).sort();
      } catch {
        return [];
      }
    },
  };
}

/**
 * A `KLBR_PYTHON` that answers only once a probe is in `log` (or after 10 s), and writes
 * whether the probe came first to `<dir>/order`: the lookup is still running while it waits.
 */
async function waitingShim(dir: string, real: string, log: string): Promise<string> {
  const shim = join(dir, "python3");
  await Deno.writeTextFile(
    shim,
    `#!/bin/sh
i=0
while [ ! -s '${log}' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
` +
      `if [ -s '${log}' ]; then echo probed-first > '${dir}/order'; ` +
      `else echo lookup-first > '${dir}/order'; fi
exec '${real}' "$@"
`,
  );
  await Deno.chmod(shim, 0o755);
  return shim;
}

/** Serves once (which remembers the interpreter), then stops; the state directory stays. */
async function servedOnce(): Promise<{ stateDir: string; workspace: string }> {
  const stateDir = await tempDir("klbr-state-");
  const workspace = await tempDir("klbr-ws-");
  const daemon = await startTestDaemon({ via: "launcher", stateDir, workspace });
  await daemon.stop();
  return { stateDir, workspace };
}

/** Writes `remembered` as the state directory's remembered interpreter. */
async function remember(stateDir: string, remembered: { executable: string; home: string }) {
  await Deno.writeTextFile(join(stateDir, INTERPRETER_FILE), JSON.stringify(remembered));
}

/** Serves again through the launcher with a probe-logging bwrap; the caller stops the daemon. */
async function serveLoggingProbes(state: { stateDir: string; workspace: string }) {
  const { bwrap, probes } = await loggingBwrap(await tempDir());
  const daemon = await startTestDaemon({ via: "launcher", ...state, env: { KLBR_BWRAP: bwrap } });
  return { daemon, probes };
}

async function sandboxOf(url: string): Promise<string> {
  return (await (await fetch(`${url}/health`)).json()).sandbox;
}

Deno.test("serve remembers the interpreter it handed over, and the next start probes only that one", async () => {
  const real = await resolvePython("python3");
  const { stateDir, workspace } = await servedOnce();
  assert.deepEqual(rememberedInterpreter(stateDir), {
    executable: real.executable,
    home: real.home,
  });
  const dir = await tempDir();
  const { bwrap, probes } = await loggingBwrap(dir);
  const shim = await waitingShim(dir, real.executable, join(dir, "probes.log"));
  const daemon = await startTestDaemon({
    via: "launcher",
    stateDir,
    workspace,
    env: { KLBR_BWRAP: bwrap, KLBR_PYTHON: shim },
  });
  try {
    assert.equal(await sandboxOf(daemon.url), "bwrap");
    // The probe ran while the lookup was still waiting, and was the launcher's only one: the
    // lookup named the same interpreter.
    assert.equal((await Deno.readTextFile(join(dir, "order"))).trim(), "probed-first");
    assert.deepEqual(probes(), [real.executable]);
  } finally {
    await daemon.stop();
  }
});

Deno.test("a remembered interpreter the lookup does not name is probed early, never used", async () => {
  const real = await resolvePython("python3");
  const state = await servedOnce();
  const { stateDir } = state;
  // An interpreter that cannot run: its early probe says children cannot be confined.
  await remember(stateDir, { executable: "/nonexistent/bin/python3", home: "/nonexistent" });
  const { daemon, probes } = await serveLoggingProbes(state);
  try {
    // Had the early probe counted, this daemon would have been replaced by an unconfined one.
    assert.equal(await sandboxOf(daemon.url), "bwrap");
    assert.deepEqual(probes(), ["/nonexistent/bin/python3", real.executable].sort());
    assert.equal(daemon.logs().match(/sandbox\.unconfined/g), null, daemon.logs());
    assert.equal(rememberedInterpreter(stateDir)?.executable, real.executable);
  } finally {
    await daemon.stop();
  }
});

Deno.test("a remembered interpreter the daemon could have written is never run early", async () => {
  const real = await resolvePython("python3");
  const state = await servedOnce();
  for (const dir of [state.stateDir, state.workspace]) {
    await remember(state.stateDir, { executable: join(dir, "bin", "python3"), home: dir });
    const { daemon, probes } = await serveLoggingProbes(state);
    try {
      assert.equal(await sandboxOf(daemon.url), "bwrap");
      assert.deepEqual(probes(), [real.executable], `remembered under ${dir}`);
    } finally {
      await daemon.stop();
    }
  }
});

Deno.test("`rememberedInterpreter()` is no guess for a missing, damaged or relative file", async () => {
  const dir = await tempDir();
  assert.equal(rememberedInterpreter(dir), undefined);
  for (const text of ["{", '{"executable":"python3","home":"/usr"}', '{"executable":"/p"}']) {
    await Deno.writeTextFile(join(dir, INTERPRETER_FILE), text);
    assert.equal(rememberedInterpreter(dir), undefined, text);
  }
  await remember(dir, { executable: "/usr/bin/python3", home: "/usr" });
  assert.deepEqual(rememberedInterpreter(dir), { executable: "/usr/bin/python3", home: "/usr" });
});
