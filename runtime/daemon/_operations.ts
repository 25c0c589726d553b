/**
 * The operator commands the daemon runs for the lane socket (`status`, `reset`, `compact`, `repair`,
 * `drain`, `stop`, `resume`, `activate`, `cancel_cell`, `jobs`, `cancel_job`, `rollback`, `maintain`, `candidates`,
 * `trace`, `budget`, `context`, `frames`, `history_search`). None needs the model or a hook to succeed, so an operator can always repair a
 * session whose policy is broken and read why it broke: `rollback` and `activate` switch
 * releases, `candidates` and `trace` read the kept diagnostics, `budget` lifts a spent hour.
 * `maintain` only admits an input; the turn it starts is the model's.
 *
 * They live with the daemon, not in `runtime/operator/`: they act on the daemon's running
 * sessions, while `operator/` is the CLI client that must start without loading the daemon.
 *
 * @module
 */

import { listFailedCandidates } from "../../store/tables/behavior_diagnostics.ts";
import { appendEvent } from "../../store/tables/events.ts";
import { getSession, requireSession } from "../../store/tables/sessions.ts";
import { verifyRelease } from "../../store/maintenance/snapshot_hash.ts";
import type { Store } from "../../store/store.ts";
import { type ClientMessage, isKlbrError, KlbrError, type Logger } from "../core/mod.ts";
import type { Jobs } from "../jobs/mod.ts";
import { candidateView, readTraces, rollbackTarget } from "../behavior/mod.ts";
import type { AdmitOutcome } from "../lanes/mod.ts";
import type { Session } from "../session/mod.ts";
import { maintenanceInput, type PendingInput } from "./_admission.ts";
import {
  type ContextSource,
  readContext,
  readFrames,
  searchHistoryFor,
} from "./_operator_reads.ts";

/** An operator command from the lane protocol. */
export type OperatorMessage = Exclude<
  Extract<ClientMessage, { kind: `op.${string}` }>,
  // The lane server rotates the token itself; the daemon's commands never see it.
  { kind: "op.token_rotate" }
>;

/** What the commands need from the daemon. */
export interface OperationHost {
  store: Store;
  /** The running session. @throws {KlbrError} `not_found` when it is not running. */
  require(session: string): Session;
  status(only?: string): Record<string, unknown>;
  /** The daemon's timers and jobs. */
  jobs: Jobs;
  /** Admits inputs through the one admission path and wakes the session. */
  admit(session: string, inputs: PendingInput[]): AdmitOutcome[];
  /** Where each command that changes something gets its line. */
  log: Logger;
  /** What the context view of a running session is built from. */
  contextSource(session: string): ContextSource;
  /** Whether the daemon is shutting down (a signal's drain): only reads are answered then. */
  shuttingDown(): boolean;
}

/** Who sent a command: the connection's session and the client id its hello gave. */
export interface OperationSource {
  session: string;
  /** `cli` for the command line, `web-…` for the page, else what the client said. */
  client: string;
}

/** The commands that only read: they leave no line in the log (the page polls some). */
const READS = new Set([
  "op.status",
  "op.jobs",
  "op.candidates",
  "op.trace",
  "op.context",
  "op.frames",
  "op.history_search",
]);

/**
 * Runs one operator command against `message.session`, or the connection's session, and logs
 * each command that changes something (`operator.<op>` when done, `operator.refused` when
 * not) with who sent it: the command line, the page or another client. While the daemon shuts
 * down, a command that changes something is refused: it would cut the turn the drain lets
 * finish, or start what the shutdown has closed.
 *
 * @throws {KlbrError} `shutting_down` for a command that changes something while the daemon
 * shuts down; `not_found` for a session that is not running, and whatever the command refuses
 * (e.g. `epoch_moved`, `release_invalid` for `activate`).
 */
export async function runOperation(
  host: OperationHost,
  message: OperatorMessage,
  from: OperationSource,
): Promise<Record<string, unknown>> {
  if (isRead(message)) return await perform(host, message, from.session);
  const op = message.kind.slice("op.".length);
  const session = message.session ?? from.session;
  const fields = { op, session, client: from.client, by: clientKind(from.client) };
  try {
    if (host.shuttingDown()) {
      throw new KlbrError(
        "shutting_down",
        `cannot ${op} session ${session}: the daemon is shutting down; run it again after it restarts`,
        { status: 503 },
      );
    }
    const result = await perform(host, message, from.session);
    const said = typeof result.message === "string" ? `: ${result.message}` : "";
    host.log.info(`operator.${op}`, `${op} of session ${session} by ${who(from.client)}${said}`, {
      ...fields,
      ...("epoch" in result ? { epoch: result.epoch } : {}),
      ...("release_id" in result ? { release_id: result.release_id } : {}),
    });
    return result;
  } catch (error) {
    const code = isKlbrError(error) ? error.code : "internal";
    const reason = error instanceof Error ? error.message : String(error);
    host.log.warn(
      "operator.refused",
      `${op} of session ${session} by ${who(from.client)} refused: ${reason}`,
      { ...fields, code },
    );
    throw error;
  }
}

