/**
 * The operator token: written once by `init` into the state directory (mode 0600), checked
 * in constant time at `hello`; and the session key the daemon signs its cookies with, kept
 * beside it so a cookie made before a rotation is still recognised as the daemon's own.
 *
 * @module
 */

import { timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import { replaceFile } from "../../store/tables/files.ts";
import { KlbrError, stateFileError } from "../core/mod.ts";

/** The token file's name inside the state directory. */
export const TOKEN_FILE = "operator.token";

/** The session key's file name inside the state directory. */
export const SESSION_KEY_FILE = "session.key";

/** What a token, and the session key, look like: 64 lowercase hex characters (32 bytes). */
const TOKEN_PATTERN = /^[0-9a-f]{64}$/;
/** What a presented token may look like: hex in either case, since case carries no secret. */
const PRESENTED_PATTERN = /^[0-9a-f]{64}$/i;

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
 *
 * @throws {KlbrError} `state_unusable` naming the file when it cannot be written.
 */
export function writeNewOperatorToken(stateDir: string): Promise<string> {
  return writeSecret(join(stateDir, TOKEN_FILE), {
    action: "write the operator token",
    fix: `move it aside, then deno task init --state ${stateDir} writes a new token`,
  });
}

/**
 * Reads the session key from the state directory, writing a fresh random one first when there
 * is none (or what is there is not a key). On return the file holds the key, mode 0600. The key
 * outlives token rotations: cookies are signed with it, so the daemon can tell its own cookie
 * made under an older token (revoked) from one it never issued (ignored).
 *
 * @throws {KlbrError} `state_unusable` naming the file when it cannot be read or written.
 */
export async function ensureSessionKey(stateDir: string): Promise<string> {
  const path = join(stateDir, SESSION_KEY_FILE);
  const fix = "move it aside, then start again (a new key is written)";
  try {
    const key = (await Deno.readTextFile(path)).trim();
    if (TOKEN_PATTERN.test(key)) return key;
  } catch (cause) {
    if (!(cause instanceof Deno.errors.NotFound)) {
      throw stateFileError("read the session key", path, { cause, fix });
    }
  }
  return await writeSecret(path, { action: "write the session key", fix });
}

/**
 * Writes 32 random bytes as hex to `path` (mode 0600), replacing the file whole: on return it
 * holds the new secret; until then it still held the old one.
 *
 * @throws {KlbrError} `state_unusable`: "cannot <action>: …; <fix>" when the OS refuses.
 */
async function writeSecret(path: string, o: { action: string; fix: string }): Promise<string> {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const token = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  try {
    await replaceFile(path, `${token}\n`, { mode: 0o600 });
  } catch (cause) {
    throw stateFileError(o.action, path, { cause, fix: o.fix });
  }
  return token;
}

/**
 * Reads the token from the state directory.
 *
 * @throws {KlbrError} `not_found` when there is no token file (`deno task init` writes it),
 * `invalid_config` when its content is not a token, `state_unusable` naming the file when it
 * cannot be read (a directory in its place, permission denied).
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
        `cannot read operator token: ${path} does not exist; deno task init --state ${stateDir} creates it`,
        { cause },
      );
    }
    throw stateFileError("read the operator token", path, {
      cause,
      fix: `move it aside, then deno task init --state ${stateDir} writes a new token`,
    });
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
 * Checks a presented token against the expected one in constant time. Hex in another case is
 * the same token (case carries no secret, and a copy may have been upper-cased on the way).
 *
 * @throws {KlbrError} `token_missing`, `token_malformed` (not 64 hex characters) or
 * `token_wrong`, each with status 401 or 400, so a client can tell what to fix.
 */
export function checkOperatorToken(presented: string | undefined, expected: string): void {
  if (presented === undefined || presented === "") {
    throw new KlbrError("token_missing", "cannot authorise: no operator token was given", {
      status: 401,
    });
  }
  if (!PRESENTED_PATTERN.test(presented)) {
    const what = presented.length === 64
      ? "64 characters, not all hex"
      : `${presented.length} characters`;
    throw new KlbrError(
      "token_malformed",
      `cannot authorise: a token is 64 hex characters, 0-9 and a-f (got ${what})`,
      { status: 400 },
    );
  }
  const a = new TextEncoder().encode(presented.toLowerCase());
  const b = new TextEncoder().encode(expected);
  if (!timingSafeEqual(a, b)) {
    throw new KlbrError("token_wrong", "cannot authorise: the operator token is wrong", {
      status: 401,
    });
  }
}
