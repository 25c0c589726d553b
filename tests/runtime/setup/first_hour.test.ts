// The first hour at the command line, as a newcomer meets it: each mistake `serve` and the
// operator commands can be given is one line naming the fix, exit 2, never a stack trace; the
// daemon's address is found from the state directory; serve's start-up block and doctor's
// report say whether each model route answers.

import assert from "node:assert/strict";
import { join } from "node:path";
import { cli, type CliRun } from "../../_helpers/cli.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { tempDir } from "../../_helpers/temp.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { doctorNetwork } from "../../../runtime/setup/mod.ts";

/** A refusal as the issue asks for it: one line on stderr, exit 2, no trace of a crash. */
function assertOneLineRefusal(run: CliRun, pattern: RegExp): void {
  assert.equal(run.code, 2, run.stdout + run.stderr);
  const lines = run.stderr.split("\n").filter((line) => line !== "");
  assert.equal(lines.length, 1, run.stderr);
  assert.match(lines[0], pattern);
  assert.doesNotMatch(run.stderr, /Uncaught|^\s+at |Stack backtrace/m);
}

Deno.test("serve refuses a bad flag or a bad value in one line with exit 2, before any state", async () => {
  const state = join(await tempDir(), "state");
  const cases: [string[], RegExp][] = [
    [
      ["--bogus"],
      /^klbr: cannot read the command line: there is no option --bogus; deno task klbr --help lists the options \(got serve --state .* --bogus\)$/,
    ],
    [
      ["--port", "abc"],
      /^klbr: cannot use --port: give a whole number from 1 to 65535, or 0 for any free port \(got "abc"\)$/,
    ],
    [["--port", "70000"], /^klbr: cannot use --port: .* \(got "70000"\)$/],
    [["--port"], /^klbr: cannot read the command line: --port needs a value; /],
    [
      ["--host", "127.999.0.1"],
      /^klbr: cannot serve: the bind address must be loopback \(127\.0\.0\.0\/8, ::1 or localhost\) \(got 127\.999\.0\.1\)$/,
    ],
  ];
  for (const [args, pattern] of cases) {
    assertOneLineRefusal(await cli("serve", ["serve", "--state", state, ...args]), pattern);
  }
  await assert.rejects(Deno.stat(state), Deno.errors.NotFound, "no state was created");
});

