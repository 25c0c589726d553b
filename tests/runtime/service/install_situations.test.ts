// `klbr service install` in an owner's awkward situations: no user session bus (over su or
// sudo, in a container), under sudo without --system, and a Deno whose path systemd reads
// differently. None of these touch this machine's systemd: units go to temp directories, and
// the user manager's sockets are faked by plain files in a temp XDG_RUNTIME_DIR.

import assert from "node:assert/strict";
import { join } from "node:path";
import { cli } from "../../_helpers/cli.ts";
import { tempDir } from "../../_helpers/temp.ts";
import { renderUnit, unitFacts } from "../../../runtime/service/mod.ts";
import { HAS_ANALYZE, verify } from "./_systemd.ts";

/** The note `install` prints when `systemctl --user` has no manager to talk to. */
function noBusNote(reason: string): string {
  return `note: \`systemctl --user\` will fail here with "Failed to connect to bus": there is no user session (${reason}); run \`sudo loginctl enable-linger owner\` and log in again as owner (ssh, not su or sudo), or install a system unit instead: sudo deno task klbr service install --system …`;
}

Deno.test("`service install` without a user session bus says systemctl --user will fail, and to enable linger or use --system", async () => {
  // Over `su`, `sudo -u` or in a container there is no XDG_RUNTIME_DIR, or no manager in it:
  // the printed `systemctl --user daemon-reload` then fails with "Failed to connect to bus",
  // and the owner must learn the fix here, before the first step fails.
  const root = await tempDir();
  const state = join(root, "state");
  const base = { XDG_CONFIG_HOME: join(root, "config"), USER: "owner" };
  const unset = await cli("klbr", ["service", "install", "--state", state], {
    ...base,
    XDG_RUNTIME_DIR: "",
  });
  assert.equal(unset.code, 0, unset.stderr);
  const lines = (run: { stdout: string }) => run.stdout.trimEnd().split("\n");
  const at = lines(unset).indexOf("enable and start it:");
  assert.equal(lines(unset)[at - 1], noBusNote("XDG_RUNTIME_DIR is unset"));

  const runtime = await tempDir("klbr-xdg-runtime-");
  const empty = await cli("klbr", ["service", "install", "--state", state], {
    ...base,
    XDG_RUNTIME_DIR: runtime,
  });
  assert.equal(empty.code, 0, empty.stderr);
  assert.ok(
    lines(empty).includes(noBusNote(`no systemd/private or bus socket in ${runtime}`)),
    empty.stdout,
  );

  // A user manager runs: its private socket is there, and nothing is said.
  await Deno.mkdir(join(runtime, "systemd"));
  await Deno.writeTextFile(join(runtime, "systemd", "private"), "");
  const session = await cli("klbr", ["service", "install", "--state", state], {
    ...base,
    XDG_RUNTIME_DIR: runtime,
  });
  assert.equal(session.code, 0, session.stderr);
  assert.ok(!session.stdout.includes("Failed to connect to bus"), session.stdout);
});

Deno.test("`service install` under sudo without --system refuses to write root's user unit and names --system, exit 2", async () => {
  // `sudo deno task klbr service install` means a service for the machine: a unit in
  // /root/.config would run the agent as root, and `systemctl --user` under sudo has no bus.
  const root = await tempDir();
  const configHome = join(root, "config");
  const run = await cli("klbr", ["service", "install", "--state", join(root, "state")], {
    XDG_CONFIG_HOME: configHome,
    USER: "root",
    SUDO_USER: "owner",
  });
  assert.equal(run.code, 2, run.stdout);
  assert.equal(
    run.stderr,
    "klbr: cannot install the service: a user unit under sudo would be root's, not owner's (got USER=root, SUDO_USER=owner); run it without sudo for owner's user unit, or add --system for a system unit that runs as owner\n",
  );
  await assert.rejects(Deno.stat(join(configHome, "systemd")), Deno.errors.NotFound);

  // `sudo -u owner` is the owner's own user unit: allowed.
  const asOwner = await cli("klbr", ["service", "install", "--state", join(root, "state")], {
    XDG_CONFIG_HOME: configHome,
    USER: "owner",
    SUDO_USER: "admin",
  });
  assert.equal(asOwner.code, 0, asOwner.stderr);
});

