/**
 * The daemon's single owner of sessions: the sessions map, and the routing of admission,
 * records, signals and operator commands to the session they name. Each session is a
 * `Session` (`runtime/session/`) with its workers (`_session_workers.ts`); recovery,
 * admission, record serving and the commands are modules of their own.
 *
 * @module
 */

import { DEFAULT_SESSION, ensureSession } from "../../store/tables/sessions.ts";
import {
  DEFAULT_CELL_TIMEOUT_MS,
  DEFAULT_DRAIN_GRACE_MS,
  EventBus,
  KlbrError,
} from "../core/mod.ts";
import type { BudgetConfig, CleanupConfig } from "../config/mod.ts";
import type { DiscordEffects, DiscordMessage } from "../discord/mod.ts";
import { Jobs, type UnattendedInput } from "../jobs/mod.ts";
import type { AdmitOutcome, InputMessage, LaneHost } from "../lanes/mod.ts";
import { recoverSession, Session } from "../session/mod.ts";
import { AdmissionQueue } from "./_admission_queue.ts";
import {
  admissionRefusal,
  admitBatch,
  admitUnattended,
  discordInput,
  localInput,
  maintenanceTimer,
  type PendingInput,
} from "./_admission.ts";
import { type OperationSource, type OperatorMessage, runOperation } from "./_operations.ts";
import { contextSourceOf } from "./_operator_reads.ts";
import { RecordServer } from "./_record_serving.ts";
import { sessionRpcs } from "./_session_rpc.ts";
import { DaemonWorkers, type SessionDeps } from "./_session_workers.ts";
import { runtimeStatus } from "./_status.ts";

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
export class Coordinator extends RecordServer implements LaneHost {
  readonly bus: EventBus = new EventBus();
  readonly version: string;
  readonly token: string;
  #o: CoordinatorOptions;
  #sessions = new Map<string, Session>();
  #admitting = true;
  #recovered: string | null;
  #jobs: Jobs;
  /** The one writer of local inputs: group commit across connections. */
  #queue: AdmissionQueue;

  /** Creates the coordinator; call {@linkcode start} per session. */
  constructor(options: CoordinatorOptions) {
    super(options.store);
    this.#o = options;
    this.version = options.version;
    this.token = options.token;
    this.#recovered = options.behavior.recovered;
    // Every commit that gives a session records wakes its lane clients: nothing wakes by hand.
    this.bus.follow(options.store);
    this.#queue = new AdmissionQueue(options.store, this.#afterCommit.bind(this), options.log);
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
    const running = new Session(session, deps, function workers(s: Session) {
      return new DaemonWorkers(deps, s, sessionRpcs({ ...deps, jobs }, s));
    });
    this.#sessions.set(session, running);
    // Jobs left running are interrupted and timers that fell due while down fire, as inputs.
    jobs.startSession(session);
    this.#scheduleMaintenance(session);
    running.start(resumed);
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
    const stateDir = this.#o.stateDir;
    return this.#queue.submit(
      session,
      inputs.map((input) => localInput(clientId, input, { stateDir })),
    );
  }

  /**
   * Admits one Discord message through the same path as local inputs; it commits and wakes
   * the session, and never waits for Python.
   */
  admitDiscord(session: string, message: DiscordMessage): AdmitOutcome {
    return this.#admit(session, [discordInput(message)])[0];
  }

  #admit(session: string, inputs: PendingInput[]): AdmitOutcome[] {
    const refused = this.#refusal(session);
    if (refused !== undefined) return inputs.map(() => ({ error: refused }));
    const outcomes = admitBatch(this.#o.store, session, inputs);
    if (outcomes.some((o) => "ack" in o && !o.ack.duplicate)) {
      this.#sessions.get(session)?.wake();
    }
    return outcomes;
  }

  /** After the acks of an admission commit were sent (the bus follows the store): the planners. */
  #afterCommit(sessions: Set<string>): void {
    for (const session of sessions) this.#sessions.get(session)?.wake();
  }

  /** Why `session` admits nothing now, or `undefined` when it does. */
  #refusal(session: string): KlbrError | undefined {
    const running = this.#sessions.has(session);
    return admissionRefusal(this.#o.store, { session, admitting: this.#admitting, running });
  }

  /**
   * Admits a fired timer or a finished job (`admitUnattended`); `false`, writing nothing, while
   * admission is closed, the session is not running or the input is refused.
   */
  #admitUnattended(session: string, input: UnattendedInput, within: (id: string) => void) {
    const running = this.#sessions.get(session);
    if (!this.#admitting || running === undefined) return false;
    if (!admitUnattended(this.#o, session, { input, within })) return false;
    running.wake();
    return true;
  }

  /** Runs one operator command; none needs the model or a hook. */
  operate(message: OperatorMessage, from: OperationSource): Promise<Record<string, unknown>> {
    return runOperation(
      {
        store: this.#o.store,
        require: (session) => this.#require(session),
        status: (only) => this.status(only),
        jobs: this.#jobs,
        admit: (session, inputs) => this.#admit(session, inputs),
        log: this.#o.log,
        contextSource: (session) => contextSourceOf(this.#o, this.#require(session)),
        shuttingDown: () => !this.#admitting,
      },
      message,
      from,
    );
  }

  /** Whether the daemon is shutting down: admission is closed and so is `op.token_rotate`. */
  shuttingDown(): boolean {
    return !this.#admitting;
  }

  /** The runtime's state, for `status` and `/health` (`_status.ts`). */
  status(only?: string): Record<string, unknown> {
    return runtimeStatus({ store: this.#o.store, jobs: this.#jobs, sessions: this.#sessions }, {
      only,
      version: this.version,
      admitting: this.#admitting,
      recovered: this.#recovered,
    });
  }

  /**
   * Stops admission and every operator command that changes something, records why
   * (`reason`, e.g. the signal) in each session, lets accepted turns finish within `graceMs`
   * (then stops them, so their cells end `killed` with the outcome recorded), and kills every
   * workbench group.
   */
  async shutdown(graceMs = DEFAULT_DRAIN_GRACE_MS, reason = "daemon shutdown"): Promise<void> {
    this.#admitting = false;
    // Jobs still running are reported `interrupted` at the next start, never resumed.
    await this.#jobs.shutdown();
    for (const running of this.#sessions.values()) await running.shutdown(graceMs, reason);
  }

  /** Keeps the next scheduled maintenance turn armed as a durable timer, when one is due. */
  #scheduleMaintenance(session: string): void {
    const every = this.#o.maintenanceIntervalMs;
    if (every === null || every === undefined) return;
    this.#jobs.ensureTimer(session, maintenanceTimer(this.#o.store.clock(), every));
  }

  #require(session: string): Session {
    const parts = this.#sessions.get(session);
    if (parts === undefined) {
      throw new KlbrError("not_found", `cannot use session ${session}: it is not running`);
    }
    return parts;
  }
}
