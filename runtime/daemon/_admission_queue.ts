/**
 * Group commit for admission: one writer that commits, in one transaction, whatever inputs are
 * queued — from every connection and session — when the previous commit returns. There is no
 * timer: a batch that finds the writer idle is committed one event-loop turn after it was
 * submitted, with whatever the other connections handed over in that turn; inputs that arrive
 * while a commit (and the fan-out after it) runs wait in the queue and go together in the next
 * one. So the inputs a commit holds track the offered load. (Committing a batch at once made a
 * flooding connection, which yields the event loop between its batches, meet an idle writer
 * each time: every commit held one batch of 32, figure 1a, twice the fsyncs.) A lone input that
 * finds the writer idle — an owner's message — is committed at once, in the same turn: waiting
 * that turn made its ack about 7% slower (figure 2a: 1.35× → 1.25× the peer's p50, medians of
 * six alternating pairs). Proven by "an idle writer commits a lone input at once, and gives a
 * batch one event-loop turn to gather"
 * (`tests/runtime/daemon/ack_order.test.ts`).
 *
 * The ack path does nothing but commit and answer: each group's promise resolves right after
 * the commit that holds it, so its connection sends the acks in microtasks; the planner's wake
 * and the record fan-out run one event-loop turn later, after those sends.
 *
 * Inputs are indexed for `history.search` off that path: once the queue has gone idle with at
 * least {@linkcode INDEX_BATCH} inputs not indexed, the writer indexes them that many to a
 * transaction, one event-loop turn between them, and goes back to admission as soon as an input
 * is queued. A smaller backlog waits: indexing one input alone would cost a commit of its own
 * (an fsync) after each lone input. At a start the whole backlog is indexed the same way, so the
 * first search (a turn) does not pay for it. A search catches up whatever is still behind
 * (`indexAdmittedInputs` in `store/tables/history_index.ts`), so this is only where the work is done,
 * not what a search sees.
 *
 * @module
 */

import { indexAdmittedInputs, inputsNotIndexed } from "../../store/tables/history_index.ts";
import type { Store } from "../../store/store.ts";
import { faultPoint, type Logger, nextMacrotask } from "../core/mod.ts";
import type { AdmitOutcome } from "../lanes/mod.ts";
import { admitGroups, type PendingInput } from "./_admission.ts";

/** The inputs one commit holds at most; the rest wait for the next. */
export const MAX_INPUTS_PER_COMMIT = 2048;

/** The admitted inputs one idle indexing transaction takes: fewer wait for more, or a search. */
export const INDEX_BATCH = 256;

interface Group {
  session: string;
  inputs: PendingInput[];
  resolve: (outcomes: AdmitOutcome[]) => void;
  reject: (error: unknown) => void;
}

/**
 * The single admission writer of the daemon.
 *
 * @example
 * ```ts
 * const queue = new AdmissionQueue(store, (sessions) => sessions.forEach(wake), log);
 * const outcomes = await queue.submit("default", [localInput("web-1", input)]);
 * ```
 */
export class AdmissionQueue {
  readonly #store: Store;
  readonly #admitted: (sessions: Set<string>) => void;
  readonly #log: Logger;
  #queue: Group[] = [];
  #queued = 0;
  #draining = false;
  /** Until the backlog found at the start is indexed, a batch smaller than a whole one goes too. */
  #starting = true;

  /**
   * `admitted` is called with the sessions that gained a new input, one event-loop turn after
   * the acks of the commit were handed to their connections.
   */
  constructor(store: Store, admitted: (sessions: Set<string>) => void, log: Logger) {
    this.#store = store;
    this.#admitted = admitted;
    this.#log = log;
    this.#draining = true;
    void this.#drain();
  }

  /**
   * Queues a group of inputs of one session and resolves with one outcome per input once the
   * transaction that holds them has committed; rejects with the store's error when that commit
   * failed (then none of them was admitted). The group is committed whole, never split.
   */
  submit(session: string, inputs: PendingInput[]): Promise<AdmitOutcome[]> {
    if (inputs.length === 0) return Promise.resolve([]);
    const done = new Promise<AdmitOutcome[]>((resolve, reject) => {
      this.#queue.push({ session, inputs, resolve, reject });
    });
    this.#queued += inputs.length;
    if (!this.#draining) {
      this.#draining = true;
      void this.#drain(inputs.length === 1 ? "now" : "next turn");
    }
    return done;
  }

  /**
   * Commits what is queued until nothing is, then indexes while idle. A lone input that found
   * the writer idle is committed at once (an owner's message: figure 2a); a batch waits one
   * event-loop turn for what the other connections hand over in it (a flood: figure 1a).
   */
  async #drain(first: "now" | "next turn" = "next turn"): Promise<void> {
    try {
      if (first === "now") await Promise.resolve();
      else await nextMacrotask();
      for (;;) {
        while (this.#queue.length > 0) {
          const woken = this.#commitQueued();
          // The acks leave in the microtasks of the resolved groups, before this turn ends.
          await nextMacrotask();
          if (woken.size > 0) this.#wake(woken);
          // Inputs delivered during the fan-out join the commit after it.
          if (this.#queue.length === 0) await nextMacrotask();
        }
        // Idle: one batch of the history index, then admission again if an input came.
        if (!this.#indexBatch()) break;
        await nextMacrotask();
      }
    } finally {
      this.#draining = false;
    }
  }

  /** Commits the queued groups (up to the bound) in one transaction and settles them. */
  #commitQueued(): Set<string> {
    const groups: Group[] = [];
    let count = 0;
    while (this.#queue.length > 0) {
      const next = this.#queue[0];
      if (groups.length > 0 && count + next.inputs.length > MAX_INPUTS_PER_COMMIT) break;
      groups.push(this.#queue.shift()!);
      count += next.inputs.length;
    }
    this.#queued -= count;
    let results: AdmitOutcome[][];
    try {
      results = this.#store.transaction(() => admitGroups(this.#store, groups));
      faultPoint("commit-before-notify");
    } catch (error) {
      for (const group of groups) group.reject(error);
      return new Set();
    }
    const woken = new Set<string>();
    groups.forEach((group, i) => {
      if (results[i].some((o) => "ack" in o && !o.ack.duplicate)) woken.add(group.session);
      group.resolve(results[i]);
    });
    return woken;
  }

  /** Indexes one batch of admitted inputs when a whole one waits; whether one was indexed. */
  #indexBatch(): boolean {
    try {
      const behind = inputsNotIndexed(this.#store);
      if (behind === 0 || (behind < INDEX_BATCH && !this.#starting)) {
        this.#starting = false;
        return false;
      }
      faultPoint("admitted-before-index");
      return indexAdmittedInputs(this.#store, { limit: INDEX_BATCH }) > 0;
    } catch (error) {
      // Nothing is lost: the inputs stay behind the cursor, and the next search indexes them.
      this.#log.error("admission.index_failed", `cannot index admitted inputs: ${error}`);
      return false;
    }
  }

  #wake(sessions: Set<string>): void {
    try {
      this.#admitted(sessions);
    } catch (error) {
      // A wake that throws loses nothing: the inputs are durable and the next wake reads them.
      this.#log.error("admission.wake_failed", `cannot wake after admission: ${error}`);
    }
  }
}
