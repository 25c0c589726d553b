/**
 * The daemon's single owner of sessions: the sessions map, and the routing of admission,
 * records, signals and operator commands to the session they name. Each session's parts are
 * built by `_session_parts.ts`; recovery, admission, record serving and the commands are
 * modules of their own.
 *
 * @module
 */

import { appendEvent } from "../../store/events.ts";
import { DEFAULT_SESSION, ensureSession, requireSession } from "../../store/sessions.ts";
import {
  DEFAULT_CELL_TIMEOUT_MS,
  DEFAULT_DRAIN_GRACE_MS,
  EventBus,
  KlbrError,
  type LaneRecord,
} from "../core/mod.ts";
import type { BudgetConfig, CleanupConfig } from "../config/mod.ts";
import type { DiscordEffects, DiscordMessage } from "../discord/mod.ts";
import { Jobs, type UnattendedInput } from "../jobs/mod.ts";
import type { AdmitOutcome, InputMessage, LaneHost, StoredRecord } from "../lanes/mod.ts";
import { recoverSession } from "../session/mod.ts";
import { activateBehavior, type Activation } from "./_activation.ts";
import { AdmissionQueue, type AdmissionStats } from "./_admission_queue.ts";
import {
  admitBatch,
  discordInput,
  localInput,
  maintenanceTimer,
  type PendingInput,
} from "./_admission.ts";
import { type OperationSource, type OperatorMessage, runOperation } from "./_operations.ts";
import { headSeq, recordsAfter, storedRecordsAfter } from "./_record_serving.ts";
import { createSessionParts, type SessionDeps, type SessionParts } from "./_session_parts.ts";
import { sessionRpcs } from "./_session_rpc.ts";

/** Options for {@linkcode Coordinator}: what every session is built from, and the daemon's. */
export interface CoordinatorOptions extends Omit<SessionDeps, "bus"> {
  token: string;
  version: string;
  /** The Discord transport, when the configuration has a `discord` node. */
  discord?: DiscordEffects;
  /** The budgets of unattended work and the cleanup policy (`budget`, `cleanup` nodes). */
  budget: BudgetConfig;
  cleanup: CleanupConfig;
  /** How often a scheduled maintenance turn runs; none when null or absent. */
  maintenanceIntervalMs?: number | null;
}

/**
 * Owns every session of the daemon.
 *
 * @example
 * ```ts
 * const coordinator = new Coordinator(options);
 * coordinator.start("default");
 * ```
 */
export class Coordinator implements LaneHost {
  readonly bus: EventBus = new EventBus();
  readonly version: string;
  readonly token: string;
  #o: CoordinatorOptions;
  #sessions = new Map<string, SessionParts>();
  #admitting = true;
  #recovered: string | null;
  #jobs: Jobs;
  /** The one writer of local inputs: group commit across connections. */
  #queue: AdmissionQueue;

