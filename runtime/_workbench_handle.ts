/**
 * The live handle on one workbench process: frame I/O, request/reply correlation, the
 * cancellation ladder, host RPC dispatch, and the end of the process (shutdown, kill,
 * failure). {@linkcode spawnWorkbench} in `workbench.ts` builds it.
 *
 * @module
 */

import { z } from "zod";
import { encodeFrame, FrameDecoderStream } from "./frame_codec.ts";
import { KlbrError, type KlbrErrorCode } from "./errors.ts";
import { newId } from "./ids.ts";
import {
  CellReply,
  describeIssues,
  type HookName,
  type HostFrame,
  type HostRequest,
  parseWorkerFrame,
  type SkillsPayload,
  type WorkerFrame,
} from "./protocol.ts";
import { killProcessGroup, processGroupAlive } from "./process_group.ts";
import {
  ByteRing,
  type CellResult,
  deferred,
  hostEndedResult,
  settlesWithin,
  StreamText,
} from "./_workbench_parts.ts";

/** Context an RPC handler gets besides the params. */
export interface RpcContext {
  /** Aborted by `rpc_cancel`, by the end of the parent request, or by the worker's end. */
  signal: AbortSignal;
  /** The RPC method. */
  method: string;
  /** The id of the request (an `execute` or `hook`) the call runs under. */
  parent: string;
  /** The cell id, when the parent is an `execute`. */
  cell: string | null;
}

/** One host-owned effect a cell may ask for; throw a `KlbrError` to answer `rpc_error`. */
export type RpcHandler = (params: Record<string, unknown>, ctx: RpcContext) => Promise<unknown>;

/** How a workbench process ended. */
export interface WorkbenchExit {
  /** `shutdown` (asked), `killed` (the host killed it) or `failed` (framing, exit, no ping). */
  reason: "shutdown" | "killed" | "failed";
  /** The code of the failure (`frame_json`, `worker_timeout`, `worker_failed`, …), else null. */
  code: KlbrErrorCode | null;
  /** Says what happened, naming the cause. */
  message: string;
  /** The process's exit code, or null when a signal ended it or it could not be reaped. */
  exitCode: number | null;
  /** The signal that ended it, or null. */
  signal: string | null;
  /** The end of the worker's stderr, for diagnostics. */
  stderrTail: string;
}

/** The settings a handle runs with (validated and defaulted in `workbench.ts`). */
export interface HandleSettings {
  maxFrameBytes: number;
  cancelGraceMs: number;
  pingTimeoutMs: number;
  initTimeoutMs: number;
  exitGraceMs: number;
  rpc: Record<string, RpcHandler>;
  onExit?: (exit: WorkbenchExit) => void;
}

/** The `ok.result` of `init`. */
export const InitReply = z.object({
  pid: z.number().int(),
  python: z.string(),
  prelude: z.array(z.string()),
}).passthrough();
/** What a worker reports after `init`. */
export type InitReply = z.infer<typeof InitReply>;

/** The `init` fields the caller supplies. */
export type InitPayload = {
  generation: number;
  session: string;
  workspace: string;
  skills: SkillsPayload;
  behavior: { revision: string; path: string } | null;
};

/** Options of {@linkcode WorkbenchHandle.execute}. */
export interface ExecuteOptions {
  /** After this long the ladder runs: `cancel`, then a kill. Outcome `timed_out` or `killed`. */
  timeoutMs?: number;
  /** Aborting runs the ladder. Outcome `cancelled` or `killed`. */
  signal?: AbortSignal;
  /** Live output; lossy animation, the result carries the whole capture. */
  onStream?: (name: "stdout" | "stderr", text: string) => void;
}

const STREAM_CAP = 1024 * 1024;
const STDERR_RING = 64 * 1024;

type Pending = {
  id: string;
  kind: HostRequest["kind"];
  cell: string | null;
  started: number;
  done: ReturnType<typeof deferred<unknown>>;
  settled: boolean;
  /** Why the host asked it to stop (`cancel`/`timeout`), once the ladder started. */
  stopping: "cancel" | "timeout" | null;
  ladder: Promise<void> | null;
  onStream?: ExecuteOptions["onStream"];
  out: StreamText;
  err: StreamText;
  rpcs: Set<string>;
};

/** Marks a request ended by a deliberate kill; `execute` turns it into a `killed` result. */
class Killed {
  constructor(readonly message: string) {}
}

