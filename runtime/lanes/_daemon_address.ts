/**
 * The daemon's address file, `<state>/daemon.json`: where the daemon that owns a state
 * directory listens. The daemon writes it once it listens and removes it when it exits
 * cleanly; the operator commands read it instead of assuming a port. A file whose daemon no
 * longer holds the owner lock (killed, crashed) names nobody.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { z } from "zod";
import { readOwnerLock } from "../../store/owner_lock.ts";
import { replaceFile } from "../../store/tables/files.ts";
import { KlbrError, stateFileError } from "../core/mod.ts";

/** The address file's name inside the state directory. */
export const DAEMON_FILE = "daemon.json";

/** The address file's body. */
export const DaemonAddress = z.object({
  host: z.string().min(1),
  port: z.int().min(1).max(65535),
  pid: z.int().positive(),
  /** When the daemon started listening, in ms since the epoch. */
  started_at: z.int(),
});
/** Where a running daemon listens. */
export type DaemonAddress = z.infer<typeof DaemonAddress>;

/**
 * Writes the address file, replacing it whole: on return it holds `address`; until then it held
 * the previous one or nothing.
 *
 * @throws {KlbrError} `state_unusable` naming the file when it cannot be written.
 */
export async function writeDaemonAddress(stateDir: string, address: DaemonAddress): Promise<void> {
  const path = join(stateDir, DAEMON_FILE);
  try {
    await replaceFile(path, `${JSON.stringify(address)}\n`, { mode: 0o644 });
  } catch (cause) {
    throw stateFileError("write the daemon's address", path, {
      cause,
      fix: "move it aside, then start again",
    });
  }
}

/** Removes the address file if it names this process; a file another daemon wrote is kept. */
export async function removeDaemonAddress(stateDir: string): Promise<void> {
  const path = join(stateDir, DAEMON_FILE);
  const current = await readAddressFile(path);
  if (current !== undefined && current.pid !== Deno.pid) return;
  await Deno.remove(path).catch(() => {});
}

/**
 * Finds the daemon running on `stateDir`: its address file, checked against the owner lock
 * (the daemon named must hold it now).
 *
 * @throws {KlbrError} `no_daemon` when no file exists, it does not parse, or the process it
 * names no longer holds the state directory, e.g. `cannot reach the daemon: none runs on
 * /x/.klbr (daemon.json names pid 4242, which has stopped); start it with deno task serve`.
 * @example
 * ```ts
 * const { host, port } = await findDaemon(".klbr");
 * ```
 */
export async function findDaemon(stateDir: string): Promise<DaemonAddress> {
  const path = join(stateDir, DAEMON_FILE);
  const address = await readAddressFile(path);
  const lock = readOwnerLock(stateDir);
  const why = address === undefined
    ? `no ${DAEMON_FILE}`
    : lock?.alive !== true || lock.holder.pid !== address.pid
    ? `${DAEMON_FILE} names pid ${address.pid}, which has stopped`
    : undefined;
  if (why === undefined && address !== undefined) return address;
  throw new KlbrError(
    "no_daemon",
    `cannot reach the daemon: none runs on ${stateDir} (${why}); start it with deno task serve${
      stateDir === resolve(".klbr") ? "" : ` --state ${stateDir}`
    }`,
  );
}

async function readAddressFile(path: string): Promise<DaemonAddress | undefined> {
  try {
    return DaemonAddress.parse(JSON.parse(await Deno.readTextFile(path)));
  } catch {
    return undefined;
  }
}
