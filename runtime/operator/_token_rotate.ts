/**
 * `klbr token rotate`: a new operator token. A running daemon holds the token in memory, so
 * it rotates it itself (`op.token_rotate`, asked with the current token) and closes every
 * session made with the old one; with no daemon running the file is replaced here.
 *
 * @module
 */

import { readOwnerLock } from "../../store/owner_lock.ts";
import { KlbrError } from "../core/mod.ts";
import { readOperatorToken, writeNewOperatorToken } from "../lanes/mod.ts";
import { daemonAddress, exchange } from "./_cli.ts";

/** Options for {@linkcode rotateToken}. */
export interface RotateTokenOptions {
  stateDir: string;
  /** The running daemon's port; the one `<state>/daemon.json` names otherwise. */
  port?: number;
}

/**
 * Rotates the operator token and prints what happened; resolves with the exit code.
 *
 * On 0 the token file holds a new token and, when a daemon runs, it refuses the old token
 * and every cookie made from it. Proven by "token rotate refuses the old token, the old
 * cookie and closes old sessions" in `tests/runtime/lanes/auth_e2e.test.ts`.
 *
 * @throws {KlbrError} `not_found` when the state directory has no token (`deno task init` writes it).
 * @example
 * ```ts
 * Deno.exit(await rotateToken({ stateDir: ".klbr", port: 8765 }));
 * ```
 */
export async function rotateToken(options: RotateTokenOptions): Promise<number> {
  const token = await readOperatorToken(options.stateDir);
  const lock = readOwnerLock(options.stateDir);
  if (lock?.alive) {
    let reply;
    let port = options.port;
    try {
      const address = await daemonAddress(options.stateDir, options.port);
      port = address.port;
      reply = await exchange(address, { kind: "op.token_rotate" }, { token, timeoutMs: 30_000 });
    } catch (error) {
      if (!(error instanceof KlbrError)) throw error;
      console.error(
        `klbr token rotate: cannot rotate: the daemon (pid ${lock.holder.pid}) holds ${options.stateDir} but did not answer on port ${
          port ?? "(none in daemon.json)"
        }; pass --port (got ${error.message})`,
      );
      return 1;
    }
    if (reply.kind === "error") {
      console.error(`klbr token rotate: ${reply.message}`);
      return 1;
    }
    console.log(
      "rotated: the daemon refuses the old token and its cookies from now on; `deno task klbr url` prints the new address",
    );
    return 0;
  }
  await writeNewOperatorToken(options.stateDir);
  console.log(
    `rotated the token in ${options.stateDir} (no daemon was running); \`deno task klbr url\` prints the new address`,
  );
  return 0;
}
