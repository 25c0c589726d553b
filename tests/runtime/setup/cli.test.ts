// The CLI as a user runs it: `deno task init`, `doctor` and the operator commands, each as a
// real process with its task's permission flags.

import assert from "node:assert/strict";
import { join } from "node:path";
import { REPO_ROOT, startTestDaemon } from "../../_helpers/daemon.ts";
import { cli } from "../../_helpers/cli.ts";
import { tempDir } from "../../_helpers/temp.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";

Deno.test("init lays out the state directory once and keeps what exists", async () => {
  const state = join(await tempDir(), "state");
  const first = await cli("init", ["init", "--state", state]);
  assert.equal(first.code, 0, first.stderr);
  const lines = first.stdout.trim().split("\n");
  assert.equal(lines[0], `initialised ${state}`);
  // What to do next, said where the user looks: the config, the model, the workspace, the
  // commands — each for this state directory.
  const config = join(state, "config.kdl");
  assert.equal(lines[1], `  config     ${config}`);
  assert.match(lines[2], /^ {2}model {6}http:\/\/localhost:8001\/v1, model "default", no key /);
  assert.match(lines[3], new RegExp(`^  workspace  ${REPO_ROOT} \\(the agent reads and writes`));
  assert.match(first.stdout, new RegExp(`point llm "main" in ${config} at an OpenAI-compatible`));
  assert.match(first.stdout, new RegExp(`deno task serve --state ${state} .*--port N`));
  assert.match(first.stdout, new RegExp(`deno task klbr url --state ${state} `));
  // The configuration declares one route; the other roles copy it.
  const text = await Deno.readTextFile(config);
  assert.deepEqual(text.match(/^llm .*$/gm), ['llm "main" {']);
  for (
    const name of ["runtime.sqlite", "releases", "drafts", "artifacts", "skills", "config.kdl"]
  ) {
    await Deno.stat(join(state, name));
  }
  const token = await Deno.readTextFile(join(state, "operator.token"));
  assert.match(token.trim(), /^[0-9a-f]{64}$/);
  // The token is the owner's alone.
  assert.equal((await Deno.stat(join(state, "operator.token"))).mode! & 0o777, 0o600);

  const second = await cli("init", ["init", "--state", state]);
  assert.equal(second.code, 0, second.stderr);
  assert.equal(second.stdout.split("\n")[0], `${state} is already initialised`);
  assert.equal(await Deno.readTextFile(join(state, "operator.token")), token, "token kept");
});

Deno.test("doctor reports versions and exits 0 on a healthy state, 1 with one line per problem", async () => {
  const state = join(await tempDir(), "state");
  assert.equal((await cli("init", ["init", "--state", state])).code, 0);
  // Healthy includes a main route that answers.
  const fake = startFakeOpenAI();
  const config = join(state, "config.kdl");
  await Deno.writeTextFile(config, `llm "main" { url "${fake.url}"; model "fake-model"; }\n`);
  const healthy = await cli("doctor", ["doctor", "--state", state]);
  assert.equal(healthy.code, 0, healthy.stdout + healthy.stderr);
  assert.match(healthy.stdout, /^deno \d+\.\d+\.\d+, v8 .*, typescript /m);
  assert.match(healthy.stdout, /^sqlite 3\.\d+\.\d+ \(minimum 3\.51\.3\)$/m);
  assert.match(healthy.stdout, /^python 3\.\d+\.\d+ at /m);
  assert.match(healthy.stdout, /^ {2}skill workspace$/m);
  assert.match(
    healthy.stdout,
    new RegExp(
      `^ {2}route main, fast, long: ${fake.url} model fake-model \\(reachable, HTTP 200\\)$`,
      "m",
    ),
  );
  assert.match(healthy.stdout, /^ {2}--allow-write=.*state/m);
  assert.match(healthy.stdout, /^doctor: ok$/m);

  const missing = await cli("doctor", [
    "doctor",
    "--state",
    join(state, "nowhere"),
    "--config",
    config,
  ]).finally(() => fake.close());
  assert.equal(missing.code, 1);
  const problems = missing.stdout.split("\n").filter((l) => l.startsWith("problem: "));
  assert.equal(problems.length, 1, missing.stdout);
  assert.equal(
    problems[0],
    `problem: state: cannot open store: the state directory does not exist; deno task init --state ${
      join(state, "nowhere")
    } makes it (got ${join(state, "nowhere")})`,
  );
  assert.match(missing.stdout, /^doctor: 1 problem\(s\)$/m);
});