Deno.test("every command-line mistake is one line naming the usage, exit 2, before any state", async () => {
  const state = join(await tempDir(), "state");
  const cases: [string[], RegExp][] = [
    [["backup"], /^klbr: cannot run backup: usage: klbr backup <dir> \(got 0 arguments\)$/],
    [["restore"], /^klbr: cannot run restore: usage: klbr restore <dir> \[--replace\] /],
    [["reset"], /^klbr: cannot run reset: usage: klbr reset <session> \(got 0 arguments\)$/],
    [["trace", "default"], /^klbr: cannot run trace: usage: klbr trace <session> <frame-id/],
    [["cancel-job"], /^klbr: cannot run cancel-job: usage: klbr cancel-job <job-id> /],
    [
      ["status", "a", "b"],
      /^klbr: cannot run status: usage: klbr status \[session\] \(got 2 arguments: a b\)$/,
    ],
    [["init", "now"], /^klbr: cannot run init: usage: klbr init \[--state DIR\] \(got 1 /],
    // A switch given a value takes none: saying it "needs a value" sent people looking for one.
    [
      ["status", "--json=yes"],
      /^klbr: cannot read the command line: --json takes no value \(give --json alone\); deno task klbr --help lists the options \(got status --json=yes /,
    ],
    [["token"], /^klbr: cannot run token: usage: klbr token rotate \(got 0 arguments\)$/],
    [["token", "spin"], /^klbr: cannot run token: usage: klbr token rotate \(got token spin\)$/],
    [
      ["activate", "default", "two", "/r"],
      /^klbr: cannot run activate: epoch must be a whole number \(got two\)$/,
    ],
    [
      ["frobnicate"],
      /^klbr: cannot run "frobnicate": there is no such command; deno task klbr --help lists them /,
    ],
  ];
  for (const [args, pattern] of cases) {
    assertOneLineRefusal(await cli("klbr", [...args, "--state", state]), pattern);
  }
  await assert.rejects(Deno.stat(state), Deno.errors.NotFound, "no state was created");
});

Deno.test("serve on a busy port is one line naming --port, exit 2, before the state is touched", async () => {
  const state = join(await tempDir(), "state");
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = taken.addr.port;
    const run = await cli("serve", ["serve", "--state", state, "--port", String(port)]);
    assertOneLineRefusal(
      run,
      new RegExp(
        `^klbr: cannot serve: 127\\.0\\.0\\.1:${port} is already in use \\(another klbr daemon\\? .*\\); start with --port N for another port, or --port 0 for any free one \\(got .*\\)$`,
      ),
    );
    assert.equal(run.stdout, "");
  } finally {
    taken.close();
  }
  await assert.rejects(Deno.stat(state), Deno.errors.NotFound, "no state was created");
});

Deno.test("a second serve on a state directory in use is one line naming how to stop the first, exit 2", async () => {
  const daemon = await startTestDaemon();
  try {
    const run = await cli("serve", ["serve", "--state", daemon.stateDir, "--port", "0"]);
    assertOneLineRefusal(
      run,
      new RegExp(
        `^klbr: cannot open store as owner: the state directory is held by pid ${daemon.pid} started at .*, a running klbr; stop it first \\(kill -TERM ${daemon.pid} drains it; systemctl --user stop klbr when it runs as a service\\) or use another --state \\(got .*\\)$`,
      ),
    );
  } finally {
    await daemon.stop();
  }
});

Deno.test("operator commands refuse in one line with exit 2 when no daemon runs on the state directory", async () => {
  const state = join(await tempDir(), "state");
  assert.equal((await cli("init", ["init", "--state", state])).code, 0);
  const none = new RegExp(
    `^klbr: cannot reach the daemon: none runs on ${state} \\(no daemon\\.json\\); start it with deno task serve --state ${state}$`,
  );
  assertOneLineRefusal(await cli("klbr", ["status", "--state", state]), none);
  assertOneLineRefusal(await cli("klbr", ["url", "--state", state]), none);
  assertOneLineRefusal(await cli("klbr", ["stop", "default", "--state", state]), none);
  assertOneLineRefusal(
    await cli("klbr", ["status", "--state", state, "--prot", "1"]),
    /^klbr: cannot read the command line: there is no option --prot; /,
  );
});

Deno.test("an operator command given a --port nothing listens on is one line naming deno task serve, exit 2", async () => {
  const state = join(await tempDir(), "state");
  assert.equal((await cli("init", ["init", "--state", state])).code, 0);
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = closed.addr.port;
  closed.close();
  assertOneLineRefusal(
    await cli("klbr", ["status", "--state", state, "--port", String(port)]),
    new RegExp(
      `^klbr: cannot reach the daemon: nothing answers at ws://127\\.0\\.0\\.1:${port}/v2; start it with deno task serve, or give the --port it listens on$`,
    ),
  );
});

Deno.test("url of a state directory that does not exist (a mistyped --state) says no daemon runs there, exit 2, not to init it", async () => {
  const state = join(await tempDir(), "typo");
  const none = new RegExp(
    `^klbr: cannot reach the daemon: none runs on ${state} \\(no daemon\\.json\\); start it with deno task serve --state ${state}$`,
  );
  assertOneLineRefusal(await cli("klbr", ["url", "--state", state]), none);
  await assert.rejects(Deno.stat(state), Deno.errors.NotFound, "no state was created");
});

Deno.test("an operator command naming a session the daemon does not have says there is no such session, not that it is not running or to call ensureSession", async () => {
  const daemon = await startTestDaemon();
  try {
    const commands = [
      ["stop", "defualt"],
      ["resume", "defualt"],
      ["trace", "defualt", "fr_1"],
      ["search", "defualt", "hello"],
      ["budget", "defualt"],
      ["frames", "defualt"],
      ["candidates", "defualt"],
    ];
    for (const command of commands) {
      const run = await cli("klbr", [...command, "--state", daemon.stateDir]);
      assert.equal(run.code, 1, run.stdout + run.stderr);
      assert.equal(
        run.stderr,
        `klbr ${
          command[0]
        }: cannot use session defualt: there is no such session; deno task klbr status lists the sessions (got defualt)\n`,
      );
    }
  } finally {
    await daemon.stop();
  }
});

Deno.test("the daemon records its address; url and status find it there, a killed daemon's file names nobody", async () => {
  const daemon = await startTestDaemon();
  const file = join(daemon.stateDir, "daemon.json");
  const base = ["--state", daemon.stateDir];
  try {
    const recorded = JSON.parse(await Deno.readTextFile(file));
    assert.deepEqual(
      { host: recorded.host, port: recorded.port, pid: recorded.pid },
      { host: "127.0.0.1", port: daemon.port, pid: daemon.pid },
    );
    // No --port: a daemon on a free port (not 8765) is found from the state directory.
    assert.notEqual(daemon.port, 8765);
    const url = await cli("klbr", ["url", ...base]);
    assert.equal(url.code, 0, url.stderr);
    assert.equal(url.stdout, `http://127.0.0.1:${daemon.port}/#token=${daemon.token}\n`);
    const status = await cli("klbr", ["status", "--json", ...base]);
    assert.equal(status.code, 0, status.stderr);
    assert.equal(JSON.parse(status.stdout).sessions.default.state, "running");
  } finally {
    await daemon.kill();
  }
  // SIGKILL leaves the file; the owner lock says its daemon is gone.
  assert.equal(JSON.parse(await Deno.readTextFile(file)).pid, daemon.pid, "the kill left the file");
  assertOneLineRefusal(
    await cli("klbr", ["status", ...base]),
    new RegExp(
      `^klbr: cannot reach the daemon: none runs on .* \\(daemon\\.json names pid ${daemon.pid}, which has stopped\\); start it with`,
    ),
  );
  const again = await daemon.restart();
  assert.equal(JSON.parse(await Deno.readTextFile(file)).pid, again.pid);
  assert.equal(await again.stop(), 0);
  await assert.rejects(Deno.stat(file), Deno.errors.NotFound, "a clean exit removes the file");
});

Deno.test("serve's start-up block gives the address, the UI link, each route's answer, the workspace and the sandbox", async () => {
  const fake = startFakeOpenAI();
  // A port nothing listens on (fetch refuses port 9 itself, whatever listens there).
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const dead = closed.addr.port;
  closed.close();
  const daemon = await startTestDaemon({
    via: "launcher",
    modelUrl: fake.url,
    extraConfig: `llm "long" { url "http://127.0.0.1:${dead}/v1"; model "big"; }\n`,
  });
  try {
    const logs = daemon.logs();
    const origin = `http://127.0.0.1:${daemon.port}`;
    assert.match(logs, new RegExp(`^klbr is listening on ${origin}/$`, "m"));
    assert.match(logs, new RegExp(`^ {2}open {7}${origin}/#token=${daemon.token}$`, "m"));
    // The roles that copy main are on main's line: one line a server.
    assert.match(
      logs,
      new RegExp(
        `^ {2}model {6}main, fast: ${fake.url} model "fake" — answered \\(HTTP 200\\)$`,
        "m",
      ),
    );
    assert.match(
      logs,
      new RegExp(
        `^ {13}long: http://127\\.0\\.0\\.1:${dead}/v1 model "big" — NOT ANSWERING: .*refused`,
        "m",
      ),
    );
    assert.match(logs, new RegExp(`^ {2}config {5}${daemon.stateDir}/test-config\\.kdl$`, "m"));
    assert.match(logs, new RegExp(`^ {2}workspace {2}${daemon.workspace}$`, "m"));
    assert.match(logs, /^ {2}sandbox {4}(bubblewrap \(network off\)|NONE: )/m);
    // One probe a distinct URL, marked as klbr's probe; no chat request was made.
    assert.deepEqual(fake.probes.map((r) => `${r.method} ${r.path}`), ["GET /v1/models"]);
    assert.equal(fake.requests.length, 0);
    // main answers, so there is no next step to name.
    assert.doesNotMatch(logs, /^ {2}next /m);
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("the first start on an empty state names the file it wrote, one line for the one server, and a next step naming that file", async () => {
  const state = join(await tempDir(), "state");
  const daemon = await startTestDaemon({ stateDir: state, stateConfig: true, via: "launcher" });
  try {
    const logs = daemon.logs();
    const config = join(state, "config.kdl");
    assert.match(
      logs,
      new RegExp(
        `^ {2}config {5}${config} \\(written now with the defaults: edit llm "main" there\\)$`,
        "m",
      ),
    );
    assert.ok((await Deno.stat(config)).isFile);
    // What the first start reads is the file it writes: one main route the others copy.
    assert.match(
      logs,
      /^ {2}model {6}main, fast, long: http:\/\/localhost:8001\/v1 model "default" — /m,
    );
    assert.doesNotMatch(logs, /^ {13}\w+: /m);
    assert.doesNotMatch(logs, /no file|init writes one/);
    const next = /^ {2}next {7}(.*)$/m.exec(logs);
    if (next !== null) {
      assert.equal(
        next[1],
        `start an OpenAI-compatible server at http://localhost:8001/v1, or point llm "main" at one in ${config}, then restart; messages wait until it answers`,
      );
    }
  } finally {
    await daemon.stop();
  }
});

Deno.test("doctor: an unreachable main is a problem naming the fix, another route a warning", async () => {
  const state = join(await tempDir(), "state");
  assert.equal((await cli("init", ["init", "--state", state])).code, 0);
  const fake = startFakeOpenAI();
  const config = join(state, "config.kdl");
  try {
    await Deno.writeTextFile(
      config,
      `llm "main" { url "http://127.0.0.1:9/v1"; }\nllm "fast" { url "${fake.url}"; model "fake"; }\n` +
        `llm "long" { url "http://127.0.0.1:10/v1"; }\n`,
    );
    const down = await cli("doctor", ["doctor", "--state", state]);
    assert.equal(down.code, 1, down.stdout);
    assert.match(
      down.stdout,
      new RegExp(
        `^problem: route main: the model at http://127\\.0\\.0\\.1:9/v1 is not answering \\(.*\\); start an OpenAI-compatible server there, or point llm "main" at one in ${config}$`,
        "m",
      ),
    );
    assert.match(
      down.stdout,
      /^warning: route long: the model at http:\/\/127\.0\.0\.1:10\/v1 is not answering \(.*\); it runs compaction of long histories$/m,
    );
    assert.match(down.stdout, /^doctor: 1 problem\(s\), 1 warning\(s\)$/m);

    // main answers: the warning alone leaves the exit code 0.
    await Deno.writeTextFile(
      config,
      `llm "main" { url "${fake.url}"; model "fake"; }\nllm "long" { url "http://127.0.0.1:10/v1"; }\n`,
    );
    const warned = await cli("doctor", ["doctor", "--state", state]);
    assert.equal(warned.code, 0, warned.stdout);
    assert.match(warned.stdout, /^doctor: ok, 1 warning\(s\)$/m);
  } finally {
    await fake.close();
  }
});

Deno.test("doctor says each problem once: an unreadable configuration is one problem, the routes one line a server", async () => {
  const state = join(await tempDir(), "state");
  assert.equal((await cli("init", ["init", "--state", state])).code, 0);
  const config = join(state, "config.kdl");
  await Deno.writeTextFile(config, `llm "main" { url "nope"; }\n`);
  const broken = await cli("doctor", ["doctor", "--state", state]);
  assert.equal(broken.code, 1, broken.stdout);
  const problems = broken.stdout.split("\n").filter((line) => line.startsWith("problem: "));
  assert.deepEqual(problems, [
    `problem: config: cannot load config ${config}:1: llm "main" url: expected an http(s) URL (got "nope")`,
  ]);
  assert.match(broken.stdout, /^discord: not checked \(the config problem above\)$/m);
  assert.match(broken.stdout, /^permissions: not checked \(the config problem above\)$/m);
  assert.match(broken.stdout, /^doctor: 1 problem\(s\)$/m);

  // fast and long copy main: one server, one line, one problem.
  await Deno.writeTextFile(config, `llm "main" { url "http://127.0.0.1:9/v1"; }\n`);
  const down = await cli("doctor", ["doctor", "--state", state]);
  const routes = down.stdout.split("\n").filter((line) => /^ {2}route /.test(line));
  assert.equal(routes.length, 1, down.stdout);
  assert.match(
    routes[0],
    /^ {2}route main, fast, long: http:\/\/127\.0\.0\.1:9\/v1 model default /,
  );
  assert.equal(down.stdout.split("\n").filter((line) => line.startsWith("problem: ")).length, 1);
});

Deno.test("doctor's network comes from the configuration: a route outside the loopback names is reached", async () => {
  const state = join(await tempDir(), "state");
  assert.equal((await cli("init", ["init", "--state", state])).code, 0);
  const config = join(state, "config.kdl");
  await Deno.writeTextFile(config, `llm "main" { url "https://api.example/v1"; }\n`);
  assert.deepEqual(await doctorNetwork({ stateDir: state, probeDiscord: false }), [
    "127.0.0.1",
    "localhost",
    "[::1]",
    "api.example:443",
  ]);
  // A real server on 127.0.0.2, which neither the old fixed list nor this test may reach: only
  // a network derived from the configuration lets doctor's probe through.
  const server = new Deno.Command("python3", {
    args: ["-u", "-m", "http.server", "--bind", "127.0.0.2", "0"],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  try {
    const reader = server.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let banner = "";
    for (let i = 0; i < 20 && !/port (\d+)/.test(banner); i++) {
      const { value, done } = await reader.read();
      if (done) break;
      banner += value;
    }
    reader.releaseLock();
    const port = /port (\d+)/.exec(banner)?.[1];
    assert.ok(port, banner);
    await Deno.writeTextFile(config, `llm "main" { url "http://127.0.0.2:${port}/v1"; }\n`);
    const report = await cli("doctor", ["doctor", "--state", state]);
    assert.match(
      report.stdout,
      new RegExp(
        `^ {2}route main, fast, long: http://127\\.0\\.0\\.2:${port}/v1 model default \\(reachable, HTTP 404\\)$`,
        "m",
      ),
    );
    assert.doesNotMatch(report.stdout, /^problem: route main/m);
  } finally {
    server.kill("SIGKILL");
    await server.status;
    await server.stdout.cancel().catch(() => {});
  }
});
