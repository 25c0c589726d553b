// `klbr service install | uninstall` as a user runs it: the user unit lands under
// $XDG_CONFIG_HOME (or ~/.config) with the exact serve command, absolute paths, restart on
// failure and a SIGTERM drain; systemd's own `systemd-analyze verify` accepts it (user and
// system flavours) without a single warning; uninstall removes it and what enable linked.

import assert from "node:assert/strict";
import { join } from "node:path";
import { REPO_ROOT } from "../../_helpers/daemon.ts";
import { cli } from "../../_helpers/cli.ts";
import { tempDir } from "../../_helpers/temp.ts";
import { renderUnit, unitFacts } from "../../../runtime/service/mod.ts";
import { HAS_ANALYZE, verify } from "./_systemd.ts";

/** The unit's `Key=value` lines, in order, without comments. */
function keys(text: string): string[] {
  return text.split("\n").filter((line) => /^[A-Z]\w*=/.test(line));
}

Deno.test("`service install` prints an upgrade step whose doctor checks the unit's state directory, not ./.klbr", async () => {
  const root = await tempDir();
  const configHome = join(root, "xdg");
  const state = join(root, "srv-state");
  const run = await cli("klbr", ["service", "install", "--state", state], {
    XDG_CONFIG_HOME: configHome,
    USER: "owner",
  });
  assert.equal(run.code, 0, run.stderr);
  const upgrade = run.stdout.split("\n").filter((line) => line.startsWith("upgrade: "));
  assert.deepEqual(upgrade, [
    `upgrade: systemctl --user stop klbr.service; git pull; deno task doctor --state ${state}; systemctl --user start klbr.service`,
  ]);
});

Deno.test("`service install` writes the user unit under XDG_CONFIG_HOME with the serve command, absolute paths, restart and a drain", async () => {
  const root = await tempDir();
  const configHome = join(root, "config home");
  // A state path with a space and a %: both must survive systemd's quoting and specifiers.
  const state = join(root, "st ate%1");
  const config = join(root, "klbr.kdl");
  const workspace = join(root, "ws");
  await Deno.mkdir(workspace);
  await Deno.writeTextFile(
    config,
    `llm "main" { url "http://127.0.0.1:9/v1"; api_key_env "MY_MODEL_KEY"; }\n`,
  );
  const run = await cli("klbr", ["service", "install", "--state", state, "--config", config], {
    XDG_CONFIG_HOME: configHome,
    KLBR_WORKSPACE: workspace,
    PATH: `${REPO_ROOT}/node_modules/.bin:/usr/bin:/bin`,
    USER: "owner",
  });
  assert.equal(run.code, 0, run.stderr);
  const path = join(configHome, "systemd", "user", "klbr.service");
  const text = await Deno.readTextFile(path);
  const lines = run.stdout.trimEnd().split("\n");
  assert.equal(lines[0], `wrote ${path}:`);
  assert.ok(run.stdout.includes(text), "it prints what it wrote");
  assert.deepEqual(lines.slice(-8), [
    "enable and start it:",
    "  systemctl --user daemon-reload",
    "  systemctl --user enable --now klbr.service",
    "  loginctl enable-linger owner    # keeps it running while you are logged out",
    "logs: journalctl --user -u klbr.service -f",
    `upgrade: systemctl --user stop klbr.service; git pull; deno task doctor --state '${state}' --config ${config}; systemctl --user start klbr.service`,
    `keys: the configuration reads MY_MODEL_KEY from the environment; put MY_MODEL_KEY=… in ${configHome}/klbr/klbr.env (one per line, chmod 600), not in the unit`,
    // Missing, so made private: by hand under umask 022 it would be world-readable.
    `created ${configHome}/klbr/klbr.env (mode 600): put the keys there`,
  ]);
  // The serve task's flags, read from deno.json, with Deno and main.ts by absolute path.
  const task = JSON.parse(await Deno.readTextFile(join(REPO_ROOT, "deno.json"))).tasks.serve;
  const flags = (task as string).split(/\s+/).filter((part) => part.startsWith("--"));
  assert.deepEqual(keys(text), [
    `Description=klbr agent runtime (state ${state.replace("%", "%%")})`,
    `Documentation=file://${REPO_ROOT}/docs/operations.md`,
    "StartLimitIntervalSec=600",
    "StartLimitBurst=5",
    "Type=simple",
    `WorkingDirectory=${REPO_ROOT}`,
    `Environment=KLBR_WORKSPACE=${workspace}`,
    // Set at install (the CLI helper sets it), so passed on; PATH without deno task's entry.
    `Environment=KLBR_SKILLS_DIR=${REPO_ROOT}/skills`,
    "Environment=PATH=/usr/bin:/bin",
    `EnvironmentFile=-${configHome}/klbr/klbr.env`,
    `ExecStart=${Deno.execPath()} run ${flags.join(" ")} ${REPO_ROOT}/main.ts serve --state "${
      state.replace("%", "%%")
    }" --config ${config}`,
    "Restart=on-failure",
    "RestartSec=5",
    "KillMode=mixed",
    "KillSignal=SIGTERM",
    // The drain's 10 s grace, 5 s for connections, and a margin.
    "TimeoutStopSec=30",
    "WantedBy=default.target",
  ]);
  assert.equal((await Deno.stat(path)).mode! & 0o777, 0o644);

  const removed = await cli("klbr", ["service", "uninstall"], { XDG_CONFIG_HOME: configHome });
  assert.equal(removed.code, 0, removed.stderr);
  assert.equal(
    removed.stdout,
    `removed ${path}\nif it still runs: systemctl --user stop klbr.service\nthen: systemctl --user daemon-reload\n`,
  );
  await assert.rejects(Deno.stat(path), Deno.errors.NotFound);
  const again = await cli("klbr", ["service", "uninstall"], { XDG_CONFIG_HOME: configHome });
  assert.equal(again.code, 0);
  assert.equal(again.stdout, `no unit at ${path}\n`);
});

