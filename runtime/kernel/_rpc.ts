/**
 * Dispatch of a worker's `rpc` frames to the host's handler table, with one
 * `AbortController` per call.
 *
 * @module
 */

import { type HostRpcReply, KlbrError, type WorkerFrame } from "../core/mod.ts";
import type { RpcHandler } from "./_types.ts";

type RpcFrame = Extract<WorkerFrame, { kind: "rpc" }>;

/** Runs RPC handlers and answers each call with exactly one `rpc_ok` or `rpc_error`. */
export class RpcDispatcher {
  readonly #handlers: Record<string, RpcHandler>;
  readonly #reply: (frame: HostRpcReply) => void;
  readonly #running = new Map<string, AbortController>();

  /** Dispatches to `handlers` and sends answers with `reply`. */
  constructor(handlers: Record<string, RpcHandler>, reply: (frame: HostRpcReply) => void) {
    this.#handlers = handlers;
    this.#reply = reply;
  }

  /**
   * Starts one call under `parent` (null when its request is no longer running).
   * Returns a promise settled when the handler has finished, or null when the call was
   * refused at once. After an abort, no answer is sent: the cell no longer waits for one.
   */
  start(frame: RpcFrame, parent: { id: string; cell: string | null } | null): Promise<void> | null {
    const refuse = (code: string, message: string) => {
      this.#reply({ kind: "rpc_error", id: frame.id, code, message });
      return null;
    };
    if (parent === null) {
      return refuse(
        "invalid_input",
        `cannot call ${frame.method}: its cell is no longer running (got parent ${frame.parent})`,
      );
    }
    if (this.#running.has(frame.id)) {
      return refuse(
        "invalid_input",
        `cannot call ${frame.method}: rpc id in use (got ${frame.id})`,
      );
    }
    const handler = Object.hasOwn(this.#handlers, frame.method)
      ? this.#handlers[frame.method]
      : undefined;
    if (!handler) {
      return refuse(
        "not_found",
        `cannot call rpc: unknown method (got ${JSON.stringify(frame.method)})`,
      );
    }
    const controller = new AbortController();
    this.#running.set(frame.id, controller);
    const ctx = {
      signal: controller.signal,
      method: frame.method,
      parent: parent.id,
      cell: parent.cell,
    };
    return Promise.resolve()
      .then(() => handler(frame.params, ctx))
      .then(
        (result) => {
          if (controller.signal.aborted) return;
          this.#reply({ kind: "rpc_ok", id: frame.id, result: result ?? null });
        },
        (error) => {
          if (controller.signal.aborted) return;
          const known = error instanceof KlbrError;
          this.#reply({
            kind: "rpc_error",
            id: frame.id,
            code: known ? error.code : "internal",
            message: known
              ? error.message
              : `cannot call ${frame.method}: the host failed internally`,
          });
        },
      )
      .finally(() => {
        this.#running.delete(frame.id);
      });
  }

  /** Aborts one running call (an `rpc_cancel`, or its parent ended). */
  abort(id: string): void {
    this.#running.get(id)?.abort();
  }

  /** Aborts every running call (the worker ended). */
  abortAll(): void {
    for (const controller of this.#running.values()) controller.abort();
  }
}
