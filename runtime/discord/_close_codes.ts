/**
 * The gateway close codes after which reconnecting cannot help, each with its name and the fix
 * an owner applies.
 *
 * @module
 */

/**
 * Discord's "Gateway Close Event Codes" whose `Reconnect` column is `false`
 * (https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes).
 * `{var}` stands for the token's environment variable.
 */
const FATAL_CLOSE_CODES = new Map<number, { name: string; fix: string }>([
  [4004, {
    name: "authentication failed",
    fix:
      "the token was refused: reset it in the developer portal (Bot → Reset Token) and set {var}",
  }],
  [4010, { name: "invalid shard", fix: "klbr runs one shard; report this as a bug" }],
  [4011, {
    name: "sharding required",
    fix: "the bot is in too many servers for one shard (about 2,500), which klbr does not run",
  }],
  [4012, { name: "invalid API version", fix: "klbr speaks gateway v10; report this as a bug" }],
  [4013, { name: "invalid intents", fix: "klbr sent an invalid intent; report this as a bug" }],
  [4014, {
    name: "disallowed intents",
    fix: "enable Message Content Intent in the developer portal (Bot → Privileged Gateway Intents)",
  }],
]);

/**
 * The name and fix of a fatal close code (`tokenEnv` named in a refused token's fix), or null
 * for a code after which the gateway reconnects.
 *
 * @example
 * ```ts
 * fatalClose(4014, "DISCORD_TOKEN")?.fix; // "enable Message Content Intent in …"
 * ```
 */
export function fatalClose(code: number, tokenEnv: string): { name: string; fix: string } | null {
  const fatal = FATAL_CLOSE_CODES.get(code);
  return fatal === undefined
    ? null
    : { name: fatal.name, fix: fatal.fix.replace("{var}", tokenEnv) };
}