Deno.test("`service install` without XDG_CONFIG_HOME uses ~/.config; uninstall removes the link enable made", async () => {
  const home = await tempDir();
  const state = join(home, "state");
  const env = { HOME: home, XDG_CONFIG_HOME: "" };
  const run = await cli("klbr", ["service", "install", "--state", state, "--port", "9000"], env);
  assert.equal(run.code, 0, run.stderr);
  const dir = join(home, ".config", "systemd", "user");
  const text = await Deno.readTextFile(join(dir, "klbr.service"));
  assert.match(text, new RegExp(`^ExecStart=.* serve --state ${state} --port 9000$`, "m"));
  // What `systemctl --user enable` creates.
  await Deno.mkdir(join(dir, "default.target.wants"));
  await Deno.symlink(join(dir, "klbr.service"), join(dir, "default.target.wants", "klbr.service"));
  assert.equal((await cli("klbr", ["service", "uninstall"], env)).code, 0);
  assert.deepEqual([...Deno.readDirSync(join(dir, "default.target.wants"))], []);
  assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["default.target.wants"]);
});

Deno.test("`service` with another subcommand is one line naming the usage, exit 2", async () => {
  const run = await cli("klbr", ["service", "start"]);
  assert.equal(run.code, 2);
  assert.equal(
    run.stderr,
    "klbr: cannot run service: usage: klbr service install|uninstall [--system] (got service start)\n",
  );
});

Deno.test({
  name: HAS_ANALYZE
    ? "systemd-analyze verify accepts the user unit and the system unit without a warning"
    : "systemd-analyze verify: skipped, /usr/bin/systemd-analyze is not installed",
  ignore: !HAS_ANALYZE,
  fn: async () => {
    const root = await tempDir();
    const configHome = join(root, "config");
    const state = join(root, "st ate%1");
    const run = await cli("klbr", ["service", "install", "--state", state], {
      XDG_CONFIG_HOME: configHome,
    });
    assert.equal(run.code, 0, run.stderr);
    const user = await verify(join(configHome, "systemd/user/klbr.service"), true, configHome);
    assert.deepEqual(user, { code: 0, output: "" });
    // The system flavour, rendered from the same facts, checked by the system manager.
    const { facts } = await unitFacts({
      stateDir: state,
      system: true,
      env: { USER: "root", PATH: "/usr/bin:/bin", HOME: root },
      cwd: root,
    });
    const text = renderUnit(facts);
    assert.match(text, /^User=root$/m);
    assert.match(text, /^WantedBy=multi-user\.target$/m);
    assert.match(text, /^EnvironmentFile=-\/etc\/klbr\/klbr\.env$/m);
    const systemDir = join(root, "system");
    await Deno.mkdir(systemDir);
    await Deno.writeTextFile(join(systemDir, "klbr.service"), text);
    const system = await verify(join(systemDir, "klbr.service"), false, configHome);
    assert.deepEqual(system, { code: 0, output: "" });

    // The check is real: a broken unit is refused.
    await Deno.writeTextFile(
      join(systemDir, "klbr.service"),
      text.replace("Restart=on-failure", "Restart=sometimes"),
    );
    const broken = await verify(join(systemDir, "klbr.service"), false, configHome);
    assert.match(broken.output, /Failed to parse service restart specifier/);
  },
});