Deno.test("doctor reports a running daemon as running, not as a problem", async () => {
  const fake = startFakeOpenAI();
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    const config = join(daemon.stateDir, "test-config.kdl");
    const report = await cli("doctor", ["doctor", "--state", daemon.stateDir, "--config", config]);
    assert.equal(report.code, 0, report.stdout);
    assert.match(
      report.stdout,
      new RegExp(
        `^daemon running: pid ${daemon.pid} on http://127\\.0\\.0\\.1:${daemon.port}/ since .*; it owns the store`,
        "m",
      ),
    );
    assert.doesNotMatch(report.stdout, /^problem: /m);
    assert.match(report.stdout, /^doctor: ok$/m);
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("klbr status, compact and a refused activate speak to the daemon over its socket", async () => {
  const daemon = await startTestDaemon();
  try {
    const base = ["--state", daemon.stateDir, "--port", String(daemon.port)];
    const status = await cli("klbr", ["status", "--json", ...base]);
    assert.equal(status.code, 0, status.stderr);
    const parsed = JSON.parse(status.stdout);
    assert.equal(parsed.admitting, true);
    assert.equal(parsed.sessions.default.state, "running");
    assert.equal(parsed.sessions.default.behavior_epoch, 1);

    const compact = await cli("klbr", ["compact", "default", "--json", ...base]);
    assert.equal(compact.code, 0, compact.stderr);
    assert.equal(JSON.parse(compact.stdout).compacted, false);

    const stale = await cli("klbr", ["activate", "default", "0", "/nowhere", ...base]);
    assert.equal(stale.code, 1);
    assert.match(stale.stderr, /^klbr activate: cannot verify release/m);

    const usage = await cli("klbr", ["reset", ...base]);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /cannot run reset: usage: klbr reset <session> \(got 0 arguments\)/);
  } finally {
    await daemon.stop();
  }
});

Deno.test("klbr url prints the UI address with the operator token in its fragment", async () => {
  const state = join(await tempDir(), "state");
  assert.equal((await cli("init", ["init", "--state", state])).code, 0);
  const token = (await Deno.readTextFile(join(state, "operator.token"))).trim();
  const out = await cli("klbr", ["url", "--state", state, "--port", "9123"]);
  assert.equal(out.code, 0, out.stderr);
  assert.equal(out.stdout, `http://127.0.0.1:9123/#token=${token}\n`);
  // With --port the daemon is not looked up: the missing token is the error, naming the command
  // that writes it (there is no klbr binary to run init with).
  const nowhere = join(state, "nowhere");
  const missing = await cli("klbr", ["url", "--state", nowhere, "--port", "9123"]);
  assert.equal(missing.code, 1);
  assert.match(
    missing.stderr,
    new RegExp(
      `cannot read operator token: .* does not exist; deno task init --state ${nowhere} creates it`,
    ),
  );
});

Deno.test("serve --log-format json writes one JSON object a line; a bad format is refused", async () => {
  const daemon = await startTestDaemon({ via: "launcher", logFormat: "json" });
  try {
    const lines = daemon.logs().split("\n").filter((line) => line.startsWith("{"));
    const listening = lines.map((line) => JSON.parse(line)).find((l) =>
      l.event === "daemon.listening"
    );
    assert.equal(listening?.level, "info");
    assert.equal(listening?.port, daemon.port);
    assert.match(listening?.at, /^\d{4}-\d\d-\d\dT/);
  } finally {
    assert.equal(await daemon.stop(), 0);
    await Deno.remove(daemon.stateDir, { recursive: true });
    await Deno.remove(daemon.workspace, { recursive: true });
  }
  const state = await Deno.makeTempDir({ prefix: "klbr-state-" });
  try {
    const bad = await cli("serve", ["serve", "--state", state, "--log-format", "xml"]);
    assert.equal(bad.code, 2);
    assert.equal(bad.stderr, 'klbr: cannot serve: --log-format must be text or json (got "xml")\n');
  } finally {
    await Deno.remove(state, { recursive: true });
  }
});
