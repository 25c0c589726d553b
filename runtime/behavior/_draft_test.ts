/**
 * The host's trusted test of behaviour code: hooks run in a throwaway worker (never the
 * session's hook worker or workbench), each result checked against its contract here, each
 * call kept as a trace; then the draft's own `tests/test_*.py` run in the same worker, each a
 * check of its own. A candidate's own claims are never read: a test passes by running.
 *
 * @module
 */

import { type CandidateCheck, recordTrace } from "../../store/tables/behavior_diagnostics.ts";
import type { Store } from "../../store/store.ts";
import {
  type BehaviorRef,
  DEFAULT_HOOK_TIMEOUT_MS,
  type DraftTestReply,
  type HookName,
} from "../core/mod.ts";
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

/** How long one test function of a draft may run. */
export const DRAFT_TEST_TIMEOUT_MS = 10_000;
/** How long all the tests of a draft may run together; past it the worker is killed. */
export const DRAFT_TESTS_DEADLINE_MS = 60_000;
/** The most test functions a draft runs: with the four hooks, within a candidate's 64 checks. */
export const MAX_DRAFT_TESTS = 56;

/** What one trusted run does. */
export interface TrustedRun {
  /** The hook calls, run in order. */
  calls: TestCall[];
  /** The origin each call's trace is recorded with. */
  origin: "test" | "candidate";
  /** Whether the draft's own `tests/test_*.py` run after the calls. @default {false} */
  tests?: boolean;
}

/**
 * Runs each call in order in one throwaway worker loaded with `tree`, checks each result
 * against its hook's contract and records each as a trace with `run.origin`; a worker that
 * fails to start fails every call with its error. With `run.tests` (as publication requires),
 * the draft's own `tests/test_*.py` (`klbr/draft_tests.py`) run next: each becomes one check
 * named `tests/<file>::<function>` whose `fixture` holds what it printed, and a run that does
 * not end within {@linkcode DRAFT_TESTS_DEADLINE_MS} is one failing check named `tests`.
 *
 * @example
 * ```ts
 * const { hooks, tests } = await runTrusted(options, tree, { calls, origin: "candidate", tests: true });
 * const ok = [...hooks, ...tests].every((c) => c.ok);
 * ```
 */
export async function runTrusted(
  options: TrustedTestOptions,
  tree: BehaviorRef,
  run: TrustedRun,
): Promise<{ hooks: TestOutcome[]; tests: CandidateCheck[] }> {
  // The hooks under test read their tree and nothing else of the state directory; they may
  // not change it, so what is published is what was tested.
  const worker = spawnWorkbench(options.python, {
    cwd: options.workspace,
    repoRoot: options.repoRoot,
    sandbox: options.sandbox === undefined
      ? undefined
      : { base: options.sandbox, readOnly: [tree.path] },
  });
  const hooks: TestOutcome[] = [];
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
    for (const call of run.calls) {
      hooks.push(await runOne(options, worker, tree, call, run.origin, startError));
    }
    const tests = run.tests ? await draftTests(worker, tree, startError) : [];
    return { hooks, tests };
  } finally {
    await worker.kill("trusted test finished");
  }
}

/** The draft's own tests as checks; a run that fails as a whole is one failing check. */
async function draftTests(
  worker: ReturnType<typeof spawnWorkbench>,
  tree: BehaviorRef,
  startError: unknown,
): Promise<CandidateCheck[]> {
  let reply: DraftTestReply;
  const started = performance.now();
  try {
    if (startError !== undefined) throw startError;
    reply = await worker.runTests(tree, {
      timeoutMs: DRAFT_TEST_TIMEOUT_MS,
      maxTests: MAX_DRAFT_TESTS,
      deadlineMs: DRAFT_TESTS_DEADLINE_MS,
    });
  } catch (failure) {
    const error = hookErrorOf(failure);
    // The deadline is named only when it passed: a worker that died or never started did not.
    const late = performance.now() - started >= DRAFT_TESTS_DEADLINE_MS;
    const within = late ? ` within ${DRAFT_TESTS_DEADLINE_MS / 1000} s` : "";
    const message = `the draft's tests did not run to their end${within}: ${error.message}`;
    return [{
      hook: "tests",
      ok: false,
      detail: message.slice(0, 500),
      fixture: null,
      error: { ...error, message },
      trace_id: null,
    }];
  }
  return reply.tests.map((test) => {
    const raised = test.error === null ? null : `${test.error.type}: ${test.error.message}`;
    return {
      hook: test.name.slice(0, 200),
      ok: test.ok,
      detail: raised?.slice(0, 500) ?? `passed in ${Math.round(test.duration_ms)} ms`,
      fixture: { output: test.output },
      error: raised === null ? null : {
        code: "test_failed",
        message: `${test.name} failed: ${raised}`,
        traceback: test.error!.traceback || null,
      },
      trace_id: null,
    };
  });
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