/** A running workbench process. Create it with `spawnWorkbench`. */
export class WorkbenchHandle {
  /** The worker's pid, which is also its process group id. */
  readonly pid: number;
  /** Resolves once, when the process has ended and its group is dead. */
  readonly exited: Promise<WorkbenchExit>;

  readonly #child: Deno.ChildProcess;
  readonly #settings: HandleSettings;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #stderr = new ByteRing(STDERR_RING);
  readonly #pending = new Map<string, Pending>();
  readonly #rpcs = new Map<string, AbortController>();
  readonly #exit = deferred<WorkbenchExit>();
  readonly #stderrReader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #stderrDone: Promise<void>;
  #writes: Promise<void> = Promise.resolve();
  #state: "running" | "closing" | "dead" = "running";
  #status: Deno.CommandStatus | null = null;
  #lastWord: string | null = null;
  #ending: { reason: WorkbenchExit["reason"]; message: string } | null = null;

  /** Wraps a spawned child; starts reading its frames and stderr. */
  constructor(child: Deno.ChildProcess, settings: HandleSettings) {
    this.#child = child;
    this.pid = child.pid;
    this.#settings = settings;
    this.#writer = child.stdin.getWriter();
    this.exited = this.#exit.promise;
    this.#stderrReader = child.stderr.getReader();
    this.#stderrDone = this.#readStderr();
    this.#readFrames();
    child.status.then((status) => this.#onStatus(status));
  }

  /** Whether the handle still accepts requests. */
  get alive(): boolean {
    return this.#state === "running";
  }

  /** Why the handle ended, as soon as it has started ending; null while it is alive. */
  get ending(): { reason: WorkbenchExit["reason"]; message: string } | null {
    return this.#ending;
  }

  /** The last bytes the worker wrote to stderr, decoded. */
  stderrTail(): string {
    return this.#stderr.text();
  }

  /**
   * Sends `init` and returns the worker's `{pid, python, prelude}`.
   * @throws {KlbrError} `worker_failed` when the worker refuses, fails or does not answer.
   */
  async init(payload: InitPayload): Promise<InitReply> {
    const id = newId("request");
    const result = await this.#request({ kind: "init", id, ...payload }, {
      deadlineMs: this.#settings.initTimeoutMs,
    });
    const parsed = InitReply.safeParse(result);
    if (!parsed.success) {
      throw this.#protocolViolation(`init reply ${describeIssues(parsed.error)}`);
    }
    return parsed.data;
  }

  /**
   * Runs one cell and returns its result; never rejects for what the cell does.
   * @throws {KlbrError} `worker_failed` (the cause names the framing failure or exit) when
   * the worker dies other than by the host's kill; `frame_oversize` when the code is too big.
   */
  async execute(cell: string, code: string, options: ExecuteOptions = {}): Promise<CellResult> {
    const id = newId("request");
    const started = performance.now();
    const pending = this.#register({ kind: "execute", id, cell, code }, cell, options.onStream);
    const timer = options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => void this.#ladder(id, "timeout"), options.timeoutMs);
    const onAbort = () => void this.#ladder(id, "cancel");
    options.signal?.addEventListener("abort", onAbort, { once: true });
    if (options.signal?.aborted) onAbort();
    let raw: unknown;
    try {
      raw = await pending.done.promise;
    } catch (error) {
      if (!(error instanceof Killed)) throw error;
      return hostEndedResult(
        pending.stopping === "timeout" ? "timed_out" : "killed",
        error.message,
        pending.out.text(),
        pending.err.text(),
        performance.now() - started,
      );
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    }
    const reply = CellReply.safeParse(raw);
    if (!reply.success) {
      throw this.#protocolViolation(`execute reply ${describeIssues(reply.error)}`);
    }
    const outcome = reply.data.outcome === "cancelled" && pending.stopping === "timeout"
      ? "timed_out"
      : reply.data.outcome;
    return { ...reply.data, outcome };
  }

  /**
   * Runs the cancellation ladder on a running `execute` or `hook`, found by request id or
   * cell id: a `cancel` frame, then, without a reply within the grace, a kill of the group.
   * Resolves when the target has ended; `false` when nothing by that id was running.
   */
  async cancel(target: string): Promise<boolean> {
    const pending = this.#pending.get(target) ??
      [...this.#pending.values()].find((p) => p.cell === target && p.kind === "execute");
    if (!pending || (pending.kind !== "execute" && pending.kind !== "hook")) return false;
    await this.#ladder(pending.id, "cancel");
    return true;
  }

  /**
   * Runs a policy hook and returns its JSON value.
   * @throws {KlbrError} `hook_failed` when the hook raised; `worker_timeout` when it did not
   * answer within `timeoutMs` (the ladder ran); `worker_failed` when the worker died.
   */
  async hook(
    name: HookName,
    args: Record<string, unknown>,
    options: { timeoutMs?: number } = {},
  ): Promise<unknown> {
    const id = newId("request");
    const pending = this.#register({ kind: "hook", id, name, args }, null);
    const timer = options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => void this.#ladder(id, "timeout"), options.timeoutMs);
    try {
      return await pending.done.promise;
    } catch (error) {
      if (pending.stopping === "timeout") {
        throw new KlbrError(
          "worker_timeout",
          `cannot run hook ${name}: no reply within ${options.timeoutMs} ms (got pid ${this.pid})`,
          { cause: error },
        );
      }
      if (error instanceof Killed) throw this.#deadError("hook", error.message);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Checks the worker answers; one that does not within the deadline is declared dead.
   * @throws {KlbrError} `worker_failed` with a `worker_timeout` cause after the deadline.
   */
  async ping(options: { timeoutMs?: number } = {}): Promise<void> {
    await this.#request({ kind: "ping", id: newId("request") }, {
      deadlineMs: options.timeoutMs ?? this.#settings.pingTimeoutMs,
    });
  }

  /**
   * Asks the worker to exit; kills its group if it has not exited within the grace.
   * Resolves with how it ended. Pending cells end `killed`.
   */
  async shutdown(): Promise<WorkbenchExit> {
    if (this.#state !== "running") return await this.exited;
    const request = this.#request({ kind: "shutdown", id: newId("request") }, {});
    this.#state = "closing";
    await settlesWithin(request, this.#settings.exitGraceMs);
    if (!(await settlesWithin(this.#child.status, this.#settings.exitGraceMs))) {
      return await this.#end("killed", null, "shutdown: no exit within the grace, killed");
    }
    return await this.#end("shutdown", null, "shut down on request");
  }

  /** Kills the worker's process group; running cells end `killed` with `reason`. */
  kill(reason: string): Promise<WorkbenchExit> {
    return this.#end("killed", null, reason);
  }

  // -------------------------------------------------------------------------------------

  #register(
    frame: HostRequest,
    cell: string | null,
    onStream?: ExecuteOptions["onStream"],
  ): Pending {
    if (this.#state !== "running") throw this.#deadError(frame.kind, "the worker has ended");
    const bytes = encodeFrame(frame, this.#settings.maxFrameBytes);
    const pending: Pending = {
      id: frame.id,
      kind: frame.kind,
      cell,
      started: performance.now(),
      done: deferred<unknown>(),
      settled: false,
      stopping: null,
      ladder: null,
      onStream,
      out: new StreamText(STREAM_CAP),
      err: new StreamText(STREAM_CAP),
      rpcs: new Set(),
    };
    pending.done.promise.catch(() => {});
    this.#pending.set(frame.id, pending);
    this.#send(bytes);
    return pending;
  }

  /** Sends a request; a `deadlineMs` without reply declares the worker dead. */
  async #request(frame: HostRequest, opts: { deadlineMs?: number }): Promise<unknown> {
    const pending = this.#register(frame, null);
    if (opts.deadlineMs !== undefined) {
      const ms = opts.deadlineMs;
      settlesWithin(pending.done.promise, ms).then((settled) => {
        if (settled) return;
        this.#fail(
          new KlbrError(
            "worker_timeout",
            `cannot ${frame.kind} workbench: no reply within ${ms} ms (got pid ${this.pid})`,
          ),
        );
      });
    }
    try {
      return await pending.done.promise;
    } catch (error) {
      if (error instanceof Killed) throw this.#deadError(frame.kind, error.message);
      throw error;
    }
  }

  #send(bytes: Uint8Array): void {
    this.#writes = this.#writes.then(() => this.#writer.write(bytes)).catch((cause) => {
      this.#fail(
        new KlbrError("worker_failed", `cannot write to workbench: ${String(cause)}`, { cause }),
      );
    });
  }

  #sendFrame(frame: HostFrame): void {
    if (this.#state === "dead") return;
    try {
      this.#send(encodeFrame(frame, this.#settings.maxFrameBytes));
    } catch (error) {
      // An RPC result too large for a frame becomes an error the cell can read.
      if (frame.kind === "rpc_ok" && error instanceof KlbrError) {
        this.#sendFrame({
          kind: "rpc_error",
          id: frame.id,
          code: error.code,
          message: error.message,
        });
      }
    }
  }

  #settle(pending: Pending, how: { value?: unknown; error?: unknown }): void {
    if (pending.settled) return;
    pending.settled = true;
    this.#pending.delete(pending.id);
    for (const rpc of pending.rpcs) this.#rpcs.get(rpc)?.abort();
    if ("error" in how) pending.done.reject(how.error);
    else pending.done.resolve(how.value);
  }

  #ladder(id: string, why: "cancel" | "timeout"): Promise<void> {
    const pending = this.#pending.get(id);
    if (!pending || pending.settled || this.#state === "dead") return Promise.resolve();
    if (pending.ladder) return pending.ladder;
    pending.stopping = why;
    const grace = this.#settings.cancelGraceMs;
    pending.ladder = (async () => {
      try {
        this.#register({ kind: "cancel", id: newId("request"), target: id }, null);
      } catch {
        // The worker has ended; the target settles with it.
      }
      if (await settlesWithin(pending.done.promise, grace)) return;
      await this.#end(
        "killed",
        null,
        `${why === "timeout" ? "timed out" : "cancelled"}: no reply to cancel within ${grace} ms`,
      );
    })();
    return pending.ladder;
  }

  async #readFrames(): Promise<void> {
    const frames = this.#child.stdout.pipeThrough(
      new FrameDecoderStream({ maxFrameBytes: this.#settings.maxFrameBytes }),
    );
    try {
      // Ends at the worker's end of file or at the first bad frame.
      for await (const value of frames) {
        if (this.#state === "dead") break;
        this.#dispatch(parseWorkerFrame(value));
      }
    } catch (error) {
      const cause = error instanceof KlbrError
        ? error
        : new KlbrError("worker_failed", `cannot read workbench frames: ${String(error)}`, {
          cause: error,
        });
      await this.#fail(cause);
      return;
    }
    if (this.#state === "dead") return;
    const exited = await settlesWithin(this.#child.status, this.#settings.exitGraceMs);
    if (this.#state === "closing") return;
    const how = exited && this.#status
      ? `exited with ${this.#describeStatus(this.#status)}`
      : "closed its frame channel";
    const said = this.#lastWord === null ? "" : ` after reporting ${this.#lastWord}`;
    await this.#fail(
      new KlbrError("worker_failed", `cannot use workbench: the worker ${how}${said}`),
    );
  }

  async #readStderr(): Promise<void> {
    try {
      // Ends at end of file; a dead handle cancels the reader after the grace.
      while (true) {
        const { done, value } = await this.#stderrReader.read();
        if (done) return;
        this.#stderr.push(value);
      }
    } catch {
      // Cancelled: the tail so far stands.
    }
  }

  #onStatus(status: Deno.CommandStatus): void {
    this.#status = status;
    if (this.#state !== "running") return;
    // Frames written before the exit are still read; give the reader the grace to finish.
    settlesWithin(this.exited, this.#settings.exitGraceMs).then((ended) => {
      if (ended) return;
      this.#fail(
        new KlbrError(
          "worker_failed",
          `cannot use workbench: the worker exited with ${this.#describeStatus(status)}`,
        ),
      );
    });
  }

  #dispatch(frame: WorkerFrame): void {
    switch (frame.kind) {
      case "ok":
      case "error": {
        const pending = this.#pending.get(frame.id);
        if (!pending) {
          // An error without a request is the worker's last word before it exits.
          if (frame.kind === "error" && frame.id === "") {
            this.#lastWord = `${frame.code}: ${frame.message}`.slice(0, 2000);
          }
          return; // otherwise a late reply to a request already ended
        }
        if (frame.kind === "ok") this.#settle(pending, { value: frame.result });
        else this.#settle(pending, { error: this.#replyError(pending, frame) });
        return;
      }
      case "stream": {
        const pending = this.#pending.get(frame.id);
        if (!pending || pending.kind !== "execute") return;
        (frame.name === "stdout" ? pending.out : pending.err).add(frame.text);
        try {
          pending.onStream?.(frame.name, frame.text);
        } catch {
          // Live output is lossy; a failing listener must not end the cell.
        }
        return;
      }
      case "rpc":
        this.#onRpc(frame);
        return;
      case "rpc_cancel":
        this.#rpcs.get(frame.id)?.abort();
        return;
    }
  }

  #replyError(pending: Pending, frame: Extract<WorkerFrame, { kind: "error" }>): KlbrError {
    const detail = `${frame.code}: ${frame.message}`;
    if (pending.kind === "hook") {
      return new KlbrError("hook_failed", `cannot run hook: ${detail}`, { cause: frame });
    }
    if (pending.kind === "execute") {
      return new KlbrError("cell_failed", `cannot execute cell ${pending.cell}: ${detail}`, {
        cause: frame,
      });
    }
    return new KlbrError("worker_failed", `cannot ${pending.kind} workbench: ${detail}`, {
      cause: frame,
    });
  }

  #onRpc(frame: Extract<WorkerFrame, { kind: "rpc" }>): void {
    const reply = (code: string, message: string) =>
      this.#sendFrame({ kind: "rpc_error", id: frame.id, code, message });
    const parent = this.#pending.get(frame.parent);
    if (!parent || (parent.kind !== "execute" && parent.kind !== "hook")) {
      return reply(
        "invalid_input",
        `cannot call ${frame.method}: its cell is no longer running (got parent ${frame.parent})`,
      );
    }
    if (this.#rpcs.has(frame.id)) {
      return reply("invalid_input", `cannot call ${frame.method}: rpc id in use (got ${frame.id})`);
    }
    const handler = Object.hasOwn(this.#settings.rpc, frame.method)
      ? this.#settings.rpc[frame.method]
      : undefined;
    if (!handler) {
      return reply(
        "not_found",
        `cannot call rpc: unknown method (got ${JSON.stringify(frame.method)})`,
      );
    }
    const controller = new AbortController();
    this.#rpcs.set(frame.id, controller);
    parent.rpcs.add(frame.id);
    const ctx = {
      signal: controller.signal,
      method: frame.method,
      parent: parent.id,
      cell: parent.cell,
    };
    Promise.resolve()
      .then(() => handler(frame.params, ctx))
      .then(
        (result) => {
          if (!controller.signal.aborted) {
            this.#sendFrame({ kind: "rpc_ok", id: frame.id, result: result ?? null });
          }
        },
        (error) => {
          if (controller.signal.aborted) return;
          if (error instanceof KlbrError) reply(error.code, error.message);
          else reply("internal", `cannot call ${frame.method}: the host failed internally`);
        },
      )
      .finally(() => {
        this.#rpcs.delete(frame.id);
        parent.rpcs.delete(frame.id);
      });
  }

  #protocolViolation(what: string): KlbrError {
    const cause = new KlbrError("frame_invalid", `cannot accept worker frame: ${what}`);
    this.#fail(cause);
    return this.#deadError("use", cause.message, cause);
  }

  #deadError(action: string, why: string, cause?: unknown): KlbrError {
    return new KlbrError("worker_failed", `cannot ${action} workbench ${this.pid}: ${why}`, {
      cause,
    });
  }

  #describeStatus(status: Deno.CommandStatus): string {
    return status.signal ? `signal ${status.signal}` : `code ${status.code}`;
  }

  #fail(cause: KlbrError): Promise<WorkbenchExit> {
    return this.#end("failed", cause, cause.message);
  }

  /** Ends the handle once: settles every request, aborts RPCs, kills the group, reaps. */
  async #end(
    reason: WorkbenchExit["reason"],
    cause: KlbrError | null,
    message: string,
  ): Promise<WorkbenchExit> {
    if (this.#state === "dead") return await this.exited;
    this.#state = "dead";
    this.#ending = { reason, message };
    for (const pending of [...this.#pending.values()]) {
      const error = cause ? this.#deadError(pending.kind, cause.message, cause) : new Killed(
        `the workbench was ${reason === "shutdown" ? "shut down" : "killed"}: ${message}`,
      );
      this.#settle(pending, { error });
    }
    for (const controller of this.#rpcs.values()) controller.abort();
    await killProcessGroup(this.pid).catch(() => {});
    await settlesWithin(this.#child.status, this.#settings.exitGraceMs);
    // Children a cell started stay in the group after the leader; none may outlive it.
    if (processGroupAlive(this.pid)) await killProcessGroup(this.pid).catch(() => {});
    this.#writer.close().catch(() => {});
    if (!(await settlesWithin(this.#stderrDone, this.#settings.exitGraceMs))) {
      this.#stderrReader.cancel().catch(() => {});
    }
    const exit: WorkbenchExit = {
      reason,
      code: cause?.code ?? null,
      message,
      exitCode: this.#status && this.#status.signal === null ? this.#status.code : null,
      signal: this.#status?.signal ?? null,
      stderrTail: this.#stderr.text(),
    };
    this.#exit.resolve(exit);
    try {
      this.#settings.onExit?.(exit);
    } catch {
      // A failing listener must not keep the handle from ending.
    }
    return exit;
  }
}
