import assert from "node:assert/strict";
import { parseRunPrograms, servePermissionFlags } from "../../runtime/serve_permissions.ts";

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
    // Writes stay in the state directory and the UI build output.
    "--allow-write=/s,/repo/ui/dist",
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
