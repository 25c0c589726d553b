/**
 * Named wrappers around a session's ports, each adding one concern to the calls that pass
 * through it (in the spirit of Temporal's interceptors): `meteredProvider` charges each model
 * call to the daemon's budgets as the running frame's, and `CancellableKernel` lets the
 * operator cancel one running cell alone. The third, `TracedHooks`, is in `_traced_hooks.ts`.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";
import type { CellResult } from "../kernel/mod.ts";
import type { Provider } from "../model/mod.ts";
import type { WorkbenchPort } from "./_session_ports.ts";
import type { TurnKernel } from "./_turn_sink.ts";

/** Who a metered model call is charged to: the session, and its running frame if any. */
export interface MeterScope {
  session: string;
  frameId: string | null;
}

/** The daemon's meter: a route's provider whose calls are charged to `scope()`. */
export type Meter = (route: string, scope: () => MeterScope) => Provider;

/**
 * The providers of a session's turns, each call metered against the daemon's budgets and
 * charged to the frame `scope` names when it is made; `provider` as it is without a meter.
 *
 * @example
 * ```ts
 * const providers = meteredProvider(provider, { meter, scope: () => session.meterScope() });
 * providers("main").streamChat({ messages });
 * ```
 */
export function meteredProvider(
  provider: (route: string) => Provider,
  options: { meter?: Meter; scope: () => MeterScope },
): (route: string) => Provider {
  const { meter, scope } = options;
  if (meter === undefined) return provider;
  return function metered(route: string): Provider {
    return meter(route, scope);
  };
}

/**
 * The workbench as a turn uses it, each running cell cancellable alone: the operator's
 * `cancel_cell` ends that cell (the worker's cancellation ladder), the turn goes on and tells
 * the model the cell was cancelled.
 *
 * @example
 * ```ts
 * const kernel = new CancellableKernel(workbench);
 * const running = kernel.execute("cell_1", "1 + 1", { signal, timeoutMs, onStream });
 * kernel.cancel("cell_1");
 * ```
 */
export class CancellableKernel implements TurnKernel {
  readonly #kernel: WorkbenchPort;
  readonly #running = new Map<string, AbortController>();

  /** Wraps the session's workbench port. */
  constructor(kernel: WorkbenchPort) {
    this.#kernel = kernel;
  }

  /** The running generation, once one is ready; cells are recorded against it. */
  async generation(): Promise<number> {
    await this.#kernel.ready();
    return this.#kernel.generation;
  }

  /** Runs one cell, ended early by the turn's `signal` or by {@linkcode cancel}. */
  async execute(
    cellId: string,
    code: string,
    options: Parameters<TurnKernel["execute"]>[2],
  ): Promise<CellResult> {
    const own = new AbortController();
    this.#running.set(cellId, own);
    try {
      const signal = AbortSignal.any([options.signal, own.signal]);
      return await this.#kernel.execute(cellId, code, { ...options, signal });
    } finally {
      this.#running.delete(cellId);
    }
  }

  /**
   * Asks the running cell `cellId` to stop; its outcome says how it ended.
   *
   * @throws {KlbrError} `not_found` when no cell of that id is running.
   */
  cancel(cellId: string): void {
    const running = this.#running.get(cellId);
    if (running === undefined) {
      throw new KlbrError(
        "not_found",
        `cannot cancel cell ${cellId}: it is not running (got ${cellId})`,
      );
    }
    running.abort(new Error("the operator cancelled the cell"));
  }
}
