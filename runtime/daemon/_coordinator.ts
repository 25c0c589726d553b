/**
 * The daemon's single owner of sessions: one store, one {@linkcode SessionRuntime} and one
 * kernel per active session, admission, the lane host and the operator commands.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { appendEvent, readEvents } from "../../store/events.ts";
import { type AdmitInput, admitInput } from "../../store/inputs.ts";
import { discordDedupeKey, localDedupeKey } from "../../store/dedupe_keys.ts";
import { recoverOutbox } from "../../store/outbox.ts";
import { compactContext } from "../../store/context_summaries.ts";
import { readArtifact } from "../../store/artifacts.ts";
import { closeDanglingToolCalls } from "../../store/provider_items.ts";
import { frameHasCells, interruptOpenCells } from "../../store/cells.ts";
import { adoptFrame, finishFrame, type FrameRecord, openFrames } from "../../store/frames.ts";
import { activateRelease, getRelease, markLastGood } from "../../store/releases.ts";
import { currentGeneration, startGeneration } from "../../store/kernel_generations.ts";
import { ensureSession, getSession, requireSession } from "../../store/sessions.ts";
import { verifyRelease } from "../../store/snapshot_hash.ts";
import type { Store } from "../../store/store.ts";
import type { BehaviorState } from "../behavior/mod.ts";
import { KlbrError } from "../core/mod.ts";
import { behaviorHandlers } from "../behavior/mod.ts";
import { discordHandlers } from "../discord/mod.ts";
import type { DiscordMessage } from "../discord/mod.ts";
import { checkHookResult, routedConversations } from "../behavior/mod.ts";
import { newId } from "../core/mod.ts";
import { EventBus } from "../core/mod.ts";
import type { AdmitOutcome, InputMessage, LaneHost } from "../lanes/mod.ts";
import { createModelTurn } from "../session/mod.ts";
import type { Provider } from "../model/mod.ts";
import type { ClientMessage, LaneRecord } from "../core/mod.ts";
import { SendParams } from "../core/mod.ts";
import { type HookCaller, SessionRuntime } from "../session/mod.ts";
import type { SkillRoots } from "../kernel/mod.ts";
import { KernelSupervisor } from "../kernel/mod.ts";
import type { Logger } from "../core/mod.ts";

/** Options for {@linkcode Coordinator}. */
export interface CoordinatorOptions {
  store: Store;
  token: string;
  version: string;
  python: string;
  repoRoot: string;
  workspace: string;
  skillRoots: SkillRoots;
  provider: (route: string) => Provider;
  behavior: BehaviorState;
  log: Logger;
  /** How long one cell may run before it is ended `timed_out`. @default {600_000} */
  cellTimeoutMs?: number;
  /** The Discord sender, when the configuration has a `discord` node. */
  discord?: { channels: readonly string[]; wake(): void };
}

interface SessionParts {
  runtime: SessionRuntime;
  kernel: KernelSupervisor;
  hooks: KernelSupervisor;
  behavior: { releaseId: string; path: string };
  /** The frame whose turn is running, for routing `local.send`. */
  frame: { id: string; routing: unknown } | null;
  /** Hook calls that failed (or broke their contract) since the count was last read. */
  hookFailures: number;
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
  readonly owner: string = `daemon-${Deno.pid}-${Date.now()}`;
  #o: CoordinatorOptions;
  #sessions = new Map<string, SessionParts>();
  #admitting = true;
  #recovered: string | null;

  /** Creates the coordinator; call {@linkcode start} per session. */
  constructor(options: CoordinatorOptions) {
    this.#o = options;
    this.version = options.version;
    this.token = options.token;
    this.#recovered = options.behavior.recovered;
  }

