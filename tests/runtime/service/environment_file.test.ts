// The environment file the unit reads the API keys from (`EnvironmentFile=`): `service install`
// creates it private when it is missing, so an owner with the usual umask 022 never writes the
// keys into a world-readable file, and names an existing one that group or others can read.
// Units and environment files go to a temp XDG_CONFIG_HOME; /etc and systemd are never touched.

import assert from "node:assert/strict";
import { join } from "node:path";
import { cli } from "../../_helpers/cli.ts";
import { tempDir } from "../../_helpers/temp.ts";

/** A configuration whose one route reads its key from MY_MODEL_KEY. */
async function configNamingKey(root: string): Promise<string> {
  const config = join(root, "klbr.kdl");
  await Deno.writeTextFile(
    config,
    `llm "main" { url "http://127.0.0.1:9/v1"; api_key_env "MY_MODEL_KEY"; }\n`,
  );
  return config;
}

Deno.test("`service install` creates a missing environment file mode 600 in a 700 directory, with the keys commented out", async () => {
  // Created by hand under umask 022 the file would be 644: anyone on the machine reads the keys.
  const root = await tempDir();
  const configHome = join(root, "xdg");
  const config = await configNamingKey(root);
  const args = ["service", "install", "--state", join(root, "state"), "--config", config];
  const run = await cli("klbr", args, { XDG_CONFIG_HOME: configHome, USER: "owner" });
  assert.equal(run.code, 0, run.stderr);
  const file = join(configHome, "klbr", "klbr.env");
  assert.equal((await Deno.stat(join(configHome, "klbr"))).mode! & 0o777, 0o700);
  assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
  assert.equal(
    await Deno.readTextFile(file),
    "# Read by klbr.service (EnvironmentFile=): NAME=value, one per line; keep it mode 600.\n# MY_MODEL_KEY=\n",
  );
  assert.ok(
    run.stdout.trimEnd().split("\n").includes(
      `created ${file} (mode 600): put the keys there`,
    ),
    run.stdout,
  );
  // Installed again, the owner's file is kept as it is, and nothing more is said of it.
  await Deno.writeTextFile(file, "MY_MODEL_KEY=secret\n");
  const again = await cli("klbr", args, { XDG_CONFIG_HOME: configHome, USER: "owner" });
  assert.equal(again.code, 0, again.stderr);
  assert.equal(await Deno.readTextFile(file), "MY_MODEL_KEY=secret\n");
  assert.ok(!again.stdout.includes(`created ${file}`), again.stdout);
  assert.ok(!again.stdout.includes("chmod 600 "), again.stdout);
});

Deno.test("`service install` names an existing environment file that group or others can read and says chmod 600, leaving its mode", async () => {
  const root = await tempDir();
  const configHome = join(root, "xdg");
  const config = await configNamingKey(root);
  const file = join(configHome, "klbr", "klbr.env");
  await Deno.mkdir(join(configHome, "klbr"), { recursive: true });
  await Deno.writeTextFile(file, "MY_MODEL_KEY=secret\n");
  await Deno.chmod(file, 0o644);
  const args = ["service", "install", "--state", join(root, "state"), "--config", config];
  const run = await cli("klbr", args, { XDG_CONFIG_HOME: configHome, USER: "owner" });
  assert.equal(run.code, 0, run.stderr);
  const notes = run.stdout.split("\n").filter((line) => line.includes(file));
  assert.ok(
    notes.includes(
      `note: ${file} can be read by group or others (mode 644): run chmod 600 ${file}`,
    ),
    run.stdout,
  );
  // The owner's file and its mode are the owner's to change.
  assert.equal((await Deno.stat(file)).mode! & 0o777, 0o644);
  assert.equal(await Deno.readTextFile(file), "MY_MODEL_KEY=secret\n");

  await Deno.chmod(file, 0o640);
  const group = await cli("klbr", args, { XDG_CONFIG_HOME: configHome, USER: "owner" });
  assert.ok(
    group.stdout.includes(
      `note: ${file} can be read by group or others (mode 640): run chmod 600 ${file}`,
    ),
    group.stdout,
  );
});
