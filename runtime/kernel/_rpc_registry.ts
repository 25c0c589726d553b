/**
 * Host RPCs declared once: each is a {@linkcode RpcDefinition} — its name, the zod schemas of
 * its arguments and of its reply, the process roles that may call it and its handler. A domain
 * exports its definitions; whoever owns a process binds them to what they need
 * ({@linkcode bindRpcs}) and gives the worker one {@linkcode RpcRegistry} of them, which the
 * dispatcher (`_rpc.ts`) serves. `docs/protocol.md` lists the RPCs from these definitions.
 *
 * @module
 */

import type { z } from "zod";
import { describeIssues, KlbrError } from "../core/mod.ts";
import type { ProcessRole } from "./_fingerprint.ts";
import type { RpcContext } from "./_types.ts";

/** What a handler is called with besides its parsed arguments: the call and its bound deps. */
export interface RpcCall<D> extends RpcContext {
  /** What the owner of the process bound the definition to (`bindRpcs`). */
  deps: D;
}

/** One host RPC, declared once. */
export interface RpcDefinition<D = unknown> {
  /** The method a worker names in its `rpc` frame, e.g. `local.send`. */
  name: string;
  /** One sentence for `docs/protocol.md`. */
  summary: string;
  /** The process roles that may call it; any other is refused `forbidden`. */
  roles: readonly ProcessRole[];
  /** Why the other roles may not call it, for the refusal they get. */
  refusal?: string;
  /** What a refusal of bad arguments says it could not do. @default `call <name>` */
  action?: string;
  /** The arguments; the handler gets what this schema parsed. */
  args: z.ZodType;
  /** The reply; a reply that does not match is a host failure, logged and answered `internal`. */
  reply: z.ZodType;
  /** Does the call; throw a `KlbrError` to refuse it with its code. */
  handler: (args: never, call: RpcCall<D>) => unknown;
}

/** A definition bound to its deps, ready to serve in one process. */
export interface BoundRpc {
  definition: RpcDefinition<never>;
  /** Validates the arguments, runs the handler, validates the reply. */
  run: (params: unknown, ctx: RpcContext) => Promise<unknown>;
}

/**
 * Declares one host RPC; returns the definition with its handler's types checked against
 * its schemas.
 *
 * @example
 * ```ts
 * export const echoRpc = defineRpc({
 *   name: "echo.say",
 *   summary: "Answers the text it was given.",
 *   roles: ["workbench"],
 *   args: z.strictObject({ text: z.string() }),
 *   reply: z.strictObject({ text: z.string() }),
 *   handler: (args: { text: string }, _call: RpcCall<void>) => ({ text: args.text }),
 * });
 * ```
 */
export function defineRpc<D, A extends z.ZodType, R extends z.ZodType>(
  definition: Omit<RpcDefinition<D>, "args" | "reply" | "handler"> & {
    args: A;
    reply: R;
    handler: (args: z.output<A>, call: RpcCall<D>) => z.input<R> | Promise<z.input<R>>;
  },
): RpcDefinition<D> {
  return definition as RpcDefinition<D>;
}

/**
 * Binds `definitions` to `deps`: each call's arguments are parsed by its schema (a refusal
 * names the field and what is wrong with it) and its reply checked against its schema.
 *
 * @example
 * ```ts
 * const registry = new RpcRegistry([...bindRpcs(historyRpcs, { store, session })]);
 * ```
 */
export function bindRpcs<D>(definitions: readonly RpcDefinition<D>[], deps: D): BoundRpc[] {
  return definitions.map((definition) => ({
    definition: definition as RpcDefinition<never>,
    run: (params, ctx) => runBound(definition, { params, ctx, deps }),
  }));
}

/**
 * Declares `definitions` in a process without binding them: every role of that process is
 * refused them (the dispatcher checks the role first), with the definition's `refusal`.
 *
 * @throws {KlbrError} `invalid_config` if a definition allows one of `roles` (it needs binding).
 * @example
 * ```ts
 * const registry = new RpcRegistry([...declareRefused(speechRpcs, ["job"])]);
 * ```
 */
export function declareRefused(
  definitions: readonly RpcDefinition<never>[],
  roles: readonly ProcessRole[],
): BoundRpc[] {
  for (const definition of definitions) {
    const allowed = roles.find((role) => definition.roles.includes(role));
    if (allowed !== undefined) {
      throw new KlbrError(
        "invalid_config",
        `cannot declare ${definition.name} unbound: role ${allowed} may call it (got ${allowed})`,
      );
    }
  }
  return definitions.map((definition) => ({
    definition,
    run: () =>
      Promise.reject(
        new KlbrError(
          "forbidden",
          `cannot call ${definition.name}: it is not served in this process (got ${definition.name})`,
        ),
      ),
  }));
}

async function runBound<D>(
  definition: RpcDefinition<D>,
  call: { params: unknown; ctx: RpcContext; deps: D },
): Promise<unknown> {
  const parsed = definition.args.safeParse(call.params ?? {});
  if (!parsed.success) {
    throw new KlbrError(
      "invalid_input",
      `cannot ${definition.action ?? `call ${definition.name}`}: ${
        describeIssues(parsed.error)
      } (got ${JSON.stringify(call.params)?.slice(0, 200)})`,
    );
  }
  const handler = definition.handler as (args: unknown, call: RpcCall<D>) => unknown;
  const result = await handler(parsed.data, { ...call.ctx, deps: call.deps });
  const reply = definition.reply.safeParse(result ?? null);
  if (!reply.success) {
    throw new Error(
      `the reply of ${definition.name} does not match its schema: ${describeIssues(reply.error)}`,
    );
  }
  return result ?? null;
}

/**
 * The host RPCs one process serves, by name: every name once.
 *
 * @example
 * ```ts
 * const registry = new RpcRegistry([...bindRpcs(codeRpcs, deps), ...bindRpcs(historyRpcs, h)]);
 * await registry.call("code.outline", { path: "main.ts" }, ctx);
 * ```
 */
export class RpcRegistry {
  readonly #byName = new Map<string, BoundRpc>();

  /**
   * Registers `rpcs`.
   *
   * @throws {KlbrError} `invalid_config` when two share a name: an RPC is declared once.
   */
  constructor(rpcs: Iterable<BoundRpc>) {
    for (const rpc of rpcs) {
      const name = rpc.definition.name;
      if (this.#byName.has(name)) {
        throw new KlbrError(
          "invalid_config",
          `cannot register rpc: the name is declared twice (got ${JSON.stringify(name)})`,
        );
      }
      this.#byName.set(name, rpc);
    }
  }

  /** The RPC named `name`, or undefined. */
  get(name: string): BoundRpc | undefined {
    return this.#byName.get(name);
  }

  /** Every definition, in registration order. */
  definitions(): RpcDefinition<never>[] {
    return [...this.#byName.values()].map((rpc) => rpc.definition);
  }

  /**
   * Calls `name` without a role check (the dispatcher checks roles).
   *
   * @throws {KlbrError} `not_found` for an unknown name; `invalid_input` for bad arguments; what
   * the handler throws.
   */
  call(name: string, params: unknown, ctx: Omit<RpcContext, "method">): Promise<unknown> {
    const rpc = this.#byName.get(name);
    if (rpc === undefined) {
      return Promise.reject(
        new KlbrError("not_found", `cannot call rpc: unknown method (got ${JSON.stringify(name)})`),
      );
    }
    return rpc.run(params, { ...ctx, method: name });
  }
}
