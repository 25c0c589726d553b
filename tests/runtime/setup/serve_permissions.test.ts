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
  python: "python3",
  deno: "/usr/bin/deno",
};

Deno.test("`servePermissionFlags()` derives read, write, net and run from the configuration", () => {
  const flags = servePermissionFlags({ ...base, runPrograms: ["git", "sh"] });
  assert.deepEqual(flags, [
    "--allow-read=/s,/repo,/ws,/repo/skills,/s/config.kdl",
    // Writes stay in the state directory, the UI build output and the workspace (code.patch).
    "--allow-write=/s,/repo/ui/dist,/ws",
    // The listen address and each model host once, with the scheme's default port.
    "--allow-net=127.0.0.1:8765,localhost:8001,api.example:443",
    "--allow-run=python3,kill,ps,/usr/bin/deno,git,sh",
    "--allow-env",
    "--allow-sys",
  ]);
});

Deno.test("`servePermissionFlags()` leaves run unscoped when no program list is configured", () => {
  const flags = servePermissionFlags({ ...base, port: 0 });
  assert.ok(flags.includes("--allow-run"));
  // Port 0 lets the daemon pick: the host alone.
  assert.ok(flags.includes("--allow-net=127.0.0.1,localhost:8001,api.example:443"));
  assert.ok(!flags.some((f) => f === "--allow-read" || f === "--allow-write" || f === "-A"));
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
