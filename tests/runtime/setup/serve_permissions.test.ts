import assert from "node:assert/strict";
import { join } from "node:path";
import {
  derivePermissionInput,
  parseRunPrograms,
  servePermissionFlags,
} from "../../../runtime/setup/mod.ts";

const base = {
  stateDir: "/s",
  configPath: "/s/config.kdl",
  host: "127.0.0.1",
  port: 8765,
  repoRoot: "/repo",
  workspace: "/ws",
  skillsRoot: "/repo/skills",
  modelUrls: ["http://localhost:8001/v1", "https://api.example/v1", "http://localhost:8001/v1"],
  python: { executable: "/py/bin/python3", home: "/py" },
  bwrap: "/usr/bin/bwrap",
  sandbox: {
    mode: "bwrap" as const,
    reason: null,
    network: false,
    userns: true,
    usernsReason: null,
  },
  deno: "/usr/bin/deno",
  envNames: ["OPENAI_API_KEY"],
};
const UNCONFINED = {
  mode: "none" as const,
  reason: "no bwrap",
  network: true,
  userns: false,
  usernsReason: null,
};
const ENV = "--allow-env=KLBR_WORKSPACE,KLBR_SKILLS_DIR,KLBR_CONFIG,KLBR_PYTHON,KLBR_BWRAP," +
  "KLBR_CELL_TIMEOUT_MS,KLBR_RUN_PROGRAMS,KLBR_MAINTENANCE_INTERVAL_S,KLBR_DRAIN_GRACE_MS," +
  "KLBR_INPUT_EXPIRE_MS,KLBR_INPUT_WAIT_WARN_MS,KLBR_MODEL_STALL_MS,KLBR_HOOK_SLOW_MS,KLBR_RETRY_BASE_MS,KLBR_FAULTS," +
  "KLBR_FAULT,KLBR_FAULT_AFTER,PATH,WS_NO_BUFFER_UTIL,WS_NO_UTF_8_VALIDATE,OPENAI_API_KEY";

Deno.test("`servePermissionFlags()` derives read, write, net, run, env and sys from the configuration", () => {
  const flags = servePermissionFlags({ ...base, runPrograms: ["git", "sh"] });
  assert.deepEqual(flags, [
    "--allow-read=/s,/repo,/ws,/repo/skills,/s/config.kdl",
    // Writes stay in the state directory, the UI build output and the workspace (code.patch).
    "--allow-write=/s,/repo/ui/dist,/ws",
    // The listen address and each model host once, with the scheme's default port.
    "--allow-net=127.0.0.1:8765,localhost:8001,api.example:443",
    // Confined, every child goes through bwrap: the interpreter and the programs are not
    // Deno's to run, and workspace.run checks its program list itself.
    "--allow-run=/usr/bin/bwrap,/bin/sh,kill,ps,/usr/bin/deno",
    // Variables by name: the fixed ones and the configuration's key variables.
    ENV,
    "--allow-sys=hostname",
  ]);
});

Deno.test("`servePermissionFlags()` names the interpreter and the programs only where children are unconfined", () => {
  const flags = servePermissionFlags({ ...base, sandbox: UNCONFINED, runPrograms: ["git", "sh"] });
  assert.ok(
    flags.includes(
      "--allow-run=/usr/bin/bwrap,/bin/sh,kill,ps,/usr/bin/deno,/py/bin/python3,git,sh",
    ),
  );
  assert.ok(flags.includes(ENV));
  assert.ok(flags.includes("--allow-sys=hostname"));
});

Deno.test("`servePermissionFlags()` leaves run unscoped only unconfined and without a program list", () => {
  assert.ok(
    servePermissionFlags({ ...base }).includes(
      "--allow-run=/usr/bin/bwrap,/bin/sh,kill,ps,/usr/bin/deno",
    ),
  );
  const flags = servePermissionFlags({ ...base, sandbox: UNCONFINED, port: 0 });
  assert.ok(flags.includes("--allow-run"));
  // Port 0 lets the daemon pick: the host alone.
  assert.ok(flags.includes("--allow-net=127.0.0.1,localhost:8001,api.example:443"));
  assert.ok(
    !flags.some((f) =>
      ["--allow-read", "--allow-write", "--allow-env", "--allow-sys", "-A"].includes(f)
    ),
  );
});

Deno.test("`parseRunPrograms()` splits a comma list and treats empty as unset", () => {
  assert.deepEqual(parseRunPrograms(" git, deno ,,sh"), ["git", "deno", "sh"]);
  assert.equal(parseRunPrograms(""), undefined);
  assert.equal(parseRunPrograms(undefined), undefined);
});

Deno.test("`servePermissionFlags()` adds the Discord API and gateway hosts only when given", () => {
  const net = (flags: string[]) => flags.find((f) => f.startsWith("--allow-net="));
  assert.equal(
    net(servePermissionFlags({
      ...base,
      discordUrls: ["https://discord.com/api/v10", "wss://gateway.discord.gg"],
    })),
    "--allow-net=127.0.0.1:8765,localhost:8001,api.example:443,discord.com:443,cdn.discordapp.com:443,media.discordapp.net:443,gateway.discord.gg:443,*.discord.gg:443",
  );
  assert.equal(
    net(servePermissionFlags({ ...base, discordUrls: [] })),
    "--allow-net=127.0.0.1:8765,localhost:8001,api.example:443",
  );
  assert.equal(
    net(servePermissionFlags({ ...base, discordUrls: ["ws://127.0.0.1:4000/gw"] })),
    "--allow-net=127.0.0.1:8765,localhost:8001,api.example:443,127.0.0.1:4000",
  );
});

Deno.test("`derivePermissionInput()` reads Discord hosts from the config only when it has a discord node", async () => {
  const state = await Deno.makeTempDir();
  try {
    const configPath = join(state, "klbr.kdl");
    const env = { DISCORD_TOKEN: "t", KLBR_WORKSPACE: state };
    await Deno.writeTextFile(configPath, `llm { url "http://127.0.0.1:1/v1" }\n`);
    const off = await derivePermissionInput({ stateDir: state, configPath }, env);
    assert.deepEqual(off.discordUrls, []);
    await Deno.writeTextFile(
      configPath,
      `llm { url "http://127.0.0.1:1/v1" }\ndiscord {\n token_env "DISCORD_TOKEN"\n channels "1"\n}\n`,
    );
    const on = await derivePermissionInput({ stateDir: state, configPath }, env);
    assert.deepEqual(on.discordUrls, ["https://discord.com/api/v10", "wss://gateway.discord.gg"]);
    // Without the token variable the configuration is refused before any flag is derived.
    await assert.rejects(
      derivePermissionInput({ stateDir: state, configPath }, { KLBR_WORKSPACE: state }),
      /discord token_env: environment variable is not set \(got DISCORD_TOKEN\)/,
    );
  } finally {
    await Deno.remove(state, { recursive: true });
  }
});
