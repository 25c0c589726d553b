/**
 * Discord sends as the conversation lane shows them: one message (or reaction) per outbox row,
 * built from its `outbox.pending` record and moved by each later `outbox.<state>` record, with
 * the delivery state in words: a rate-limited retry, and what reconciliation of an `unknown`
 * row did (re-post with the same nonce, history search, the gateway's echo).
 *
 * @module
 */

import type { KnownRecord, RecordData } from "../../runtime/core/mod.ts";

/** One step of a Discord send after `outbox.pending`: the record that moved it. */
export interface DeliveryStep {
  seq: number;
  at: number;
  state: string;
}

/** What is known about the delivery of one outbox row. */
export interface SendDelivery {
  outboxId: string;
  attempts: number | undefined;
  remoteId: string | undefined;
  error: string | undefined;
  /** Each `outbox.<state>` record after the pending one, in `seq` order. */
  steps: DeliveryStep[];
  /** Reconciliation and rate-limit tries, as the last record listed them. */
  tries: { how: string; outcome: string }[];
  /** On an `unknown` row: when reconciliation is due; `null` when it is left to the owner. */
  notBefore: number | null | undefined;
}

/** An `outbox.<state>` record after `outbox.pending`. */
export type OutboxStepRecord = Extract<
  KnownRecord,
  {
    type:
      | "outbox.attempting"
      | "outbox.confirmed"
      | "outbox.failed"
      | "outbox.unknown"
      | "outbox.rate_limited";
  }
>;

/** The parts of a send item that an `outbox.pending` record gives. */
export function pendingSend(data: RecordData<"outbox.pending">): {
  sendId: string;
  conversation: string;
  text: string;
  state: string;
  delivery: SendDelivery;
} {
  return {
    sendId: data.outbox_id,
    conversation: data.conversation,
    text: data.kind === "reaction"
      ? `reaction ${data.body} on message ${data.destination.message_id ?? "?"}`
      : data.body,
    state: "pending",
    delivery: {
      outboxId: data.outbox_id,
      attempts: undefined,
      remoteId: undefined,
      error: undefined,
      steps: [],
      tries: [],
      notBefore: undefined,
    },
  };
}

/** Applies a later `outbox.<state>` record to a send's delivery; returns the new state. */
export function applyOutboxStep(
  delivery: SendDelivery,
  step: { seq: number; at: number; record: OutboxStepRecord },
): string {
  const d = step.record.data;
  delivery.steps.push({ seq: step.seq, at: step.at, state: d.state });
  delivery.attempts = d.attempts;
  delivery.remoteId = d.remote_id ?? delivery.remoteId;
  delivery.error = d.error ?? delivery.error;
  if (d.tries !== undefined) delivery.tries = d.tries;
  if (d.not_before !== undefined) delivery.notBefore = d.not_before;
  return d.state;
}

/**
 * The words a send's state badge shows: a local send's state as it is, a Discord send's
 * delivery in words; never colour alone.
 *
 * @example
 * ```ts
 * sendLabel("delivered", undefined); // "delivered"
 * sendLabel("unknown", delivery); // "unknown · may or may not have been posted; not retried"
 * ```
 */
export function sendLabel(state: string, delivery: SendDelivery | undefined): string {
  if (delivery === undefined) return state;
  const last = delivery.tries.at(-1);
  switch (state) {
    case "pending":
      return last?.how === "rate_limit"
        ? `pending · rate limited, retrying the same message: ${last.outcome}`
        : "pending · not posted yet";
    case "attempting":
      return `posting to Discord${
        delivery.attempts === undefined ? "" : ` · attempt ${delivery.attempts}`
      }`;
    case "confirmed":
      return `confirmed · posted${
        delivery.remoteId === undefined ? "" : ` as message ${delivery.remoteId}`
      }${last === undefined || last.how === "rate_limit" ? "" : ` · reconciled: ${last.outcome}`}`;
    case "failed":
      return `failed: ${delivery.error ?? "Discord refused it"} · not posted; not retried`;
    case "unknown":
      if (typeof delivery.notBefore === "number") {
        return "unknown · may or may not have been posted; reconciling by its nonce";
      }
      return last === undefined
        ? "unknown · may or may not have been posted; not retried"
        : `unknown · left to you after ${delivery.tries.length} tries; never blindly resent: ${last.outcome}`;
    default:
      return state;
  }
}
