/**
 * The live handle on one workbench process: request/reply correlation, the cancellation
 * ladder and the one end of the process (shutdown, kill or failure). What it does with each
 * frame the worker writes is `_worker_frames.ts`. `spawnWorkbench` builds it.
 *
 * @module
 */

import {
  type BehaviorRef,
  CellReply,
  describeIssues,
  DraftTestReply,
  type HookName,
  type HostRequest,
  KlbrError,
  newId,
  settlesWithin,
  type WorkerFrame,
} from "../core/mod.ts";
import { type CellResult, deferred, hostEndedResult } from "./_parts.ts";
import { Killed, type Pending, PendingRequests } from "./_pending.ts";
import { WorkerChannel } from "./_channel.ts";
import { FingerprintReply, type WorkerFingerprint } from "./_fingerprint.ts";
import { RpcDispatcher } from "./_rpc.ts";
import { LIMIT_POLL_MS, watchLimits } from "../sandbox/mod.ts";
import { routeWorkerFrame, sendRpcReply } from "./_worker_frames.ts";
import {
  type ExecuteOptions,
  type HandleSettings,
  type HookOptions,
  type InitPayload,
  InitReply,
  type WorkbenchExit,
} from "./_types.ts";

/** A running workbench process. Create it with `spawnWorkbench`. */
export class WorkbenchHandle {
  /** The worker's pid, which is also its process group id. */
  readonly pid: number;
  /** Resolves once, when the process has ended and its group is dead. */
  readonly exited: Promise<WorkbenchExit>;

  readonly #settings: HandleSettings;
  readonly #channel: WorkerChannel;
  readonly #rpc: RpcDispatcher;
  readonly #pending = new PendingRequests();
  readonly #exit = deferred<WorkbenchExit>();
  #state: "running" | "closing" | "dead" = "running";
  #ending: { reason: WorkbenchExit["reason"]; message: string } | null = null;

