/**
 * The one outbox sender: takes rows one at a time, each channel's strictly in the order they
 * were written (`nextOutboxWork`), and records honestly what each request did: a `pending` row
 * is committed `attempting`, then sent once with its nonce and `enforce_nonce`; an `unknown`
 * row is reconciled (re-posted with the same nonce inside the nonce window, else looked for in
 * history), never blindly resent. The states and the reconciliation are in `docs/discord.md`,
 * "Outbox states" and "Reconciliation".
 *
 * @module
 */

import { camelize } from "@discordeno/utils";
import {
  deferOutbox,
  getOutbox,
  moveOutbox,
  nextOutboxWork,
  openOutboxByNonce,
  type OutboxRecord,
  reconcileOutbox,
} from "../../store/tables/outbox.ts";
import { readGatewayState } from "../../store/tables/discord_gateway.ts";
import type { Store } from "../../store/store.ts";
import type { DiscordConfig } from "../config/mod.ts";
import { type Logger, SerialRunner } from "../core/mod.ts";
import { type DiscordRest, failureText, type RestResult, sleep } from "./_rest.ts";

/** What one reconciliation try records on its row; `notBefore` is null unless given. */
type ReconcileTry = Omit<Parameters<typeof reconcileOutbox>[2], "notBefore"> & {
  notBefore?: number | null;
};

/** Reconciliation tries of one row before it is left to the operator. */
const MAX_RECONCILE_TRIES = 5;

/** Rows (or waits) one drain handles at most before it yields to the next wake. */
const MAX_STEPS_PER_DRAIN = 1000;

/**
 * After a drain met a store failure (a full disk), it runs again after `firstMs`, doubling to
 * `maxMs` while the failure lasts, without waiting for the next send to wake it.
 */
const STORE_RETRY = { firstMs: 1_000, maxMs: 60_000 };

/** Options for {@linkcode OutboxSender}. */
export interface OutboxSenderOptions {
  config: DiscordConfig;
  store: Store;
  rest: DiscordRest;
  log: Logger;
  signal: AbortSignal;
}

/** Drains the outbox; {@linkcode wake} after a row is written. */
export class OutboxSender {
  #o: OutboxSenderOptions;
  #runner = new SerialRunner(() => this.#drain());
  #interrupt = new AbortController();
  /** The wait before the next drain after a store failure; 0 while the store works. */
  #storeRetryMs = 0;
  /** The row whose request is out: `attempting` until its outcome is committed. */
  #inFlight: string | undefined;
  #storeRetry: ReturnType<typeof setTimeout> | undefined;

