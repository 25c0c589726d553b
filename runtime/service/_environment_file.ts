/**
 * The environment file the unit reads the keys from (`EnvironmentFile=`): created private when
 * it is missing, and named when group or others can read it.
 *
 * @module
 */

import { dirname } from "node:path";
import { pathExists } from "../../store/tables/files.ts";
import { KlbrError } from "../core/mod.ts";

/**
 * Creates the environment file at `path` when it is missing: mode 600, its directory 700 when
 * that is created too, each of `keyNames` as a commented `# NAME=` line (an uncommented empty
 * value would set the variable to ""). An existing file is never changed: its mode is the
 * owner's (it may be shared with a group on purpose), so one that group or others can read is
 * only named, with the `chmod` that fixes it.
 *
 * On return the file exists with its content complete, or was there before.
 *
 * @returns the line to show the owner, or undefined when there is nothing to say.
 * @throws {KlbrError} `usage` when the file or its directory cannot be written.
 */
export async function prepareEnvironmentFile(
  path: string,
  keyNames: string[],
): Promise<string | undefined> {
  const existing = await Deno.stat(path).catch((error) => {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  });
  if (existing !== undefined) {
    const mode = existing.mode === null ? 0 : existing.mode & 0o777;
    return mode & 0o077
      ? `note: ${path} can be read by group or others (mode ${
        mode.toString(8)
      }): run chmod 600 ${path}`
      : undefined;
  }
  const dir = dirname(path);
  const text = [
    "# Read by klbr.service (EnvironmentFile=): NAME=value, one per line; keep it mode 600.",
    ...keyNames.map((name) => `# ${name}=`),
    "",
  ].join("\n");
  try {
    if (!await pathExists(dir)) {
      await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
      await Deno.chmod(dir, 0o700);
    }
    // createNew: a file the owner made meanwhile is theirs, not replaced.
    const file = await Deno.open(path, { write: true, createNew: true, mode: 0o600 });
    try {
      await Deno.chmod(path, 0o600);
      const bytes = new TextEncoder().encode(text);
      for (let at = 0; at < bytes.length;) at += await file.write(bytes.subarray(at));
      await file.sync();
    } finally {
      file.close();
    }
  } catch (cause) {
    if (cause instanceof Deno.errors.AlreadyExists) return undefined;
    if (cause instanceof Deno.errors.PermissionDenied) {
      throw new KlbrError(
        "usage",
        `cannot install the service: cannot create the environment file ${path}; check the owner of ${dir} (got ${cause.message})`,
        { cause },
      );
    }
    throw cause;
  }
  return `created ${path} (mode 600): put the keys there`;
}