/** Whether `message` only reads: one of {@linkcode READS}, or `op.budget` lifting nothing. */
function isRead(message: OperatorMessage): boolean {
  if (message.kind === "op.budget") return !message.reset && message.raise === undefined;
  return READS.has(message.kind);
}

/** What kind of client an id names: the command line, the page, or another client. */
function clientKind(client: string): "cli" | "page" | "client" {
  return client === "cli" ? "cli" : client.startsWith("web-") ? "page" : "client";
}

function who(client: string): string {
  const kind = clientKind(client);
  return kind === "cli"
    ? "the command line"
    : kind === "page"
    ? `the page (${client})`
    : `client ${client}`;
}

/**
 * Refuses a session the store has never had, naming where the sessions are listed; the store's
 * own refusal speaks to a programmer (`call ensureSession first`) and the running sessions'
 * says `it is not running`, as if it could be started.
 *
 * @throws {KlbrError} `not_found`.
 */
function knownSession(host: OperationHost, session: string): void {
  if (getSession(host.store, session) !== undefined) return;
  throw new KlbrError(
    "not_found",
    `cannot use session ${session}: there is no such session; deno task klbr status lists the sessions (got ${session})`,
  );
}

/** Runs the command itself. */
async function perform(
  host: OperationHost,
  message: OperatorMessage,
  connectionSession: string,
): Promise<Record<string, unknown>> {
  const session = message.session ?? connectionSession;
  // Every command but status and activate leaves a durable note of what it did.
  const note = (result: Record<string, unknown>) => {
    appendEvent(host.store, session, "operator", { op: message.kind, ...result });
    return result;
  };
  // A session name the owner mistyped is said so, in words, before any command uses it.
  if (message.kind !== "op.status" && message.kind !== "op.cancel_job") knownSession(host, session);
  switch (message.kind) {
    case "op.status":
      return host.status(message.session);
    case "op.reset":
      return note(await reset(host.require(session), session));
    case "op.compact":
      return note(await compact(host.require(session)));
    case "op.repair":
      return note(await repair(host.require(session)));
    case "op.drain": {
      const parts = host.require(session);
      await parts.runtime.drain();
      await parts.kernel.shutdown();
      return note({ state: parts.runtime.state, message: "accepted work finished; stopped" });
    }
    case "op.stop": {
      const parts = host.require(session);
      await parts.runtime.stop("operator stop");
      return note({ state: parts.runtime.state, message: "stopped; resume takes work again" });
    }
    case "op.resume":
      return note(resume(host.require(session), session));
    case "op.activate": {
      const parts = host.require(session);
      const snapshot = await verifyRelease(message.release);
      const epoch = await parts.activate({
        releaseId: snapshot.id,
        expectedEpoch: message.epoch,
        reason: "operator activate",
      });
      return { epoch, release_id: snapshot.id };
    }
    case "op.jobs":
      host.require(session);
      return host.jobs.listing(session);
    case "op.cancel_cell":
      return note(cancelCell(host.require(session), message.cell));
    case "op.cancel_job":
      // The cancellation is recorded by the job's own `job.state` move, with its cause.
      return await host.jobs.cancelJob(message.job, message.session);
    case "op.rollback":
      return await rollback(host, session);
    case "op.maintain":
      return note(maintain(host, session, message.reason ?? "requested by the operator"));
    case "op.candidates":
      requireSession(host.store, session);
      return { candidates: listFailedCandidates(host.store, session).map(candidateView) };
    case "op.trace":
      requireSession(host.store, session);
      return readTraces(host.store, session, message.target);
    case "op.context":
      return { ...readContext(host.store, session, host.contextSource(session)) };
    case "op.frames":
      return readFrames(host.store, session, message.limit);
    case "op.history_search":
      return await searchHistoryFor(host.store, session, message);
    case "op.budget": {
      requireSession(host.store, session);
      const { reset, raise } = message;
      if (!reset && raise === undefined) return { budget: host.jobs.budget.status() };
      // The paused turns go on at once; the note says in the session what was lifted.
      host.jobs.budget.lift({ reset, raise });
      const done = [
        ...(reset ? ["the hourly windows start again now"] : []),
        ...(raise === undefined ? [] : [`the hourly request limit is ${raise} for this run`]),
      ];
      const noted = note({ reset: reset ?? false, raise: raise ?? null, message: done.join("; ") });
      return { ...noted, budget: host.jobs.budget.status() };
    }
  }
  throw new KlbrError("invalid_input", `cannot run ${(message as { kind: string }).kind}`);
}

