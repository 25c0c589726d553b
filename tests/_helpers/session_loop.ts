/**
 * One `Session` run in-process, for tests of the loop and the turn engine: the real store in a
 * temp directory on a clock the test sets, manual timers for the loop's retries and expiry, a
 * fake workbench (scripted cell results, `send('…')` and `wait()` understood), fake hooks
 * (every input consumed, `main`, messages unchanged, `wait`; each overridable) and the fake
 * model server over loopback HTTP. No daemon, no Python, no sleeps: a test moves time with
 * `timers.advance(ms)` and waits for durable state with `settle`, bounded in count and time.
 *
 * @module
 */

import { join } from "node:path";
import { localDedupeKey } from "../../store/tables/dedupe_keys.ts";
import { readEventsOfKind } from "../../store/tables/events.ts";
import { admitInput } from "../../store/tables/inputs.ts";
import { startGeneration } from "../../store/tables/kernel_generations.ts";
import { activateRelease } from "../../store/tables/releases.ts";
import { ensureSession, requireSession } from "../../store/tables/sessions.ts";
import { publishRelease as publish } from "../../store/maintenance/snapshot_hash.ts";
import { openStore, type Store } from "../../store/store.ts";
import { EventBus, type HookName, SILENT_LOGGER } from "../../runtime/core/mod.ts";
import { parseConfig } from "../../runtime/config/mod.ts";
import type { CellResult, ExecuteOptions, RoleFingerprint } from "../../runtime/kernel/mod.ts";
import { createProvider } from "../../runtime/model/mod.ts";
import {
  type HookWorkerPort,
  localSend,
  recoverSession,
  Session,
  type SessionWorkers,
  type TurnHealth,
  type WorkbenchPort,
} from "../../runtime/session/mod.ts";
import {
  type FakeOpenAI,
  type FakeOpenAIOptions,
  startFakeOpenAI,
} from "../fakes/openai_server.ts";
import { ManualTimers } from "./fake_timers.ts";
import { tempDir } from "./temp.ts";

/** The session every harness runs. */
export const SESSION = "default";

/** A cell the fake workbench ran: its id, code, and the release its turn was pinned to. */
export interface RanCell {
  cellId: string;
  code: string;
}

/**
 * The workbench port, in-process: each cell's result comes from `script` when set, else from
 * its code — `send('text')` sends through `localSend` on the running frame, `wait()` waits.
 */
export class FakeKernel implements WorkbenchPort {
  generation = 0;
  /** Never null: a turn then names the skills of the generation it has (none here). */
  current: unknown = {};
  fingerprint: RoleFingerprint | null = null;
  readonly ran: RanCell[] = [];
  /** A cell's result by its code; `undefined` falls back to the default. */
  script: ((cell: RanCell, options: ExecuteOptions) => Promise<CellResult> | undefined) | null =
    null;

  constructor(private readonly harness: { store: Store; session: () => Session }) {}

  /** The first use records a generation, as the workbench supervisor does. */
  ready(): Promise<unknown> {
    if (this.generation === 0) this.#start("startup");
    return Promise.resolve(this.current);
  }

  #start(reason: string): void {
    this.generation = startGeneration(this.harness.store, {
      session: SESSION,
      reason,
      skillsRevision: "none",
      behaviorRevision: null,
    }).generation;
  }

  async execute(cellId: string, code: string, options: ExecuteOptions): Promise<CellResult> {
    const cell = { cellId, code };
    this.ran.push(cell);
    const scripted = this.script?.(cell, options);
    if (scripted !== undefined) return await scripted;
    for (const [, text] of code.matchAll(/send\('([^']*)'\)/g)) {
      const frame = this.harness.session().runningFrame();
      localSend(this.harness.store, SESSION, frame, { text }, cellId);
    }
    const waits = /wait\(\)/.test(code);
    return cellResult({ wait: waits ? { reason: "done" } : null });
  }

  reset(reason: string): Promise<{ generation: number }> {
    this.#start(reason);
    return Promise.resolve({ generation: this.generation });
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }

  reopen(): void {}
}

