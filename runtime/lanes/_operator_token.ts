/**
 * The operator token: written once by `init` into the state directory (mode 0600), checked
 * in constant time at `hello`.
 *
 * @module
 */

import { timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import { KlbrError } from "../core/mod.ts";

/** The token file's name inside the state directory. */
export const TOKEN_FILE = "operator.token";

const TOKEN_PATTERN = /^[0-9a-f]{64}$/;

/**
 * Creates the token file when it is missing and returns the token.
 *
 * On return the file exists with mode 0600; an existing token is kept, never rotated.
 */
export async function ensureOperatorToken(stateDir: string): Promise<string> {
  try {
    return await readOperatorToken(stateDir);
  } catch (error) {
    if (!(error instanceof KlbrError) || error.code !== "not_found") throw error;
  }
  return await writeNewOperatorToken(stateDir);
}

/**
 * Writes a fresh random token over the token file and returns it: a temporary file
 * (mode 0600), fsynced, then renamed into place. On return the file holds the new token,
 * whole; before the rename it still held the old one.
 */
export async function writeNewOperatorToken(stateDir: string): Promise<string> {
  const path = join(stateDir, TOKEN_FILE);
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const token = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  const temp = `${path}.${crypto.randomUUID()}.tmp`;
  const file = await Deno.open(temp, { write: true, createNew: true, mode: 0o600 });
  try {
    await file.write(new TextEncoder().encode(token + "\n"));
    await file.sync();
  } finally {
    file.close();
  }
  await Deno.chmod(temp, 0o600);
  await Deno.rename(temp, path);
  return token;
}

/**
 * Reads the token from the state directory.
 *
 * @throws {KlbrError} `not_found` when there is no token file (run `klbr init`), and
 * `invalid_config` when its content is not a token.
 */
export async function readOperatorToken(stateDir: string): Promise<string> {
  const path = join(stateDir, TOKEN_FILE);
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (cause) {
    if (cause instanceof Deno.errors.NotFound) {
      throw new KlbrError(
        "not_found",
        `cannot read operator token: ${path} does not exist (run klbr init)`,
        { cause },
      );
    }
    throw cause;
  }
  const token = text.trim();
  if (!TOKEN_PATTERN.test(token)) {
    throw new KlbrError(
      "invalid_config",
      `cannot read operator token: ${path} does not hold 64 hex characters (got ${token.length} characters)`,
    );
  }
  return token;
}

/**
 * Checks a presented token against the expected one in constant time.
 *
 * @throws {KlbrError} `token_missing`, `token_malformed` or `token_wrong`, each with status 401
 * or 400, so a client can tell what to fix.
 */
export function checkOperatorToken(presented: string | undefined, expected: string): void {
  if (presented === undefined || presented === "") {
    throw new KlbrError("token_missing", "cannot authorise: no operator token was given", {
      status: 401,
    });
  }
  if (!TOKEN_PATTERN.test(presented)) {
    throw new KlbrError(
      "token_malformed",
      `cannot authorise: a token is 64 hex characters (got ${presented.length} characters)`,
      { status: 400 },
    );
  }
  const a = new TextEncoder().encode(presented);
  const b = new TextEncoder().encode(expected);
  if (!timingSafeEqual(a, b)) {
    throw new KlbrError("token_wrong", "cannot authorise: the operator token is wrong", {
      status: 401,
    });
  }
}
