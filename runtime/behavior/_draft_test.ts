/**
 * The host's trusted test of behaviour code: hooks run in a throwaway worker (never the
 * session's hook worker or workbench), each result checked against its contract here, each
 * call kept as a trace. A candidate's own claims are never read.
 *
 * @module
 */

import { type CandidateCheck, recordTrace } from "../../store/behavior_diagnostics.ts";
import type { Store } from "../../store/store.ts";
import { type BehaviorRef, DEFAULT_HOOK_TIMEOUT_MS, type HookName } from "../core/mod.ts";
import { spawnWorkbench } from "../kernel/mod.ts";
import type { SandboxBase } from "../sandbox/mod.ts";
import { checkHookResult } from "./_hook_contracts.ts";
import { hookErrorOf } from "./_traces.ts";

/** What a trusted test needs. */
export interface TrustedTestOptions {
  store: Store;
  session: string;
  python: string;
  repoRoot: string;
  /** The worker's cwd. */
  workspace: string;
  /** How long one hook may take. @default {DEFAULT_HOOK_TIMEOUT_MS} */
  hookTimeoutMs?: number;
  /** Confines the throwaway worker: only the tree under test is bound (read-only). */
  sandbox?: SandboxBase;
}

/** One hook call of a test. */
export interface TestCall {
  hook: HookName;
  args: Record<string, unknown>;
}

/** One hook's result in a test: the check, and what it returned. */
export interface TestOutcome extends CandidateCheck {
  output: unknown;
  duration_ms: number;
}

/**
 * Runs each call in order in one throwaway worker loaded with `tree`, checks each result
 * against its hook's contract and records each as a trace with `origin`. A worker that fails
 * to start fails every call with its error.
 *
 * @example
 * ```ts
 * const [outcome] = await runTrusted(options, tree, [{ hook: "turn.next", args: {} }], "test");
 * ```
 */
export async function runTrusted(
  options: TrustedTestOptions,
  tree: BehaviorRef,
  calls: TestCall[],
  origin: "test" | "candidate",
): Promise<TestOutcome[]> {
  // The hooks under test read their tree and nothing else of the state directory; they may
  // not change it, so what is published is what was tested.
  const worker = spawnWorkbench(options.python, {
    cwd: options.workspace,
    repoRoot: options.repoRoot,
    sandbox: options.sandbox === undefined
      ? undefined
      : { base: options.sandbox, readOnly: [tree.path] },
  });
  const outcomes: TestOutcome[] = [];
  try {
    let startError: unknown;
    try {
      await worker.init({
        generation: 0,
        session: options.session,
        workspace: options.workspace,
        deny: [await Deno.realPath(options.store.stateDir)],
        skills: { revision: "", roots: [], bodies: {}, refused: [] },
        behavior: tree,
      });
    } catch (error) {
      startError = error;
    }
    for (const call of calls) {
      outcomes.push(await runOne(options, worker, tree, call, origin, startError));
    }
    return outcomes;
  } finally {
    await worker.kill("trusted test finished");
  }
}

async function runOne(
  options: TrustedTestOptions,
  worker: ReturnType<typeof spawnWorkbench>,
  tree: BehaviorRef,
  call: TestCall,
  origin: "test" | "candidate",
  startError: unknown,
): Promise<TestOutcome> {
  const started = performance.now();
  let output: unknown;
  let failure: unknown = startError;
  if (failure === undefined) {
    try {
      output = await worker.hook(call.hook, call.args, {
        timeoutMs: options.hookTimeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS,
      });
      checkHookResult(call.hook, output);
    } catch (error) {
      failure = error;
    }
  }
  const durationMs = performance.now() - started;
  const error = failure === undefined ? null : hookErrorOf(failure);
  const traceId = recordTrace(options.store, {
    session: options.session,
    frameId: null,
    hook: call.hook,
    releaseId: tree.revision,
    origin,
    inputs: call.args,
    output,
    error,
    durationMs,
  });
  return {
    hook: call.hook,
    ok: error === null,
    detail: error === null
      ? `returned ${JSON.stringify(output)?.slice(0, 120)}`
      : error.message.slice(0, 500),
    fixture: call.args,
    error,
    trace_id: traceId,
    output,
    duration_ms: Math.round(durationMs),
  };
}