/**
 * Replaces the kernel: the running turn stops, a new generation starts, and the session takes
 * work again (a stalled one too). A session the operator stopped stays stopped until `resume`.
 *
 * @throws {KlbrError} `invalid_input` while the session is draining or drained (its workbench
 * is, or is about to be, shut down: `resume` starts a new generation), its state unchanged.
 */
async function reset(parts: Session, session: string): Promise<Record<string, unknown>> {
  const was = parts.runtime.state;
  if (was === "draining" || was === "drained") {
    const why = was === "drained"
      ? "it is drained and its workbench is shut down"
      : "it is draining: its turn finishes, then its workbench shuts down";
    throw new KlbrError(
      "invalid_input",
      `cannot reset session ${session}: ${why}; klbr resume ${session} starts a new generation${
        was === "draining" ? " once it is drained" : ""
      } (got ${was})`,
    );
  }
  await parts.runtime.stop("operator reset");
  // A session stopped after a drain has its workbench shut down: the reset starts it again.
  parts.kernel.reopen();
  const generation = await parts.kernel.reset("operator reset");
  if (was === "running") parts.runtime.resume();
  return {
    generation: generation.generation,
    heap_restored: false,
    message: "a new kernel generation started; Python heap state was not restored" +
      (was === "running"
        ? ""
        : `; the session stays stopped: klbr resume ${session} takes work again`),
  };
}

/**
 * Takes work again after `stop` or `drain`: the kernel supervisor a drain shut down opens
 * again (its next use starts a new generation) and the loop takes the pending inputs.
 *
 * @throws {KlbrError} `invalid_input` while the session is still draining (its turn runs on).
 */
function resume(parts: Session, session: string): Record<string, unknown> {
  const was = parts.runtime.state;
  if (was === "draining") {
    throw new KlbrError(
      "invalid_input",
      `cannot resume session ${session}: its turn is still finishing; resume once it is drained (got ${was})`,
    );
  }
  if (was === "running") {
    return { state: was, resumed: false, message: "the session is running: nothing to resume" };
  }
  parts.kernel.reopen();
  parts.runtime.resume();
  return {
    state: parts.runtime.state,
    resumed: true,
    previous_state: was,
    message: `resumed after ${
      was === "drained" ? "a drain" : "a stop"
    }; pending inputs are taken up`,
  };
}

/** Returns the session to its last good release by the one activation path. */
async function rollback(host: OperationHost, session: string): Promise<Record<string, unknown>> {
  const parts = host.require(session);
  const { target, row } = rollbackTarget(host.store, session);
  const epoch = await parts.activate({
    releaseId: target,
    expectedEpoch: row.behaviorEpoch,
    reason: "operator rollback",
  });
  return { epoch, release_id: target, previous_release: row.activeRelease };
}

/**
 * Cancels one running cell of the session's turn: the worker's cancellation ladder ends it
 * `cancelled`, the model is told so, and the turn goes on.
 *
 * @throws {KlbrError} `not_found` when no cell of that id is running.
 */
function cancelCell(parts: Session, cell: string): Record<string, unknown> {
  parts.cancelCell(cell);
  return { cell, message: "the cell was asked to stop; its outcome says how it ended" };
}

/** Admits a maintenance input; the turn that consumes it loads the `maintenance` skill. */
function maintain(host: OperationHost, session: string, reason: string): Record<string, unknown> {
  host.require(session);
  const [outcome] = host.admit(session, [maintenanceInput(reason)]);
  if ("error" in outcome) throw outcome.error;
  return {
    input_id: outcome.ack.input_id,
    seq: outcome.ack.seq,
    message: "maintenance input admitted; the turn that takes it loads the maintenance skill",
  };
}

/**
 * Rewrites the context from the durable records (an extractive summary of every item): for a
 * session whose history a server refuses. Needs neither the model nor a hook.
 */
async function repair(parts: Session): Promise<Record<string, unknown>> {
  const done = await parts.repair("the operator ran klbr repair");
  return done === undefined
    ? { repaired: false, message: "nothing to repair: the context holds no item" }
    : {
      repaired: true,
      epoch: done.epoch,
      covers_to_idx: done.coversToIdx,
      message: `every item up to #${done.coversToIdx} is now a summary; history.read reaches them`,
    };
}

/** Extractive: it needs neither the model nor a hook. */
async function compact(parts: Session): Promise<Record<string, unknown>> {
  const done = await parts.compact();
  return done === undefined
    ? { compacted: false, message: "nothing to compact: the context is already short" }
    : {
      compacted: true,
      epoch: done.epoch,
      covers_to_idx: done.coversToIdx,
      summarized_items: done.summarizedItems,
    };
}