  /** Wraps a spawned child; starts reading its frames and stderr. */
  constructor(child: Deno.ChildProcess, settings: HandleSettings) {
    this.pid = child.pid;
    this.#settings = settings;
    this.exited = this.#exit.promise;
    this.#rpc = new RpcDispatcher(settings.rpc, {
      role: settings.role,
      log: settings.log,
      reply: (frame) => {
        if (this.#state !== "dead") sendRpcReply(this.#channel, frame);
      },
    });
    this.#channel = new WorkerChannel(
      child,
      { maxFrameBytes: settings.maxFrameBytes, graceMs: settings.exitGraceMs },
      { frame: (frame) => this.#dispatch(frame), broken: (cause) => void this.#fail(cause) },
    );
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
    return this.#channel.stderrTail();
  }

  /**
   * Sends `init` and returns the worker's `{pid, python, prelude}`.
   * @throws {KlbrError} `worker_failed` when the worker refuses, fails or does not answer.
   */
  async init(payload: InitPayload): Promise<InitReply> {
    const frame = { kind: "init" as const, id: newId("request"), ...payload };
    const result = await this.#request(frame, this.#settings.initTimeoutMs);
    const parsed = InitReply.safeParse(result);
    if (!parsed.success) {
      throw this.#protocolViolation(`init reply ${describeIssues(parsed.error)}`);
    }
    return parsed.data;
  }

  /**
   * Runs one cell and returns its result; never rejects for what the cell does. `timed_out`
   * means the timeout ended it, `killed` that the host killed the worker under it.
   * @throws {KlbrError} `worker_failed` (its cause names the framing failure or exit) when
   * the worker dies other than by the host's kill; `frame_oversize` for too much code.
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
    const watch = watchLimits(this.#settings.jail, (hit) => void this.kill(`the cell ${hit}`));
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
      await watch.stop();
    }
    const reply = CellReply.safeParse(raw);
    if (!reply.success) {
      throw this.#protocolViolation(`execute reply ${describeIssues(reply.error)}`);
    }
    // A limit reached after the last check still ends the cell, and its generation; a cell
    // too short to be checked is not read again (a read costs a process).
    const hit = performance.now() - started >= LIMIT_POLL_MS
      ? await this.#settings.jail?.breach()
      : null;
    if (hit) {
      const exit = await this.kill(`the cell ${hit}`);
      const { stdout, stderr, duration_ms: ms } = reply.data;
      return hostEndedResult(
        "killed",
        `the workbench was killed: ${exit.message}`,
        stdout,
        stderr,
        ms,
      );
    }
    const outcome = reply.data.outcome === "cancelled" && pending.stopping === "timeout"
      ? "timed_out"
      : reply.data.outcome;
    return { ...reply.data, outcome };
  }

  /**
   * Runs a policy hook and returns its JSON value; an aborted `signal` runs the ladder on it.
   * @throws {KlbrError} `hook_failed` when the hook raised or was cancelled; `worker_timeout`
   * when it did not answer within `timeoutMs`; `worker_failed` when the worker died.
   */
  async hook(
    name: HookName,
    args: Record<string, unknown>,
    options: HookOptions = {},
  ): Promise<unknown> {
    const id = newId("request");
    const frame = { kind: "hook" as const, id, name, args, messages: options.messages };
    const pending = this.#register(
      options.behavior === undefined ? frame : { ...frame, behavior: options.behavior },
      null,
    );
    const timer = options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => void this.#ladder(id, "timeout"), options.timeoutMs);
    const onAbort = () => void this.#ladder(id, "cancel");
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const value = await pending.done.promise;
      if (pending.stopping !== "timeout") return value;
    } catch (error) {
      if (pending.stopping !== "timeout") {
        throw error instanceof Killed ? this.#deadError("hook", error.message) : error;
      }
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    }
    throw new KlbrError(
      "worker_timeout",
      `cannot run hook ${name}: no reply within ${options.timeoutMs} ms (got pid ${this.pid})`,
    );
  }

  /**
   * Runs the `tests/test_*.py` of the behaviour tree `behavior` (`klbr/draft_tests.py`), each
   * test bounded by `timeoutMs`, at most `maxTests` of them.
   * @throws {KlbrError} `worker_failed` when the whole run does not answer within `deadlineMs`
   * (the worker is then killed), when the worker dies, or when the reply is outside the schema.
   */
  async runTests(
    behavior: BehaviorRef,
    options: { timeoutMs: number; maxTests: number; deadlineMs: number },
  ): Promise<DraftTestReply> {
    const frame = {
      kind: "test" as const,
      id: newId("request"),
      behavior,
      timeout_ms: options.timeoutMs,
      max_tests: options.maxTests,
    };
    const parsed = DraftTestReply.safeParse(await this.#request(frame, options.deadlineMs));
    if (!parsed.success) {
      throw this.#protocolViolation(`test reply ${describeIssues(parsed.error)}`);
    }
    return parsed.data;
  }

  /**
   * Asks the worker for the fingerprint it loaded at start and one of what is on disk now.
   * @throws {KlbrError} `worker_failed` when the worker does not answer within the ping
   * deadline or answers outside the schema.
   */
  async fingerprint(): Promise<{ loaded: WorkerFingerprint; current: WorkerFingerprint }> {
    const result = await this.#request(
      { kind: "fingerprint", id: newId("request") },
      this.#settings.pingTimeoutMs,
    );
    const parsed = FingerprintReply.safeParse(result);
    if (!parsed.success) {
      throw this.#protocolViolation(`fingerprint reply ${describeIssues(parsed.error)}`);
    }
    return parsed.data;
  }

  /**
   * Checks the worker answers; one that does not within the deadline is declared dead.
   * @throws {KlbrError} `worker_failed` with a `worker_timeout` cause after the deadline.
   */
  async ping(options: { timeoutMs?: number } = {}): Promise<void> {
    const deadline = options.timeoutMs ?? this.#settings.pingTimeoutMs;
    await this.#request({ kind: "ping", id: newId("request") }, deadline);
  }

  /**
   * Asks the worker to exit; kills its group if it has not exited within the grace.
   * Resolves with how it ended; requests still pending end as if killed.
   */
  async shutdown(): Promise<WorkbenchExit> {
    if (this.#state !== "running") return await this.exited;
    const request = this.#request({ kind: "shutdown", id: newId("request") }, undefined);
    this.#state = "closing";
    this.#channel.expectExit();
    await settlesWithin(request, this.#settings.exitGraceMs);
    if (!(await this.#channel.exitedWithin(this.#settings.exitGraceMs))) {
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
    this.#channel.send(frame); // throws frame_oversize before anything is registered
    return this.#pending.add(frame, cell, onStream);
  }

  /** Sends a request; no reply within `deadlineMs` declares the worker dead. */
  async #request(frame: HostRequest, deadlineMs: number | undefined): Promise<unknown> {
    const pending = this.#register(frame, null);
    if (deadlineMs !== undefined) {
      settlesWithin(pending.done.promise, deadlineMs).then((settled) => {
        if (settled) return;
        this.#fail(
          new KlbrError(
            "worker_timeout",
            `cannot ${frame.kind} workbench: no reply within ${deadlineMs} ms (got pid ${this.pid})`,
          ),
        );
      });
    }
    try {
      return await pending.done.promise;
    } catch (error) {
      throw error instanceof Killed ? this.#deadError(frame.kind, error.message) : error;
    }
  }

  #settle(pending: Pending, how: { value: unknown } | { error: unknown }): void {
    this.#pending.settle(pending, how, (id) => this.#rpc.abort(id), this.#settings.exitGraceMs);
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
        // The worker is ending; the target settles with it.
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

  #dispatch(frame: WorkerFrame): void {
    if (this.#state === "dead") return;
    routeWorkerFrame(frame, {
      pending: this.#pending,
      rpc: this.#rpc,
      settle: (pending, how) => this.#settle(pending, how),
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

  #fail(cause: KlbrError): Promise<WorkbenchExit> {
    return this.#end("failed", cause, cause.message);
  }

  /**
   * Ends the handle once: aborts RPCs, kills the group and reaps the leader, reports
   * `onExit`, and only then settles the pending requests.
   */
  async #end(
    reason: WorkbenchExit["reason"],
    cause: KlbrError | null,
    message: string,
  ): Promise<WorkbenchExit> {
    if (this.#state === "dead") return await this.exited;
    this.#state = "dead";
    this.#ending = { reason, message };
    this.#rpc.abortAll();
    await this.#channel.terminate();
    // A worker that died of its tree's limit (the memory limit's OOM kill) is named for it.
    const hit = reason === "failed" ? await this.#settings.jail?.breach() : null;
    if (hit) [reason, cause, message] = ["killed", null, `the cell ${hit}`];
    await this.#settings.jail?.release();
    const status = this.#channel.status;
    const exit: WorkbenchExit = {
      reason,
      code: cause?.code ?? null,
      message,
      exitCode: status && status.signal === null ? status.code : null,
      signal: status?.signal ?? null,
      stderrTail: this.#channel.stderrTail(),
    };
    this.#exit.resolve(exit);
    try {
      this.#settings.onExit?.(exit);
    } catch {
      // A failing listener must not keep the handle from ending.
    }
    // Pending requests end last: when a caller sees a killed cell, the group is dead.
    for (const pending of this.#pending.all()) {
      const error = cause ? this.#deadError(pending.kind, cause.message, cause) : new Killed(
        `the workbench was ${reason === "shutdown" ? "shut down" : "killed"}: ${message}`,
      );
      this.#settle(pending, { error });
    }
    return exit;
  }
}
