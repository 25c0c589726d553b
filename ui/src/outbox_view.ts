/**
 * Discord sends as the conversation lane shows them: one message per outbox row, built from its
 * `outbox.pending` record and moved by each later `outbox.<state>` record, with the delivery
 * state in words.
 *
 * @module
 */

import type { LaneRecord } from "../../runtime/core/mod.ts";
import { any, displayText, num, text } from "./_fields.ts";

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

/** The outbox id of an `outbox.*` record, when it names one. */
export function outboxId(record: LaneRecord): string | undefined {
  return text(record.data, "outbox_id");
}

/** The parts of a send item that an `outbox.pending` record gives. */
export function pendingSend(record: LaneRecord): {
  sendId: string;
  conversation: string;
  text: string;
  state: string;
  delivery: SendDelivery;
} {
  const d = record.data;
  const id = outboxId(record) ?? `seq ${record.seq}`;
  const channel = text(d, "destination.channel_id");
  return {
    sendId: id,
    conversation: text(d, "conversation") ??
      (channel === undefined ? "discord:?" : `discord:${channel}`),
    text: displayText(any(d, "body", "text")),
    state: "pending",
    delivery: {
      outboxId: id,
      attempts: undefined,
      remoteId: undefined,
      error: undefined,
      steps: [],
    },
  };
}

/** Applies a later `outbox.<state>` record to a send's delivery; returns the new state. */
export function applyOutboxStep(delivery: SendDelivery, record: LaneRecord): string {
  const d = record.data;
  const state = text(d, "state") ?? record.type.slice("outbox.".length);
  delivery.steps.push({ seq: record.seq, at: record.at, state });
  delivery.attempts = num(d, "attempts") ?? delivery.attempts;
  delivery.remoteId = text(d, "remote_id") ?? delivery.remoteId;
  delivery.error = text(d, "error") ?? delivery.error;
  return state;
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