  /** Creates the coordinator; call {@linkcode start} per session. */
  constructor(options: CoordinatorOptions) {
    this.#o = options;
    this.version = options.version;
    this.token = options.token;
    this.#recovered = options.behavior.recovered;
    // After the acks of a commit were sent: the record fan-out, then the planners.
    this.#queue = new AdmissionQueue(options.store, (sessions) => {
      for (const session of sessions) {
        this.bus.wake(session);
        this.#sessions.get(session)?.runtime.wake();
      }
    }, options.log);
    this.#jobs = new Jobs({
      ...options,
      bus: this.bus,
      cellTimeoutMs: options.cellTimeoutMs ?? DEFAULT_CELL_TIMEOUT_MS,
      admit: (session, input, within) => this.#admitUnattended(session, input, within),
      maintenanceSession: DEFAULT_SESSION,
    });
  }

  /**
   * Recovers a session after a restart (without any hook) and starts its loop, continuing
   * the turns a dead owner left after they had effects.
   */
  start(session: string): void {
    const { store, log } = this.#o;
    ensureSession(store, session);
    const resumed = recoverSession(store, session, { log });
    const jobs = this.#jobs;
    const deps = {
      ...this.#o,
      bus: this.bus,
      afterMaintenanceTurn: () => this.#scheduleMaintenance(session),
      meter: jobs.meter.bind(jobs),
      runSlot: jobs.processSlot.bind(jobs),
      artifactBytes: jobs.budget.artifactBytes,
    };
    const parts = createSessionParts(deps, session, (parts) =>
      sessionRpcs({
        ...deps,
        jobs,
        activate: (releaseId, expectedEpoch, reason) =>
          this.#activate(session, parts, { releaseId, expectedEpoch, reason }),
      }, { session, parts }));
    this.#sessions.set(session, parts);
    // Jobs left running are interrupted and timers that fell due while down fire, as inputs.
    jobs.startSession(session);
    this.#scheduleMaintenance(session);
    this.bus.wake(session);
    parts.runtime.resumeFrames(resumed);
  }

  // ---- LaneHost ------------------------------------------------------------------------

  /** The last sequence number of a session. */
  headSeq(session: string): number {
    return headSeq(this.#o.store, session);
  }

  /** Durable records after `since`. */
  readRecords(session: string, since: number, limit: number): LaneRecord[] {
    return recordsAfter(this.#o.store, session, since, limit);
  }

  /** Durable records after `since`, bodies as stored JSON text. */
  readStoredRecords(session: string, since: number, limit: number): StoredRecord[] {
    return storedRecordsAfter(this.#o.store, session, since, limit);
  }

  /** Subscribes to a session's signals. */
  subscribe(session: string, listener: Parameters<EventBus["subscribe"]>[1]): () => void {
    return this.bus.subscribe(session, listener);
  }

  /**
   * Admits local inputs through the group commit: they share one transaction with whatever
   * else is queued (from any connection), and the promise resolves right after that commit, so
   * every ack follows the commit that holds its input. The session's wake and the record
   * fan-out come one event-loop turn later, after the acks are sent. A refused input (bad
   * field) is rolled back alone; a commit that fails rejects, admitting none of them.
   */
  admitMany(session: string, clientId: string, inputs: InputMessage[]): Promise<AdmitOutcome[]> {
    const refused = this.#refusal(session);
    if (refused !== undefined) return Promise.resolve(inputs.map(() => ({ error: refused })));
    return this.#queue.submit(session, inputs.map((input) => localInput(clientId, input)));
  }

  /** What admission has committed so far: commits, inputs, the largest commit. */
  get admission(): AdmissionStats {
    return this.#queue.stats;
  }

  /**
   * Admits one Discord message through the same path as local inputs; it commits and wakes
   * the session, and never waits for Python.
   *
   * @example
   * ```ts
   * coordinator.admitDiscord("default", { channelId: "1", messageId: "2", authorId: "3",
   *   username: "ann", content: "hi", receivedAt: Date.now() });
   * ```
   */
  admitDiscord(session: string, message: DiscordMessage): AdmitOutcome {
    return this.#admit(session, [discordInput(message)])[0];
  }

  #admit(session: string, inputs: PendingInput[]): AdmitOutcome[] {
    const refused = this.#refusal(session);
    if (refused !== undefined) return inputs.map(() => ({ error: refused }));
    const outcomes = admitBatch(this.#o.store, session, inputs);
    this.bus.wake(session);
    if (outcomes.some((o) => "ack" in o && !o.ack.duplicate)) {
      this.#sessions.get(session)?.runtime.wake();
    }
    return outcomes;
  }

  /** Why `session` admits nothing now, or `undefined` when it does. */
  #refusal(session: string): KlbrError | undefined {
    if (!this.#admitting) {
      return new KlbrError("shutting_down", "cannot admit input: the daemon is shutting down", {
        status: 503,
      });
    }
    if (!this.#sessions.has(session)) {
      return new KlbrError("not_found", `cannot admit input: session ${session} is not running`);
    }
    // A damaged store admits nothing more: what it would commit could not be trusted.
    const store = this.#o.store.health();
    if (store.state === "corrupt") {
      return new KlbrError(
        "store_corrupt",
        `cannot admit input: the store reported a damaged file at ${
          new Date(store.since!).toISOString()
        }; stop the daemon and restore a backup (got ${store.error})`,
        { status: 503 },
      );
    }
    return undefined;
  }

  /**
   * Admits a fired timer or a finished job through the same path as every input; `within` runs
   * in the admission's transaction. Returns `false`, writing nothing, while admission is closed,
   * the session is not running or the input is refused; the caller keeps it for later.
   */
  #admitUnattended(
    session: string,
    input: UnattendedInput,
    within: (inputId: string) => void,
  ): boolean {
    const parts = this.#sessions.get(session);
    if (!this.#admitting || parts === undefined) return false;
    let admitted = false;
    try {
      admitBatch(this.#o.store, session, [() => input], ([outcome]) => {
        if ("error" in outcome) throw outcome.error;
        within(outcome.ack.input_id);
        admitted = true;
      });
    } catch (error) {
      this.#o.log.error("admission.refused", `cannot admit ${input.dedupeKey}: ${error}`, {
        dedupe_key: input.dedupeKey,
      });
      return false;
    }
    this.bus.wake(session);
    parts.runtime.wake();
    return admitted;
  }

  /** Runs one operator command; none needs the model or a hook. */
  operate(message: OperatorMessage, from: OperationSource): Promise<Record<string, unknown>> {
    return runOperation(
      {
        store: this.#o.store,
        bus: this.bus,
        require: (session) => this.#require(session),
        status: (only) => this.status(only),
        activate: (session, parts, activation) => this.#activate(session, parts, activation),
        jobs: this.#jobs,
        admit: (session, inputs) => this.#admit(session, inputs),
        log: this.#o.log,
      },
      message,
      from,
    );
  }

  /** The runtime's state, for `status` and `/health`. */
  status(only?: string): Record<string, unknown> {
    const sessions: Record<string, unknown> = {};
    for (const [id, parts] of this.#sessions) {
      if (only !== undefined && id !== only) continue;
      const row = requireSession(this.#o.store, id);
      sessions[id] = {
        ...parts.runtime.status(),
        head_seq: row.nextSeq - 1,
        behavior_epoch: row.behaviorEpoch,
        active_release: row.activeRelease,
        last_good_release: row.lastGoodRelease,
        kernel_generation: parts.kernel.generation,
        hook_calls: parts.hookCalls,
        kernel_alive: parts.kernel.current !== null,
        ...this.#jobs.status(id),
        // What each live process role loaded (null when it is not running).
        fingerprints: {
          workbench: parts.kernel.fingerprint,
          hooks: parts.hooks.fingerprint,
          jobs: this.#jobs.fingerprints(id),
        },
      };
    }
    if (only !== undefined && !(only in sessions)) {
      throw new KlbrError("not_found", `cannot show status: no session ${only} (got ${only})`);
    }
    return {
      version: this.version,
      admitting: this.#admitting && this.#o.store.health().state !== "corrupt",
      admission: this.#queue.stats,
      store_commits: this.#o.store.health().commits,
      store_commit_ms: Math.round(this.#o.store.health().commitMs),
      recovered_release: this.#recovered,
      budget: this.#jobs.budget.status(),
      sessions,
    };
  }

  /**
   * Stops admission, records why (`reason`, e.g. the signal) in each session, lets accepted
   * turns finish within `graceMs` (then stops them, so their cells end `killed` with the
   * outcome recorded), and kills every workbench group.
   */
  async shutdown(graceMs = DEFAULT_DRAIN_GRACE_MS, reason = "daemon shutdown"): Promise<void> {
    this.#admitting = false;
    // Jobs still running are reported `interrupted` at the next start, never resumed.
    await this.#jobs.shutdown();
    for (const [session, parts] of this.#sessions) {
      try {
        appendEvent(this.#o.store, session, "daemon.stopping", { reason, grace_ms: graceMs });
        this.bus.wake(session);
      } catch (error) {
        this.#o.log.error("daemon.record_failed", `cannot record the shutdown: ${error}`);
      }
      const drained = parts.runtime.drain();
      const timer = setTimeout(() => void parts.runtime.stop(reason), graceMs);
      await drained;
      clearTimeout(timer);
      parts.runtime.dispose();
      await parts.kernel.shutdown();
      await parts.hooks.shutdown();
    }
  }

  /** Keeps the next scheduled maintenance turn armed as a durable timer, when one is due. */
  #scheduleMaintenance(session: string): void {
    const every = this.#o.maintenanceIntervalMs;
    if (every === null || every === undefined) return;
    this.#jobs.ensureTimer(session, maintenanceTimer(this.#o.store.clock(), every));
  }

  #activate(session: string, parts: SessionParts, activation: Activation): Promise<number> {
    return activateBehavior({ store: this.#o.store, bus: this.bus }, session, parts, activation);
  }

  #require(session: string): SessionParts {
    const parts = this.#sessions.get(session);
    if (parts === undefined) {
      throw new KlbrError("not_found", `cannot use session ${session}: it is not running`);
    }
    return parts;
  }
}