  /**
   * Recovers a session after a restart and starts its loop.
   *
   * Open frames of the dead owner are abandoned and their inputs offered again; cells left
   * without an outcome are recorded `interrupted`; every tool call gets a result.
   */
  start(session: string): void {
    const { store } = this.#o;
    ensureSession(store, session);
    // We hold the owner lock, so every open frame belongs to a dead owner. A turn that had
    // not run a cell gives its inputs back; one that had is continued, so it can finish (and
    // speak) without repeating what it did.
    const abandoned: string[] = [];
    const resumed: FrameRecord[] = [];
    for (const frame of openFrames(store, session)) {
      if (frameHasCells(store, frame.id)) {
        adoptFrame(store, frame.id, { leaseOwner: this.owner, leaseMs: LEASE_MS });
        resumed.push(frame);
      } else {
        finishFrame(
          store,
          frame.id,
          "abandoned",
          "the daemon restarted before the turn had effects",
        );
        abandoned.push(frame.id);
      }
    }
    const interrupted = interruptOpenCells(store, session, "the daemon restarted while it ran");
    const closed = closeDanglingToolCalls(store, session, "the daemon restarted");
    // Nobody knows whether a send that was in flight reached Discord: say so, never resend.
    const unknownSends = recoverOutbox(store, session);
    if (unknownSends.length) {
      this.#o.log.warn(
        "outbox.unknown",
        `outbox: ${unknownSends.length} send(s) now unknown; they are never resent`,
        { count: unknownSends.length },
      );
    }
    if (abandoned.length || resumed.length || interrupted.length || closed.length) {
      appendEvent(store, session, "recovery", {
        abandoned_frames: abandoned,
        resumed_frames: resumed.map((frame) => frame.id),
        interrupted_cells: interrupted,
        closed_tool_calls: closed,
      });
    }
    const parts = {} as SessionParts;
    parts.behavior = { releaseId: this.#o.behavior.releaseId, path: this.#o.behavior.path };
    parts.frame = null;
    parts.hookFailures = 0;
    // The workbench and the hook worker run the same package from the same release.
    const common = {
      python: this.#o.python,
      session,
      workspace: this.#o.workspace,
      repoRoot: this.#o.repoRoot,
      skillRoots: this.#o.skillRoots,
      behavior: () => ({ revision: parts.behavior.releaseId, path: parts.behavior.path }),
    };
    parts.kernel = new KernelSupervisor({
      ...common,
      firstGeneration: (currentGeneration(store, session)?.generation ?? 0) + 1,
      recordGeneration: (record) => {
        startGeneration(store, {
          session,
          reason: record.reason,
          skillsRevision: record.skillsRevision,
          behaviorRevision: record.behaviorRevision,
        });
        this.bus.wake(session);
      },
      rpc: {
        "local.send": (params, ctx) =>
          Promise.resolve(this.#send(session, parts, params, ctx.cell)),
        "artifact.read": async (params) => {
          const p = params as { id?: unknown; offset?: unknown; length?: unknown };
          const { data, bytes } = await readArtifact(store.stateDir, String(p.id), {
            offset: typeof p.offset === "number" ? p.offset : undefined,
            length: typeof p.length === "number" ? p.length : undefined,
          });
          return { data_b64: Buffer.from(data).toString("base64"), bytes };
        },
        ...discordHandlers({
          store,
          session,
          discord: this.#o.discord,
          frame: () => parts.frame,
          notify: () => this.bus.wake(session),
        }),
        ...behaviorHandlers({
          store,
          session,
          python: this.#o.python,
          repoRoot: this.#o.repoRoot,
          workspace: this.#o.workspace,
          activate: (releaseId, epoch, reason) =>
            this.#activate(session, parts, releaseId, epoch, reason),
        }),
      },
    });
    parts.hooks = new KernelSupervisor({
      ...common,
      recordGeneration: (record) =>
        this.#o.log.info(
          "hooks.generation",
          `hook worker generation ${record.generation} (${record.reason})`,
          { generation: record.generation, reason: record.reason },
        ),
    });
    const hooks = (): HookCaller => ({
      revision: parts.behavior.releaseId,
      call: async (name, args, options) => {
        try {
          return checkHookResult(name, await parts.hooks.hook(name, args, options));
        } catch (error) {
          parts.hookFailures++;
          throw error;
        }
      },
    });
    const modelTurn = createModelTurn({
      store,
      bus: this.bus,
      provider: this.#o.provider,
      hooks,
      log: this.#o.log,
      system: () => systemMessage(this.#o.workspace),
      cellTimeoutMs: this.#o.cellTimeoutMs,
      kernel: {
        generation: async () => {
          await parts.kernel.ready();
          return parts.kernel.generation;
        },
        execute: (cellId, code, options) => parts.kernel.execute(cellId, code, options),
      },
    });
    parts.runtime = new SessionRuntime({
      store,
      bus: this.bus,
      session,
      owner: this.owner,
      leaseMs: LEASE_MS,
      hooks,
      log: this.#o.log,
      turn: async (ctx) => {
        parts.frame = { id: ctx.frame.id, routing: ctx.frame.routing };
        parts.hookFailures = 0;
        try {
          const end = await modelTurn(ctx);
          // A release that ran a whole turn with every hook answering is a good one to go
          // back to.
          const row = requireSession(store, session);
          if (
            parts.hookFailures === 0 && row.activeRelease === ctx.frame.policyRevision &&
            row.lastGoodRelease !== row.activeRelease
          ) {
            markLastGood(store, session, row.activeRelease);
            this.bus.wake(session);
          }
          return end;
        } finally {
          parts.frame = null;
        }
      },
    });
    this.#sessions.set(session, parts);
    this.bus.wake(session);
    parts.runtime.resumeFrames(resumed);
  }

  // ---- LaneHost ------------------------------------------------------------------------

  /** The last sequence number of a session. */
  headSeq(session: string): number {
    const row = getSession(this.#o.store, session);
    return row === undefined ? 0 : row.nextSeq - 1;
  }

  /** Durable records after `since`. */
  readRecords(session: string, since: number, limit: number): LaneRecord[] {
    if (getSession(this.#o.store, session) === undefined) return [];
    return readEvents(this.#o.store, session, { since, limit }).map((event) => ({
      kind: "record",
      session,
      seq: event.seq,
      at: event.at,
      type: event.kind,
      data: (event.body ?? {}) as Record<string, unknown>,
    }));
  }

  /** Subscribes to a session's signals. */
  subscribe(session: string, listener: Parameters<EventBus["subscribe"]>[1]): () => void {
    return this.bus.subscribe(session, listener);
  }

  /**
   * Admits local inputs in one transaction, then wakes the session: every ack follows the
   * commit that holds its input. A refused input (bad field) is rolled back alone.
   */
  admitMany(session: string, clientId: string, inputs: InputMessage[]): AdmitOutcome[] {
    return this.#admit(
      session,
      inputs.map((input) => () => ({
        sourceKind: "local",
        dedupeKey: localDedupeKey(clientId, input.client_msg_id),
        conversationId: input.conversation,
        author: input.author,
        body: input.text,
      })),
    );
  }

  /**
   * Admits one Discord message through the same path as local inputs: source `discord`,
   * dedupe key `discord:<channel>:<message>` (a redelivered message is one input),
   * conversation `discord:<channel>`. It commits and wakes the session; it never waits for
   * Python.
   *
   * @example
   * ```ts
   * coordinator.admitDiscord("default", { channelId: "1", messageId: "2", authorId: "3",
   *   username: "ann", content: "hi", receivedAt: Date.now() });
   * ```
   */
  admitDiscord(session: string, message: DiscordMessage): AdmitOutcome {
    return this.#admit(session, [() => ({
      sourceKind: "discord",
      dedupeKey: discordDedupeKey(message.channelId, message.messageId),
      conversationId: `discord:${message.channelId}`,
      author: `discord:${message.authorId}:${message.username}`,
      body: message.content,
      receivedAt: message.receivedAt,
    })])[0];
  }

  /**
   * The one admission path: every input in one transaction (each in its own savepoint, so a
   * refused one rolls back alone), then one wake. Each entry builds its input lazily, so a
   * bad field (e.g. a dedupe key part) refuses that input only.
   */
  #admit(session: string, inputs: (() => Omit<AdmitInput, "session">)[]): AdmitOutcome[] {
    const refuse = (error: KlbrError) => inputs.map(() => ({ error }));
    if (!this.#admitting) {
      return refuse(
        new KlbrError("shutting_down", "cannot admit input: the daemon is shutting down", {
          status: 503,
        }),
      );
    }
    const parts = this.#sessions.get(session);
    if (parts === undefined) {
      return refuse(
        new KlbrError("not_found", `cannot admit input: session ${session} is not running`),
      );
    }
    const outcomes = this.#o.store.transaction(() =>
      inputs.map((input): AdmitOutcome => {
        try {
          const result = admitInput(this.#o.store, { session, ...input() });
          return {
            ack: { input_id: result.inputId, seq: result.seq, duplicate: result.duplicate },
          };
        } catch (error) {
          if (error instanceof KlbrError) return { error };
          throw error;
        }
      })
    );
    this.bus.wake(session);
    if (outcomes.some((o) => "ack" in o && !o.ack.duplicate)) parts.runtime.wake();
    return outcomes;
  }

  /** Logs a refused authorisation. */
  logRefusal(reason: string): void {
    this.#o.log.warn("lane.refused", `refused operator access: ${reason}`);
  }

  /** Runs one operator command; none needs the model or a hook. */
  async operate(
    message: Extract<ClientMessage, { kind: `op.${string}` }>,
    connectionSession: string,
  ): Promise<Record<string, unknown>> {
    const session = message.session ?? connectionSession;
    const { store } = this.#o;
    const note = (result: Record<string, unknown>) => {
      appendEvent(store, session, "operator", { op: message.kind, ...result });
      this.bus.wake(session);
      return result;
    };
    switch (message.kind) {
      case "op.status":
        return this.status(message.session);
      case "op.reset": {
        const parts = this.#require(session);
        await parts.runtime.stop("operator reset");
        const generation = await parts.kernel.reset("operator reset");
        parts.runtime.resume();
        return note({
          generation: generation.generation,
          heap_restored: false,
          message: "a new kernel generation started; Python heap state was not restored",
        });
      }
      case "op.compact": {
        this.#require(session);
        // Extractive: it needs neither the model nor a hook.
        const done = compactContext(store, session, { keepItems: 20 });
        return note(
          done === undefined
            ? { compacted: false, message: "nothing to compact: the context is already short" }
            : {
              compacted: true,
              epoch: done.epoch,
              covers_to_idx: done.coversToIdx,
              summarized_items: done.summarizedItems,
            },
        );
      }
      case "op.drain": {
        const parts = this.#require(session);
        await parts.runtime.drain();
        await parts.kernel.shutdown();
        return note({ state: parts.runtime.state, message: "accepted work finished; stopped" });
      }
      case "op.stop": {
        const parts = this.#require(session);
        await parts.runtime.stop("operator stop");
        return note({ state: parts.runtime.state, message: "stopped; reset resumes" });
      }
      case "op.activate": {
        const parts = this.#require(session);
        const snapshot = await verifyRelease(message.release);
        const epoch = await this.#activate(
          session,
          parts,
          snapshot.id,
          message.epoch,
          "operator activate",
        );
        return { epoch, release_id: snapshot.id };
      }
    }
    throw new KlbrError("invalid_input", `cannot run ${(message as { kind: string }).kind}`);
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
        kernel_alive: parts.kernel.current !== null,
      };
    }
    if (only !== undefined && !(only in sessions)) {
      throw new KlbrError("not_found", `cannot show status: no session ${only} (got ${only})`);
    }
    return {
      version: this.version,
      admitting: this.#admitting,
      recovered_release: this.#recovered,
      sessions,
    };
  }

  /**
   * Stops admission, lets accepted turns finish within `graceMs` (then stops them, so their
   * cells end `killed` with the outcome recorded), and kills every workbench group.
   */
  async shutdown(graceMs = 10_000): Promise<void> {
    this.#admitting = false;
    for (const parts of this.#sessions.values()) {
      const drained = parts.runtime.drain();
      const timer = setTimeout(() => void parts.runtime.stop("daemon shutdown"), graceMs);
      await drained;
      clearTimeout(timer);
      parts.runtime.dispose();
      await parts.kernel.shutdown();
      await parts.hooks.shutdown();
    }
  }

  /**
   * The one activation path: verify, compare-and-swap the epoch, switch the hook worker.
   *
   * A running cell stays pinned to the release it started with; the workbench heap is kept.
   * @throws {KlbrError} `not_found` for a release never published, `release_invalid` when it
   * no longer verifies, `epoch_moved` when the epoch is not `expectedEpoch`.
   */
  async #activate(
    session: string,
    parts: SessionParts,
    releaseId: string,
    expectedEpoch: number,
    reason: string,
  ): Promise<number> {
    const { store } = this.#o;
    const release = getRelease(store, releaseId);
    if (release === undefined) {
      throw new KlbrError(
        "not_found",
        `cannot activate release ${
          releaseId.slice(0, 12)
        }: it was never published (got ${releaseId})`,
      );
    }
    await verifyRelease(release.path);
    const { epoch } = activateRelease(store, { session, expectedEpoch, releaseId, reason });
    parts.behavior = { releaseId, path: release.path };
    await parts.hooks.reset("behaviour activated");
    this.bus.wake(session);
    // Inputs a broken hook left pending get a fresh try under the new release.
    parts.runtime.wake();
    return epoch;
  }

  #require(session: string): SessionParts {
    const parts = this.#sessions.get(session);
    if (parts === undefined) {
      throw new KlbrError("not_found", `cannot use session ${session}: it is not running`);
    }
    return parts;
  }

  #send(
    session: string,
    parts: SessionParts,
    params: Record<string, unknown>,
    cell: string | null,
  ): { send_id: string; seq: number } {
    const parsed = SendParams.safeParse(params);
    if (!parsed.success) {
      throw new KlbrError("invalid_input", "cannot send: text must be a non-empty string");
    }
    // local.send speaks to the local conversation the turn answers, never to a remote one.
    const conversation = routedConversations(parts.frame?.routing)
      .find((c) => c.startsWith("local:")) ?? "local:default";
    const sendId = newId("send");
    // A local send is a durable publication: committed before the cell hears it succeeded.
    const seq = appendEvent(this.#o.store, session, "send", {
      send_id: sendId,
      text: parsed.data.text,
      conversation,
      frame_id: parts.frame?.id ?? null,
      cell_id: cell,
      state: "delivered",
    });
    this.bus.wake(session);
    return { send_id: sendId, seq };
  }
}

/** How long a turn's frame lease lasts without renewal. */
const LEASE_MS = 30_000;

function systemMessage(workspace: string): string {
  return [
    "You are the klbr agent. You act only through the `python` tool: each call runs one cell",
    "in your persistent workbench (top-level await works; the heap survives between cells).",
    "Your plain text is a private scratchpad that no person sees.",
    "Speak only with `await local.send(text)`: one call is one message to the conversation.",
    "Inputs from Discord (conversation `discord:<channel id>`) are answered with",
    "`await discord.send(text)`; help(discord) explains its delivery states.",
    "When you have nothing more to do, call `wait()` in a cell: it ends the cell and the turn,",
    "and you are woken by the next input.",
    `Workspace: ${workspace}. open_file, ls, search, delete and run are bound in every cell;`,
    "`import klbr.skills as skills; dir(skills)` lists your skills, help(skills.<id>) reads one.",
    "`behavior` edits your own policy hooks (help(behavior); the maintenance skill explains it).",
  ].join("\n");
}
