/**
 * The table of requests a workbench has not answered yet, and how each one ends.
 *
 * @module
 */

import { type HostRequest, KlbrError, settlesWithin, type WorkerFrame } from "../core/mod.ts";
import { deferred, StreamText } from "./_parts.ts";
import type { ExecuteOptions } from "./_types.ts";

const STREAM_CAP = 1024 * 1024;

/** One request waiting for its reply. */
export type Pending = {
  id: string;
  kind: HostRequest["kind"];
  cell: string | null;
  done: ReturnType<typeof deferred<unknown>>;
  settled: boolean;
  /** Why the host asked it to stop, once the ladder started. */
  stopping: "cancel" | "timeout" | null;
  ladder: Promise<void> | null;
  onStream?: ExecuteOptions["onStream"];
  /** Live output so far, for the result of a cell the host ends itself. */
  out: StreamText;
  err: StreamText;
  /** RPC calls running under this request, by rpc id. */
  rpcs: Map<string, Promise<void>>;
};

/** Ends a request the host killed on purpose; `execute` turns it into a `killed` result. */
export class Killed {
  /** Says why the worker was killed. */
  constructor(readonly message: string) {}
}

/** Requests by id, each settled exactly once. */
export class PendingRequests {
  readonly #byId = new Map<string, Pending>();

  /** Adds a request; call it only once its frame was accepted for sending. */
  add(frame: HostRequest, cell: string | null, onStream?: ExecuteOptions["onStream"]): Pending {
    const pending: Pending = {
      id: frame.id,
      kind: frame.kind,
      cell,
      done: deferred<unknown>(),
      settled: false,
      stopping: null,
      ladder: null,
      onStream,
      out: new StreamText(STREAM_CAP),
      err: new StreamText(STREAM_CAP),
      rpcs: new Map(),
    };
    pending.done.promise.catch(() => {}); // observed by its caller; never unhandled
    this.#byId.set(frame.id, pending);
    return pending;
  }

  /** The request with this id, if it is still waiting. */
  get(id: string): Pending | undefined {
    return this.#byId.get(id);
  }

  /** Every waiting request. */
  all(): Pending[] {
    return [...this.#byId.values()];
  }

  /**
   * Settles a request once. Its running RPCs are aborted with `abortRpc` and awaited (at
   * most `graceMs`) first, so when a cell's result is reported the process groups its
   * `run` calls started are dead.
   */
  settle(
    pending: Pending,
    how: { value: unknown } | { error: unknown },
    abortRpc: (id: string) => void,
    graceMs: number,
  ): void {
    if (pending.settled) return;
    pending.settled = true;
    this.#byId.delete(pending.id);
    for (const id of pending.rpcs.keys()) abortRpc(id);
    const finish = () => {
      if ("error" in how) pending.done.reject(how.error);
      else pending.done.resolve(how.value);
    };
    if (pending.rpcs.size === 0) return finish();
    settlesWithin(Promise.allSettled(pending.rpcs.values()), graceMs).then(finish);
  }
}

/** The error a worker's `error` reply becomes, by the kind of request it answers. */
export function replyError(
  pending: Pending,
  frame: Extract<WorkerFrame, { kind: "error" }>,
): KlbrError {
  const [code, action] = pending.kind === "hook"
    ? ["hook_failed", "run hook"] as const
    : pending.kind === "execute"
    ? ["cell_failed", `execute cell ${pending.cell}`] as const
    : ["worker_failed", `${pending.kind} workbench`] as const;
  return new KlbrError(code, `cannot ${action}: ${frame.code}: ${frame.message}`, {
    cause: frame,
  });
}
