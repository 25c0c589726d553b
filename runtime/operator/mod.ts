/**
 * The operator CLI: `klbr status` and the other commands as a client of the v2 socket.
 *
 * @module
 */

export { runOperatorCommand } from "./_cli.ts";
