/**
 * Discord behind the same admission path as local input: the gateway client, the one
 * outbox sender, and the `discord.*` RPCs a cell calls.
 *
 * @module
 */

export { DiscordGateway, GATEWAY_INTENTS } from "./_gateway.ts";
export { discordHandlers } from "./_rpc.ts";
export { type DiscordMessage, DiscordTransport } from "./_transport.ts";
