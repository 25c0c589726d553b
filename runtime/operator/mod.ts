/**
 * The operator CLI: `klbr status` and the other commands as a client of the v2 socket, and
 * `klbr token rotate`.
 *
 * @module
 */

export { daemonAddress, runOperatorCommand } from "./_cli.ts";
export { rotateToken } from "./_token_rotate.ts";