  /** Creates the sender; nothing is sent until {@linkcode wake}. */
  constructor(options: OutboxSenderOptions) {
    this.#o = options;
    options.signal.addEventListener("abort", () => clearTimeout(this.#storeRetry), { once: true });
  }

  /** Tells the sender that a row may be due; a wait in progress is cut short. */
  wake(): void {
    if (this.#o.signal.aborted) return;
    this.#interrupt.abort();
    // #drain catches its own failures, so a run never rejects.
    void this.#runner.run();
  }

  /** Resolves when no drain runs. */
  idle(): Promise<void> {
    return this.#runner.idle();
  }

  /** The bot's own message with `nonce` was seen: evidence for an `unknown` row. */
  onOwnMessage(nonce: string, messageId: string): void {
    const row = openOutboxByNonce(this.#o.store, nonce);
    if (row === undefined || row.state !== "unknown") return;
    const outcome = `saw message ${messageId} with this nonce on the gateway`;
    this.#reconciled(row.id, { try: { how: "gateway", outcome }, remoteId: messageId });
  }

  async #drain(): Promise<void> {
    try {
      this.#strandedToUnknown();
      for (let i = 0; i < MAX_STEPS_PER_DRAIN && !this.#o.signal.aborted; i++) {
        const row = nextOutboxWork(this.#o.store);
        if (row === undefined) {
          this.#storeRetryMs = 0; // the store answered: a later failure waits the first wait
          return;
        }
        const wait = (row.notBefore ?? 0) - Date.now();
        if (wait > 0) {
          this.#interrupt = new AbortController();
          await sleep(wait, AbortSignal.any([this.#interrupt.signal, this.#o.signal]));
          continue;
        }
        if (row.state === "pending") await this.#send(row);
        else await this.#reconcile(row);
      }
      if (!this.#o.signal.aborted) void this.#runner.run();
    } catch (error) {
      this.#afterStoreFailure(error);
    }
  }

  /**
   * A store failure stops this drain only: the rows stay where the store left them, and the
   * next drain runs at the next wake or after {@linkcode STORE_RETRY}, whichever comes first.
   */
  #afterStoreFailure(error: unknown): void {
    if (this.#o.signal.aborted) return;
    this.#storeRetryMs = Math.min(STORE_RETRY.maxMs, this.#storeRetryMs * 2 || STORE_RETRY.firstMs);
    this.#o.log.error(
      "discord.sender_stopped",
      `discord: the outbox sender stopped: ${error}; it tries again in ${this.#storeRetryMs} ms`,
    );
    clearTimeout(this.#storeRetry);
    this.#storeRetry = setTimeout(() => this.wake(), this.#storeRetryMs);
  }

  /** The one request of a row: a message POST with its nonce, or a reaction PUT. */
  #request(row: OutboxRecord): Promise<RestResult> {
    const channel = row.destination.channel_id;
    if (row.kind === "reaction") {
      const emoji = encodeURIComponent(row.body);
      return this.#o.rest.request(
        "PUT",
        `/channels/${channel}/messages/${row.destination.message_id}/reactions/${emoji}/@me`,
      );
    }
    const body: Record<string, unknown> = {
      content: row.body,
      nonce: row.nonce,
      enforce_nonce: true,
    };
    if (row.destination.reply_to !== undefined) {
      body.message_reference = { message_id: row.destination.reply_to, fail_if_not_exists: false };
    }
    return this.#o.rest.request("POST", `/channels/${channel}/messages`, { body });
  }

  /** The message id a 2xx proves, or `null`. */
  #remoteId(row: OutboxRecord, result: RestResult): string | null {
    if (result.kind !== "ok") return null;
    if (row.kind === "reaction") return `${row.destination.message_id}:${row.body}`;
    const id = (result.json as { id?: unknown } | null)?.id;
    return typeof id === "string" && id !== "" ? id : null;
  }

  /**
   * The row a store failure left `attempting` after its request went out (its outcome could
   * not be written): nobody knows whether it was posted, so it becomes `unknown` and is
   * reconciled, never posted blindly again — what a restart does for a crash there.
   */
  #strandedToUnknown(): void {
    const id = this.#inFlight;
    if (id === undefined) return;
    if (getOutbox(this.#o.store, id)?.state === "attempting") {
      this.#moved(moveOutbox(this.#o.store, id, "unknown", {
        error: "the store failed after the request; it may or may not have been posted",
      }));
    }
    this.#inFlight = undefined;
  }

  async #send(row: OutboxRecord): Promise<void> {
    // Durable before the request leaves: a crash from here on leaves `attempting`, which the
    // next start records as `unknown` and reconciles (a store failure: the next drain).
    this.#moved(moveOutbox(this.#o.store, row.id, "attempting"));
    this.#inFlight = row.id;
    this.#outcome(row, await this.#request(row));
    this.#inFlight = undefined;
  }

  /** Records what the request of `row` did. */
  #outcome(row: OutboxRecord, result: RestResult): void {
    const remoteId = this.#remoteId(row, result);
    const { store } = this.#o;
    if (remoteId !== null) return this.#moved(moveOutbox(store, row.id, "confirmed", { remoteId }));
    switch (result.kind) {
      case "rate_limited":
        return this.#moved(deferOutbox(store, row.id, {
          notBefore: Date.now() + result.retryAfterMs,
          error: `HTTP 429${
            result.global ? " (global)" : ""
          }: not processed; retry after ${result.retryAfterMs} ms`,
        }));
      case "refused":
        return this.#moved(moveOutbox(store, row.id, "failed", {
          error: `HTTP ${result.status}: ${result.text}`,
        }));
      case "ok":
        return this.#moved(moveOutbox(store, row.id, "unknown", {
          error: `HTTP ${result.status} without a message id; it may have been posted`,
        }));
      case "lost":
        return this.#moved(moveOutbox(store, row.id, "unknown", {
          error: `${result.reason}; it may have been posted`,
        }));
    }
  }

  /** One reconciliation try of an `unknown` row. */
  async #reconcile(row: OutboxRecord): Promise<void> {
    const { config } = this.#o;
    const tried = row.tries.filter((t) => t.how !== "rate_limit").length;
    // After the last try the row is left to the operator: no time to try again.
    const retryAt = tried + 1 >= MAX_RECONCILE_TRIES
      ? null
      : Date.now() + Math.min(30_000, 1000 * 2 ** tried);
    // A re-post is trusted only if it reaches Discord inside the nonce window.
    const inWindow = row.kind === "reaction" || (row.firstAttemptAt !== null &&
      Date.now() + config.send_timeout_ms - row.firstAttemptAt < config.nonce_window_ms);
    if (!inWindow) return await this.#searchHistory(row, retryAt);
    const result = await this.#request(row);
    const how = row.kind === "reaction" ? "reput" : "repost";
    const remoteId = this.#remoteId(row, result);
    if (remoteId !== null) {
      const outcome = row.kind === "reaction"
        ? "the reaction is in place"
        : `a re-post with the same nonce returned message ${remoteId}`;
      return this.#reconciled(row.id, { try: { how, outcome }, remoteId, counted: true });
    }
    if (result.kind === "rate_limited") {
      return this.#reconciled(row.id, {
        try: { how, outcome: `HTTP 429: not processed; retry after ${result.retryAfterMs} ms` },
        notBefore: Date.now() + result.retryAfterMs,
        counted: true,
      });
    }
    const outcome = `${failureText(result)}; still unknown`;
    this.#reconciled(row.id, { try: { how, outcome }, notBefore: retryAt, counted: true });
  }

  /** Looks for the row's nonce among the channel's last 100 messages. */
  async #searchHistory(row: OutboxRecord, retryAt: number | null): Promise<void> {
    const channel = row.destination.channel_id;
    const result = await this.#o.rest.request("GET", `/channels/${channel}/messages?limit=100`);
    if (result.kind !== "ok" || !Array.isArray(result.json)) {
      const outcome = `cannot read recent messages: ${failureText(result)}`;
      return this.#reconciled(row.id, { try: { how: "history", outcome }, notBefore: retryAt });
    }
    const selfId = readGatewayState(this.#o.store)?.selfId ?? null;
    const messages = camelize(result.json) as {
      id?: string;
      nonce?: unknown;
      author?: { id?: string };
    }[];
    const found = messages.find((m) =>
      m.nonce !== undefined && m.nonce !== null && String(m.nonce) === row.nonce &&
      (selfId === null || m.author?.id === selfId)
    );
    const outcome = found?.id
      ? `found message ${found.id} with this nonce among the last ${messages.length}`
      : `no message with this nonce among the last ${messages.length}; outside the nonce window a re-post could post it twice, so it is left to the operator`;
    this.#reconciled(row.id, {
      try: { how: "history", outcome },
      remoteId: found?.id || undefined,
    });
  }

  /** Records one reconciliation try of row `id`, unless something else settled it first. */
  #reconciled(id: string, result: ReconcileTry): void {
    const { store } = this.#o;
    // The gateway's echo and a reconciliation may race for one row: the first settles it.
    const current = store.transaction(() =>
      getOutbox(store, id)?.state === "unknown"
        ? reconcileOutbox(store, id, { notBefore: null, ...result })
        : undefined
    );
    if (current !== undefined) this.#moved(current);
  }

  #moved(row: OutboxRecord): void {
    this.#o.log.info("discord.outbox_state", `discord: outbox ${row.id} ${row.state}`, {
      outbox_id: row.id,
      state: row.state,
    });
  }
}