Deno.test("the unit's command, run as systemd would (its cwd and environment), serves; SIGTERM to it alone drains, exit 0", async () => {
  const root = await tempDir();
  const configHome = join(root, "config");
  const state = join(root, "state");
  const workspace = join(root, "ws");
  await Deno.mkdir(workspace);
  const run = await cli("klbr", ["service", "install", "--state", state, "--port", "0"], {
    XDG_CONFIG_HOME: configHome,
    KLBR_WORKSPACE: workspace,
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
  });
  assert.equal(run.code, 0, run.stderr);
  const text = await Deno.readTextFile(join(configHome, "systemd/user/klbr.service"));
  const value = (key: string) =>
    keys(text).filter((l) => l.startsWith(`${key}=`)).map((l) => l.slice(key.length + 1));
  // No word of this unit needs quoting, so a split is systemd's own reading.
  const [program, ...args] = value("ExecStart")[0].split(" ");
  const env = Object.fromEntries(value("Environment").map((kv) => kv.split(/=(.*)/s, 2)));
  const child = new Deno.Command(program, {
    args,
    cwd: value("WorkingDirectory")[0],
    clearEnv: true,
    env: { ...env, HOME: root },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let output = "";
  const pump = (stream: ReadableStream<Uint8Array>) =>
    (async () => {
      for await (const chunk of stream.pipeThrough(new TextDecoderStream())) output += chunk;
    })();
  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
  try {
    for (let i = 0; i < 1500 && !/daemon\.listening/.test(output); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.match(output, /daemon\.listening/, output);
    assert.match(output, new RegExp(`^ {2}workspace {2}${workspace}$`, "m"));
    child.kill("SIGTERM");
    const status = await child.status;
    await pumps;
    assert.equal(status.code, 0, output);
    assert.match(output, /daemon\.draining SIGTERM: draining/);
    assert.match(output, /daemon\.drained drained; exiting/);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.status;
  }
});

Deno.test("`service install` passes on every KLBR_* setting of the daemon set at install, KLBR_HOOK_SLOW_MS included", async () => {
  const root = await tempDir();
  // The daemon's settings from the environment (docs/configuration.md, docs/security.md).
  const settings = {
    KLBR_SKILLS_DIR: join(root, "skills"),
    KLBR_PYTHON: "/usr/bin/python3",
    KLBR_BWRAP: "/usr/bin/bwrap",
    KLBR_RUN_PROGRAMS: "git,python3",
    KLBR_CELL_TIMEOUT_MS: "60000",
    KLBR_MAINTENANCE_INTERVAL_S: "600",
    KLBR_DRAIN_GRACE_MS: "20000",
    KLBR_INPUT_EXPIRE_MS: "3600000",
    KLBR_INPUT_WAIT_WARN_MS: "60000",
    KLBR_MODEL_STALL_MS: "30000",
    KLBR_HOOK_SLOW_MS: "5000",
    KLBR_RETRY_BASE_MS: "2000",
  };
  const { facts } = await unitFacts({
    stateDir: join(root, "state"),
    system: false,
    env: { ...settings, XDG_CONFIG_HOME: join(root, "config"), PATH: "/usr/bin:/bin" },
    cwd: root,
  });
  assert.deepEqual(
    facts.environment.filter(([name]) => name in settings).sort(),
    Object.entries(settings).sort(),
  );
});

Deno.test("the unit of a checkout whose path holds a space names its docs as one URL, and systemd reads it without a warning", async () => {
  const root = await tempDir();
  const repoRoot = join(root, "my repo%1");
  const text = renderUnit({
    system: false,
    stateDir: join(root, "state"),
    repoRoot,
    command: [Deno.execPath(), "run", join(repoRoot, "main.ts"), "serve"],
    environment: [["KLBR_WORKSPACE", repoRoot]],
    environmentFile: join(root, "klbr.env"),
    stopTimeoutS: 30,
    writtenAt: "2026-12-05T00:00:00.000Z",
  });
  // Documentation= is a list split at spaces: the path is percent-encoded, its % doubled.
  assert.match(
    text,
    new RegExp(`^Documentation=file://${root}/my%%20repo%%251/docs/operations\\.md$`, "m"),
  );
  if (!HAS_ANALYZE) return;
  const path = join(root, "klbr.service");
  await Deno.writeTextFile(path, text);
  assert.deepEqual(await verify(path, true, join(root, "config")), { code: 0, output: "" });
});
