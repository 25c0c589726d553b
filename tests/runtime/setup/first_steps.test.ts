// What `init` prints next, in-process: each command must work when pasted into a shell, for the
// state directory and the configuration this `init` used.

import assert from "node:assert/strict";
import { join } from "node:path";
import { describeInit } from "../../../runtime/setup/mod.ts";
import { tempDir } from "../../_helpers/temp.ts";

Deno.test("`describeInit()` names --config in the next commands when init was given one, and quotes paths with spaces", async () => {
  const root = await tempDir();
  const stateDir = join(root, "my state");
  const configPath = join(root, "it's here", "klbr.kdl");
  const lines = await describeInit({ created: true, stateDir }, {
    configPath,
    env: {},
    cwd: root,
  });
  const quotedState = `'${stateDir}'`;
  const quotedConfig = `'${join(root, "it")}'\\''${join("s here", "klbr.kdl")}'`;
  const serve = lines.find((line) => line.includes("deno task serve"));
  assert.equal(
    serve?.trim().split(/ {2,}/)[0],
    `2. deno task serve --state ${quotedState} --config ${quotedConfig}`,
  );
  assert.ok(
    lines.some((line) => line.includes(`klbr url --state ${quotedState} --config ${quotedConfig}`)),
    lines.join("\n"),
  );
  // A shell reads the quoted words back as the paths.
  const echoed = await new Deno.Command("sh", {
    args: ["-c", `printf '%s\\n' ${quotedState} ${quotedConfig}`],
  }).output();
  assert.equal(new TextDecoder().decode(echoed.stdout), `${stateDir}\n${configPath}\n`);
});

Deno.test("`describeInit()` leaves out --state and --config when the commands find them by themselves", async () => {
  const root = await tempDir();
  const lines = await describeInit({ created: true, stateDir: join(root, ".klbr") }, {
    env: {},
    cwd: root,
  });
  const serve = lines.find((line) => line.includes("deno task serve"));
  assert.equal(serve?.trim().split(/ {2,}/)[0], "2. deno task serve");
});
