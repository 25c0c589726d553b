/**
 * Operator commands in flight: each `request` id waits for its `op.result` or `error`, and
 * every one still waiting fails when the socket drops.
 *
 * @module
 */

import type { ClientMessage } from "../../runtime/core/mod.ts";

/** An operator message as the page builds it; the `request` id is added when it is sent. */
export type OperatorRequest = Extract<ClientMessage, { kind: `op.${string}` }> extends infer M
  ? M extends { kind: `op.${string}` } ? Omit<M, "request"> : never
  : never;

/** An operator command that the daemon refused or that lost its connection. */
export class OperatorCommandError extends Error {
  /** The daemon's error code, or `not_connected` / `connection_lost`. */
  readonly code: string;
  /** Creates the error. */
  constructor(code: string, message: string) {
    super(message);
    this.name = "OperatorCommandError";
    this.code = code;
  }
}

/** The words of a refused command: `refused (<code>): <message>`. */
export function refusal(error: unknown): string {
  const code = error instanceof OperatorCommandError ? ` (${error.code})` : "";
  return `refused${code}: ${error instanceof Error ? error.message : String(error)}`;
}

/**
 * The table of commands waiting for an answer.
 *
 * @example
 * ```ts
 * const requests = new OperatorRequests();
 * const answer = requests.add("op-1");
 * requests.resolve("op-1", { state: "stopped" });
 * ```
 */
export class OperatorRequests {
  #waiting = new Map<
    string,
    { resolve: (result: Record<string, unknown>) => void; reject: (error: Error) => void }
  >();

  /** Registers `request`; the promise settles with its answer. */
  add(request: string): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => this.#waiting.set(request, { resolve, reject }));
  }

  /** Answers `request`; returns whether it was waiting. */
  resolve(request: string, result: Record<string, unknown>): boolean {
    const entry = this.#waiting.get(request);
    this.#waiting.delete(request);
    entry?.resolve(result);
    return entry !== undefined;
  }

  /** Fails `request`; returns whether it was waiting. */
  reject(request: string, code: string, message: string): boolean {
    const entry = this.#waiting.get(request);
    this.#waiting.delete(request);
    entry?.reject(new OperatorCommandError(code, message));
    return entry !== undefined;
  }

  /** Fails every waiting request with the same reason. */
  rejectAll(code: string, message: string): void {
    const entries = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const entry of entries) entry.reject(new OperatorCommandError(code, message));
  }
}
