/**
 * A deadline for the library's socket close. A dead ("zombied") connection, which a missed
 * heartbeat ACK finds, never answers the close frame, and Deno's WebSocket then fires no close
 * event (measured: none after 20 s on a loopback relay that stopped carrying bytes), so the
 * library's zombie check would wait for it forever instead of resuming as Discord's docs ask
 * (https://discord.com/developers/docs/events/gateway#sending-heartbeats).
 *
 * @module
 */

import type { DiscordenoShard } from "@discordeno/gateway";

/** How long a close waits for the gateway's answer before the socket is given up, in ms. */
const CLOSE_ANSWER_MS = 3_000;

/** Options for {@linkcode boundClose}. */
export interface BoundCloseOptions {
  /** Called when a close went unanswered, before the shard handles it without the socket. */
  onNoAnswer: (code: number, reason: string) => void;
}

/**
 * Makes `shard.close` end within {@linkcode CLOSE_ANSWER_MS}: an unanswered close detaches
 * the socket and hands `shard.handleClose` the close itself, so the library goes on to resume.
 *
 * @example
 * ```ts
 * boundClose(shard, { onNoAnswer: (code) => log.warn("gateway", `no answer (${code})`) });
 * ```
 */
export function boundClose(shard: DiscordenoShard, options: BoundCloseOptions): void {
  const close = shard.close.bind(shard);
  shard.close = async (code: number, reason: string) => {
    const socket = shard.socket;
    const timer = setTimeout(() => {
      if (socket === undefined || shard.socket !== socket) return;
      socket.onclose = socket.onmessage = socket.onerror = null;
      options.onNoAnswer(code, reason);
      void shard.handleClose(new CloseEvent("close", { code, reason }));
    }, CLOSE_ANSWER_MS);
    try {
      await close(code, reason);
    } finally {
      clearTimeout(timer);
    }
  };
}