/** A cell's result: `ok`, no output, unless `extra` says otherwise. */
export function cellResult(extra: Partial<CellResult> = {}): CellResult {
  return {
    outcome: "ok",
    value: null,
    stdout: "",
    stderr: "",
    error: null,
    wait: null,
    duration_ms: 1,
    ...extra,
  };
}

/** One hook call the fake hook worker answered. */
export interface HookCall {
  name: HookName;
  args: Record<string, unknown>;
  /** The release the call named (`behavior.revision`). */
  release: string | undefined;
  /** The signal the caller passed, whose abort cancels the call (as the hook worker's ladder). */
  signal: AbortSignal | undefined;
}

/**
 * The hook-worker port, in-process: `attention.plan` consumes every input, `model.plan` picks
 * `main`, `context.prepare` hands the messages back, `turn.next` says `wait`; `answer` overrides
 * any call (return `undefined` for the default, throw to fail it).
 */
export class FakeHooks implements HookWorkerPort {
  fingerprint: RoleFingerprint | null = null;
  readonly calls: HookCall[] = [];
  retired: string[] = [];
  answer: ((call: HookCall) => unknown) | null = null;

  hook(
    name: HookName,
    args: Record<string, unknown>,
    options: { behavior?: { revision: string }; signal?: AbortSignal },
  ): Promise<unknown> {
    const call = { name, args, release: options.behavior?.revision, signal: options.signal };
    this.calls.push(call);
    try {
      const answered = this.answer?.(call);
      return Promise.resolve(answered !== undefined ? answered : defaultAnswer(call));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  retire(reason: string): void {
    this.retired.push(reason);
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function defaultAnswer(call: HookCall): unknown {
  switch (call.name) {
    case "attention.plan": {
      const inputs = call.args.inputs as { id: string }[];
      return { consume: inputs.map((i) => i.id), routing: { reply_to: "local:main" }, ignore: [] };
    }
    case "model.plan":
      return { route: "main" };
    case "context.prepare":
      return call.args.messages;
    default:
      return { action: "wait" };
  }
}

/** Options for {@linkcode withSessionLoop}. */
export interface SessionLoopOptions {
  /** Extra KDL lines of the `main` route, e.g. `max_steps 3`. */
  routeFields?: string;
  /** The fake model server's options; by default a reply it was not given is a `wait()` cell. */
  fake?: FakeOpenAIOptions;
  inputExpireMs?: number;
  inputWaitWarnMs?: number;
  /** @default {1000} */
  retryBaseMs?: number;
  /** Runs on the store before the session recovers and starts (e.g. a frame left open). */
  before?: (store: Store, dir: string) => void | Promise<void>;
}

/** What a test drives. */
export interface SessionLoop {
  store: Store;
  clock: { now: number };
  timers: ManualTimers;
  session: Session;
  kernel: FakeKernel;
  hooks: FakeHooks;
  fake: FakeOpenAI;
  /** The state directory (releases are published under it). */
  dir: string;
  /** Admits a local input and wakes the session, as the daemon's admission does. */
  admit(text: string): string;
  /** Waits until `done()` holds, yielding to the event loop; bounded in count and time. */
  settle(what: string, done: () => boolean): Promise<void>;
  /** The bodies of the session's records of `kind`, in order. */
  records(kind: string): Record<string, unknown>[];
  /** The fake model server's chat requests. */
  chats(): { body: { messages: { role: string; content: string | null }[] } }[];
  /** Publishes a release of `files`, the active one in the store unless `activate` is false. */
  publish(files: Record<string, string>, activate?: boolean): Promise<string>;
}

const NO_HEALTH: TurnHealth = {
  modelCall: () => ({ progress() {}, done() {} }),
  artifactWrite() {},
};

/**
 * Runs `fn` on a session recovered and started in-process, then stops it, closes the fake
 * server and the store, and removes the state directory.
 */
export async function withSessionLoop(
  options: SessionLoopOptions,
  fn: (loop: SessionLoop) => Promise<void>,
): Promise<void> {
  const dir = await tempDir("klbr-loop-");
  const clock = { now: 1_000_000 };
  const timers = new ManualTimers(clock);
  const store = openStore(dir, { clock: () => clock.now });
  const fake = startFakeOpenAI({
    fallback: () => ({ toolCall: { code: "wait()" } }),
    ...options.fake,
  });
  let session: Session | undefined;
  try {
    ensureSession(store, SESSION);
    await options.before?.(store, dir);
    const row = requireSession(store, SESSION);
    const { config } = parseConfig(
      `llm "main" {\n    url "${fake.url}"\n    model "fake"\n${options.routeFields ?? ""}\n}`,
      { file: "test.kdl" },
    );
    const provider = createProvider(config.routes.main, { apiKey: undefined });
    const kernel = new FakeKernel({ store, session: () => session! });
    const hooks = new FakeHooks();
    const workers: SessionWorkers = { kernel, hooks, refreshRoles: () => Promise.resolve() };
    session = new Session(SESSION, {
      store,
      bus: new EventBus(),
      log: SILENT_LOGGER,
      workspace: dir,
      skillRoots: { builtinRoot: join(dir, "skills"), managedRoot: join(dir, "managed") },
      provider: () => provider,
      contextBudget: () => ({ contextTokens: 32_768, compactAt: 0.75, summaryShare: 0.1 }),
      behavior: {
        releaseId: row.activeRelease ?? "builtin",
        path: dir,
        epoch: row.behaviorEpoch,
        recovered: null,
      },
      health: NO_HEALTH,
      inputExpireMs: options.inputExpireMs ?? Infinity,
      inputWaitWarnMs: options.inputWaitWarnMs ?? 300_000,
      retryBaseMs: options.retryBaseMs ?? 1000,
      timers,
    }, () => workers);
    const running = session;
    let inputs = 0;
    const loop: SessionLoop = {
      store,
      clock,
      timers,
      session: running,
      kernel,
      hooks,
      fake,
      dir,
      admit(text) {
        const { inputId } = admitInput(store, {
          session: SESSION,
          sourceKind: "local",
          dedupeKey: localDedupeKey("cl_test", `m${++inputs}`),
          conversationId: "local:main",
          author: "owner",
          body: text,
        });
        running.wake();
        return inputId;
      },
      settle: (what, done) => settle(what, done),
      records: (kind) =>
        readEventsOfKind(store, SESSION, kind).map((e) => e.body as Record<string, unknown>),
      chats: () => fake.requests.filter((r) => r.method === "POST"),
      publish: (files, activate) => publishRelease(store, { dir, files, activate }),
    };
    running.start(recoverSession(store, SESSION, { log: SILENT_LOGGER }));
    await fn(loop);
  } finally {
    await session?.runtime.stop("the test ended");
    session?.runtime.dispose();
    await fake.close();
    store.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Yields to the event loop until `done()` holds: at most 5,000 turns and 20 s. */
async function settle(what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (let turn = 0; turn < 5_000 && Date.now() < deadline; turn++) {
    if (done()) return;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  if (!done()) throw new Error(`the session never reached: ${what}`);
}

/** Publishes a release of `files` under `dir`; `activate` makes it the session's active one. */
async function publishRelease(
  store: Store,
  release: { dir: string; files: Record<string, string>; activate?: boolean },
): Promise<string> {
  const { dir, files, activate = true } = release;
  const source = await Deno.makeTempDir({ dir, prefix: "release-" });
  for (const [name, text] of Object.entries(files)) {
    await Deno.writeTextFile(join(source, name), text);
  }
  const published = await publish(store, {
    sourceDir: source,
    releasesDir: join(dir, "releases"),
  });
  const row = requireSession(store, SESSION);
  if (activate && row.activeRelease !== published.id) {
    activateRelease(store, {
      session: SESSION,
      expectedEpoch: row.behaviorEpoch,
      releaseId: published.id,
      reason: "test",
    });
  }
  return published.id;
}
