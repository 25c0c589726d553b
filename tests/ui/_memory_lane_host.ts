/**
 * An in-memory {@linkcode LaneHost} and a real HTTP server around it, for UI tests that need
 * exact control over which records exist and when (reconnects, replays, rendering) without a
 * model or a workbench. The protocol code is the daemon's own: `createApp` and
 * `LaneConnection` serve the page and the socket.
 *
 * @module
 */

import {
  type ClientMessage,
  KlbrError,
  type LaneRecord,
  type LaneSignal,
  SILENT_LOGGER,
} from "../../runtime/core/mod.ts";
import {
  type AdmitOutcome,
  type AppFetch,
  createApp,
  type LaneHost,
  listenApp,
  OperatorAuth,
} from "../../runtime/lanes/mod.ts";

/** A 64-hex-character token for the in-memory host. */
export const TEST_TOKEN = "ab".repeat(32);

type InputMessage = Extract<ClientMessage, { kind: "input" }>;
type OpMessage = Extract<ClientMessage, { kind: `op.${string}` }>;

/** A lane host whose records live in an array. */
export class MemoryLaneHost implements LaneHost {
  readonly version = "test";
  /** Every record of every session, per session in seq order. */
  readonly sessions = new Map<string, LaneRecord[]>();
  /** Every `admit` call, duplicates included. */
  readonly admits: { clientId: string; input: InputMessage }[] = [];
  /** Every operator command run. */
  readonly operations: OpMessage[] = [];
  /** The `since` of every store read, in order: shows where each connection resumed. */
  readonly reads: number[] = [];
  /** Operator kinds that never get an answer (to test a drop while one is pending). */
  readonly holdOps = new Set<string>();
  /** The epoch `op.activate` compares against. */
  epoch = 3;
  activeRelease = "rel_a1b2c3d4e5f6a7b8c9d0";
  /** What `op.status` says of a session's loop and its pending inputs; `running` and 0 unless set. */
  readonly loops = new Map<string, { state: string; pending_inputs: number }>();
  #listeners = new Map<string, Set<(signal: LaneSignal) => void>>();
  #admitted = new Map<string, { input_id: string; seq: number }>();

