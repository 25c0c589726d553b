/**
 * Dispatch of a worker's `rpc` frames to the process's {@linkcode RpcRegistry}, with one
 * `AbortController` per call: the method must be known and allowed to the process's role; the
 * registry parses the arguments and checks the reply; an unexpected failure is logged with its
 * stack and answered `internal`.
 *
 * @module
 */

import { type HostRpcReply, KlbrError, type Logger, type WorkerFrame } from "../core/mod.ts";
import type { ProcessRole } from "./_fingerprint.ts";
import type { RpcRegistry } from "./_rpc_registry.ts";

type RpcFrame = Extract<WorkerFrame, { kind: "rpc" }>;

/** How a dispatcher answers and for whom it serves. */
export interface RpcDispatcherOptions {
  /** The role of the process whose calls it serves. */
  role: ProcessRole;
  /** Sends one answer to the worker. */
  reply: (frame: HostRpcReply) => void;
  /** Where unexpected handler failures are logged, with their stack. */
  log: Logger;
}

const CALLER: Record<ProcessRole, string> = {
  workbench: "a cell",
  hooks: "a hook",
  job: "a job",
};

/** Runs RPC handlers and answers each call with exactly one `rpc_ok` or `rpc_error`. */
export class RpcDispatcher {
  readonly #registry: RpcRegistry;
  readonly #o: RpcDispatcherOptions;
  readonly #running = new Map<string, AbortController>();

  /** Serves `registry`'s RPCs to a process of `options.role`. */
  constructor(registry: RpcRegistry, options: RpcDispatcherOptions) {
    this.#registry = registry;
    this.#o = options;
  }

  /**
   * Starts one call under `parent` (null when its request is no longer running).
   * Returns a promise settled when the handler has finished, or null when the call was
   * refused at once. After an abort, no answer is sent: the cell no longer waits for one.
   */
  start(frame: RpcFrame, parent: { id: string; cell: string | null } | null): Promise<void> | null {
    const refused = this.#refusal(frame, parent);
    if (refused !== null) {
      this.#o.reply({ kind: "rpc_error", id: frame.id, ...refused });
      return null;
    }
    const controller = new AbortController();
    this.#running.set(frame.id, controller);
    const ctx = { signal: controller.signal, parent: parent!.id, cell: parent!.cell };
    return this.#registry.call(frame.method, frame.params, ctx)
      .then(
        (result) => {
          if (controller.signal.aborted) return;
          this.#o.reply({ kind: "rpc_ok", id: frame.id, result: result ?? null });
        },
        (error) => {
          if (controller.signal.aborted) return;
          this.#o.reply({ kind: "rpc_error", id: frame.id, ...this.#failure(frame, error) });
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

  /** Why a call is refused before it runs, or null. */
  #refusal(
    frame: RpcFrame,
    parent: { id: string; cell: string | null } | null,
  ): { code: string; message: string } | null {
    if (parent === null) {
      return {
        code: "invalid_input",
        message:
          `cannot call ${frame.method}: its cell is no longer running (got parent ${frame.parent})`,
      };
    }
    if (this.#running.has(frame.id)) {
      return {
        code: "invalid_input",
        message: `cannot call ${frame.method}: rpc id in use (got ${frame.id})`,
      };
    }
    const rpc = this.#registry.get(frame.method);
    if (rpc === undefined) {
      return {
        code: "not_found",
        message: `cannot call rpc: unknown method (got ${JSON.stringify(frame.method)})`,
      };
    }
    const { roles, refusal } = rpc.definition;
    if (!roles.includes(this.#o.role)) {
      return {
        code: "forbidden",
        message: `cannot call ${frame.method} from ${CALLER[this.#o.role]}: ${
          refusal ?? `only ${roles.join(" and ")} processes may call it`
        } (got role ${this.#o.role})`,
      };
    }
    return null;
  }

  /** The answer to a failed call: a `KlbrError` as it is; anything else logged and `internal`. */
  #failure(frame: RpcFrame, error: unknown): { code: string; message: string } {
    if (error instanceof KlbrError) return { code: error.code, message: error.message };
    const name = error instanceof Error ? error.name : typeof error;
    this.#o.log.error(
      "rpc.failed",
      `rpc ${frame.method} failed unexpectedly: ${
        error instanceof Error ? error.message : String(error)
      }`,
      {
        method: frame.method,
        role: this.#o.role,
        rpc_id: frame.id,
        parent: frame.parent,
        stack: error instanceof Error ? error.stack ?? null : null,
      },
    );
    return {
      code: "internal",
      message: `cannot call ${frame.method}: the host failed unexpectedly (got ${name}); ` +
        "the daemon's log has the stack (event rpc.failed)",
    };
  }
}
