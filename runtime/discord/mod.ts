/**
 * Discord behind the same admission path as local input: the gateway (resumed across
 * reconnects and restarts, backfilled when a resume is refused), the one outbox sender (nonces,
 * rate limits, reconciliation), and the `discord.*` RPCs a cell calls.
 *
 * @module
 */

export { DiscordGateway, GATEWAY_INTENTS, type GatewaySession } from "./_gateway.ts";
export { type DiscordMessage } from "./_inbound.ts";
export { probeDiscord } from "./_probe.ts";
export { DiscordRest, routeKey } from "./_rest.ts";
export { type DiscordEffects, discordRpcs, discordSendRpc } from "./_rpc.ts";
export { OutboxSender } from "./_sender.ts";
export {
  describeDiscord,
  discordReason,
  type DiscordStatus,
  DiscordTransport,
} from "./_transport.ts";
