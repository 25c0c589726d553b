/**
 * Discord sends as the conversation lane shows them: one message per outbox row, built from its
 * `outbox.pending` record and moved by each later `outbox.<state>` record, with the delivery
 * state in words.
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
}

/** An `outbox.<state>` record after `outbox.pending`. */
export type OutboxStepRecord = Extract<
  KnownRecord,
  { type: "outbox.attempting" | "outbox.confirmed" | "outbox.failed" | "outbox.unknown" }
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
    text: data.body,
    state: "pending",
    delivery: {
      outboxId: data.outbox_id,
      attempts: undefined,
      remoteId: undefined,
      error: undefined,
      steps: [],
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
  return d.state;
}

/**
 * The words a send's state badge shows: a local send's state as it is, a Discord send's
 * delivery in words; never colour alone.
 *
 * @example
 * ```ts
 * sendLabel("delivered", undefined); // "delivered"
 * ```
 */
export function sendLabel(state: string, delivery: SendDelivery | undefined): string {
  return delivery === undefined ? state : deliveryLabel(state, delivery);
}

/**
 * The words a Discord send's state badge shows; never colour alone.
 *
 * @example
 * ```ts
 * deliveryLabel("unknown", delivery); // "unknown · may or may not have been posted; not retried"
 * ```
 */
export function deliveryLabel(state: string, delivery: SendDelivery): string {
  switch (state) {
    case "pending":
      return "pending · not posted yet";
    case "attempting":
      return `posting to Discord${
        delivery.attempts === undefined ? "" : ` · attempt ${delivery.attempts}`
      }`;
    case "confirmed":
      return `confirmed · posted${
        delivery.remoteId === undefined ? "" : ` as message ${delivery.remoteId}`
      }`;
    case "failed":
      return `failed: ${delivery.error ?? "Discord refused it"} · not posted; not retried`;
    case "unknown":
      return "unknown · may or may not have been posted; not retried";
    default:
      return state;
  }
}