  #log(session: string): LaneRecord[] {
    let log = this.sessions.get(session);
    if (log === undefined) {
      log = [];
      this.sessions.set(session, log);
    }
    return log;
  }

  /**
   * The operator commands of `kind` received so far, once there is at least one: the page may
   * show a command as sent (an optimistic "Cancelling…") before its frame reaches the host.
   *
   * @throws {Error} when none arrives within `timeoutMs`.
   */
  async operationsOf(kind: OpMessage["kind"], timeoutMs = 5_000): Promise<OpMessage[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.operations.filter((o) => o.kind === kind);
      if (found.length > 0) return found;
      if (Date.now() > deadline) throw new Error(`no ${kind} reached the host in ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /** Appends one record and wakes the session's connections; returns it. */
  append(type: string, data: Record<string, unknown>, session = "default"): LaneRecord {
    const log = this.#log(session);
    const record: LaneRecord = {
      kind: "record",
      session,
      seq: log.length + 1,
      at: Date.now(),
      type,
      data,
    };
    log.push(record);
    this.emit({ kind: "wake" }, session);
    return record;
  }

  /** Pushes a live signal (a wake, a token or cell output) to a session's connections. */
  emit(signal: LaneSignal, session = "default"): void {
    for (const listener of [...(this.#listeners.get(session) ?? [])]) listener(signal);
  }

  /** The number of live subscriptions of a session (one per said-hello socket). */
  subscribers(session = "default"): number {
    return this.#listeners.get(session)?.size ?? 0;
  }

  headSeq(session: string): number {
    return this.#log(session).length;
  }

  readRecords(session: string, since: number, limit: number): LaneRecord[] {
    this.reads.push(since);
    return this.#log(session).slice(since, since + limit);
  }

  subscribe(session: string, listener: (signal: LaneSignal) => void): () => void {
    let set = this.#listeners.get(session);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(session, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }

  admitMany(session: string, clientId: string, inputs: InputMessage[]): AdmitOutcome[] {
    return inputs.map((input) => ({ ack: this.admit(session, clientId, input) }));
  }

  admit(
    session: string,
    clientId: string,
    input: InputMessage,
  ): { input_id: string; seq: number; duplicate: boolean } {
    this.admits.push({ clientId, input });
    const key = `local:${clientId}:${input.client_msg_id}`;
    const known = this.#admitted.get(key);
    if (known !== undefined) return { ...known, duplicate: true };
    const inputId = `in_${String(this.admits.length).padStart(26, "0")}`;
    const record = this.append("input.admitted", {
      input_id: inputId,
      source_kind: "local",
      dedupe_key: key,
      conversation_id: input.conversation,
      author: input.author,
      received_at: Date.now(),
      body: input.text,
      client_msg_id: input.client_msg_id,
    }, session);
    this.#admitted.set(key, { input_id: inputId, seq: record.seq });
    return { input_id: inputId, seq: record.seq, duplicate: false };
  }

  operate(message: OpMessage, from: { session: string }): Promise<Record<string, unknown>> {
    const { session } = from;
    this.operations.push(message);
    if (this.holdOps.has(message.kind)) return new Promise(() => {});
    if (message.kind === "op.status") {
      // The daemon's shape (`StatusResult` in runtime/core), which the page parses.
      return Promise.resolve(memoryStatus(session, {
        head: this.headSeq(session),
        epoch: this.epoch,
        release: this.activeRelease,
        loop: this.loops.get(session) ?? { state: "running", pending_inputs: 0 },
      }));
    }
    if (message.kind === "op.activate") {
      if (message.epoch !== this.epoch) {
        return Promise.reject(
          new KlbrError(
            "epoch_moved",
            `cannot activate release ${message.release}: epoch moved (expected ${message.epoch}, found ${this.epoch})`,
          ),
        );
      }
      this.epoch++;
      const previous = this.activeRelease ?? null;
      this.activeRelease = message.release;
      this.append("activation", {
        epoch: this.epoch,
        release_id: message.release,
        previous_release: previous,
        reason: "operator",
      }, session);
      return Promise.resolve({ epoch: this.epoch, release: message.release });
    }
    this.append("operator", { op: message.kind, session }, session);
    return Promise.resolve({ ok: true, op: message.kind });
  }
}

/** A running test server. */
export interface LaneServer {
  readonly url: string;
  readonly port: number;
  /** The page's address with the token in its fragment, as `klbr url` prints it. */
  readonly pageUrl: string;
  /** A `Cookie` header with a valid session, as `POST /auth` would have set it. */
  cookie(): string;
  /** Stops listening and drops every socket, like a killed daemon. */
  stop(): Promise<void>;
}

/** Options for {@linkcode startLaneServer}. */
export interface LaneServerOptions {
  uiDir: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Lets a connection without credentials watch, read-only. @default {false} */
  viewWithoutToken?: boolean;
  /** What `/health` says about the sandbox. @default confined */
  sandbox?: { sandbox: string; sandbox_reason: string | null; sandbox_network: boolean };
  /** More of `/health`, read on each request (e.g. `status`, `model`). */
  health?: () => Record<string, unknown>;
  /** Spooled outputs `/artifacts/<id>` serves, by id. */
  artifacts?: Map<string, string>;
}

/**
 * Serves the built UI, `/auth`, `/health` and `/v2` for `host` on 127.0.0.1, with the
 * daemon's own `createApp` (Host and Origin checks, the session cookie).
 *
 * @throws {Error} when the port cannot be bound.
 */
export async function startLaneServer(
  host: MemoryLaneHost,
  options: LaneServerOptions,
): Promise<LaneServer> {
  const auth = new OperatorAuth({
    stateDir: "/nonexistent",
    token: TEST_TOKEN,
    sessionKey: "5e".repeat(32),
    viewWithoutToken: options.viewWithoutToken,
  });
  const address = { host: "127.0.0.1", port: options.port ?? 0 };
  const sandbox = options.sandbox ??
    { sandbox: "bwrap", sandbox_reason: null, sandbox_network: false };
  const app = createApp({
    lanes: host,
    auth,
    address: () => address,
    health: () => ({ ok: true, ...sandbox, ...options.health?.() }),
    artifacts: (id, range) => {
      const text = options.artifacts?.get(id);
      if (text === undefined) {
        return Promise.reject(new KlbrError("not_found", `cannot read artifact ${id}: none`));
      }
      const bytes = new TextEncoder().encode(text);
      const offset = range.offset ?? 0;
      const data = bytes.subarray(offset, offset + (range.length ?? bytes.length));
      return Promise.resolve({ data, bytes: bytes.length });
    },
    uiDir: options.uiDir,
    log: SILENT_LOGGER,
  });
  const listening = await listenApp(app.fetch as AppFetch, {
    hostname: "127.0.0.1",
    port: options.port ?? 0,
    maxSilent: 256,
    silentMs: 3_000,
  });
  const port = listening.port;
  address.port = port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pageUrl: `http://127.0.0.1:${port}/#token=${TEST_TOKEN}`,
    cookie: () => auth.issueCookie(port).split(";")[0],
    stop: async () => void await listening.close(0),
  };
}

/** An `op.status` answer of the daemon's shape for one session, in the state `at.loop` gives. */
function memoryStatus(
  session: string,
  at: {
    head: number;
    epoch: number;
    release: string;
    loop: { state: string; pending_inputs: number };
  },
): Record<string, unknown> {
  const used = { used: 0, limit: 100 };
  return {
    version: "test",
    admitting: true,
    recovered_release: null,
    budget: {
      over_budget: [],
      model_requests_hour: { ...used, configured: 100 },
      tokens_hour: used,
      child_share_percent: 50,
      child_requests_hour: used,
      child_tokens_hour: used,
      window_reset_at: null,
      jobs: { running: 0, limit: 4, waiting: 0 },
      processes: { in_use: 0, limit: 4, waiting: 0 },
    },
    sessions: {
      [session]: {
        ...at.loop,
        oldest_pending_age_ms: null,
        waiting_inputs: 0,
        waiting_threshold_ms: 300_000,
        waiting: [],
        consecutive_failures: 0,
        stalled: false,
        last_hook_failure: null,
        current_frame: null,
        head_seq: at.head,
        behavior_epoch: at.epoch,
        active_release: at.release,
        last_good_release: at.release,
        kernel_generation: 1,
        kernel_alive: true,
        hook_calls: 0,
        routes_adapted: [],
        running_jobs: 0,
        pending_jobs: 0,
        pending_timers: 0,
        due_timers: 0,
      },
    },
  };
}