Deno.test("the unit runs a Deno whose path holds a `$` or a `%` by that very path", async () => {
  // systemd expands `%` specifiers in the whole command line but `$` variables only in the
  // arguments: a `$$` in the program's path stays `$$`, and the unit fails to start.
  const root = await tempDir();
  const bin = join(root, "d$x 100%");
  await Deno.mkdir(bin);
  const deno = join(bin, "deno");
  await Deno.symlink(Deno.execPath(), deno);
  const { facts } = await unitFacts({
    stateDir: join(root, "state$1"),
    system: false,
    env: { XDG_CONFIG_HOME: join(root, "config"), PATH: "/usr/bin:/bin" },
    cwd: root,
    deno,
  });
  const text = renderUnit(facts);
  const exec = text.split("\n").find((line) => line.startsWith("ExecStart="))!;
  assert.ok(exec.startsWith(`ExecStart="${root}/d$x 100%%/deno" run `), exec);
  assert.ok(exec.endsWith(` serve --state ${root}/state$$1`), exec);
  if (!HAS_ANALYZE) return;
  const path = join(root, "klbr.service");
  await Deno.writeTextFile(path, text);
  assert.deepEqual(await verify(path, true, join(root, "config")), { code: 0, output: "" });
});

Deno.test("`service install` refuses a Deno whose path holds a quote or a backslash, which systemd never starts", async () => {
  // systemd refuses such an executable outright ("Executable name contains special
  // characters", a fatal unit error): say so at install, while the owner can still move Deno.
  const root = await tempDir();
  for (const dir of ["o'brien", 'say "hi"', "back\\slash"]) {
    const deno = join(root, dir, "deno");
    const { facts } = await unitFacts({
      stateDir: join(root, "state"),
      system: false,
      env: { XDG_CONFIG_HOME: join(root, "config") },
      cwd: root,
      deno,
    });
    assert.throws(() => renderUnit(facts), {
      name: "KlbrError",
      code: "usage",
      message:
        `cannot write the unit: systemd does not start a program whose path holds a quote, a backslash or a control character (got ${
          JSON.stringify(deno)
        }); install Deno at a path without them (or link it from one) and install the service again`,
    });
  }
});

Deno.test("the unit of a checkout whose path holds an apostrophe, a `$` or non-ASCII names its docs as one URL systemd accepts", async () => {
  // Documentation= is a list that systemd splits with quotes: a bare `'` opens a quoted word.
  const root = await tempDir();
  const repoRoot = join(root, "Bob's $HOME ünï");
  const text = renderUnit({
    system: false,
    stateDir: join(repoRoot, ".klbr"),
    repoRoot,
    command: [Deno.execPath(), "run", join(repoRoot, "main.ts"), "serve"],
    environment: [["KLBR_WORKSPACE", repoRoot]],
    environmentFile: join(root, "klbr.env"),
    stopTimeoutS: 30,
    writtenAt: "2026-12-05T00:00:00.000Z",
  });
  assert.match(
    text,
    new RegExp(
      `^Documentation=file://${root}/Bob%%27s%%20\\$HOME%%20%%C3%%BCn%%C3%%AF/docs/operations\\.md$`,
      "m",
    ),
  );
  assert.ok(text.includes(`\nWorkingDirectory=${repoRoot}\n`), text);
  assert.ok(text.includes(`\nEnvironment="KLBR_WORKSPACE=${repoRoot}"\n`), text);
  assert.ok(text.includes(` "${repoRoot.replace("$", "$$$$")}/main.ts" serve\n`), text);
  if (!HAS_ANALYZE) return;
  const path = join(root, "klbr.service");
  await Deno.writeTextFile(path, text);
  assert.deepEqual(await verify(path, true, join(root, "config")), { code: 0, output: "" });
});
