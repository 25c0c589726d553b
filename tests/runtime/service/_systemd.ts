/**
 * systemd's own reading of a unit, for the service tests: `systemd-analyze verify` where it is
 * installed (`HAS_ANALYZE`), in a temp runtime directory so it never talks to this machine's
 * systemd.
 *
 * @module
 */

import { tempDir } from "../../_helpers/temp.ts";

/** Where Debian's systemd puts `systemd-analyze`. */
export const ANALYZE = "/usr/bin/systemd-analyze";
/** Whether `systemd-analyze` is here to read units. */
export const HAS_ANALYZE = await Deno.stat(ANALYZE).then((s) => s.isFile, () => false);

/**
 * What `systemd-analyze verify` says of the unit at `path` (a user unit when `user`), with its
 * exit code; `{ code: 0, output: "" }` when systemd reads it without a word.
 *
 * @example
 * ```ts
 * assert.deepEqual(await verify(path, true, join(root, "config")), { code: 0, output: "" });
 * ```
 */
export async function verify(path: string, user: boolean, configHome: string) {
  const runtime = await tempDir("klbr-xdg-runtime-");
  await Deno.chmod(runtime, 0o700);
  const out = await new Deno.Command(ANALYZE, {
    args: [...(user ? ["--user"] : []), "verify", path],
    env: { XDG_RUNTIME_DIR: runtime, XDG_CONFIG_HOME: configHome, SYSTEMD_LOG_COLOR: "0" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, output: decode(out.stdout) + decode(out.stderr) };
}
