/**
 * `/health`, telling the truth: `failing` (HTTP 503) when admission is closed or the store
 * cannot commit or reported corruption — judged by what its real statements and commits met,
 * not by a probe a full disk still passes; `degraded` from the first failed or stalled model
 * call (silent after its first data; before it the server may be processing the prompt) until
 * one succeeds, while the artifact store cannot be written, while a hook fails or
 * the session stalled, while a hook call runs past `KLBR_HOOK_SLOW_MS` (naming it and its age),
 * while inputs wait longer than the threshold, while an hourly budget is spent (naming it, when
 * it frees and how to lift it), and while Discord's gateway is down or refused (a fatal close
 * code, with its fix). It also reports the unattended work: jobs
 * running and pending, timers pending and due, the budgets that are spent, and whether the workbench is confined.
 *
 * @module
 */

import { DEFAULT_SESSION } from "../../store/tables/sessions.ts";
import type { Store } from "../../store/store.ts";
import type { Logger, PartHealth, SpentBudget } from "../core/mod.ts";
import type { ModelCallReport, TurnHealth } from "../session/mod.ts";
import { liftHint } from "../jobs/mod.ts";
import type { Confinement } from "../sandbox/mod.ts";
import { discordReason, type DiscordStatus } from "../discord/mod.ts";
import type { DiskReserve } from "./_disk_reserve.ts";
import type { Coordinator } from "./_coordinator.ts";

/** The daemon's version, as `/health` and `welcome` report it. */
export const VERSION = "0.1.0";

interface Call {
  route: string;
  lastAt: number;
  /** Whether reply data came: before it, the server may still be processing the prompt. */
  replying: boolean;
}

/** A hook call running in the hook worker, for `/health`. */
interface HookRun {
  hook: string;
  startedAt: number;
}

/** A hook call running past the threshold, as `/health` shows it. */
export interface SlowHook {
  hook: string;
  age_ms: number;
}

/** How long a hook call may run before `/health` reports it slow (`KLBR_HOOK_SLOW_MS`). */
export const DEFAULT_HOOK_SLOW_MS = 2_000;

/**
 * Hears every model call and artifact write of the daemon's turns, and says what `/health`
 * reports of them.
 *
 * @example
 * ```ts
 * const monitor = new HealthMonitor({ clock: Date.now, stallMs: 15_000, log });
 * new Session("default", { ..., health: monitor }, workers);
 * ```
 */
export class HealthMonitor implements TurnHealth {
  readonly #clock: () => number;
  readonly #stallMs: number;
  readonly #log: Logger;
  readonly #calls = new Set<Call>();
  readonly #hookSlowMs: number;
  readonly #hooks = new Set<HookRun>();
  #model: PartHealth = { state: "ok", error: null, since: null };
  #artifacts: PartHealth = { state: "ok", error: null, since: null };

  /**
   * `stallMs`: a model call with no reply data for this long since its last data is reported
   * stalled (before its first data, only the route's `timeout_ms` bounds it);
   * `hookSlowMs`: a hook call running this long is reported slow (default 2 s).
   */
  constructor(
    options: { clock: () => number; stallMs: number; log: Logger; hookSlowMs?: number },
  ) {
    this.#clock = options.clock;
    this.#stallMs = options.stallMs;
    this.#log = options.log;
    this.#hookSlowMs = options.hookSlowMs ?? DEFAULT_HOOK_SLOW_MS;
  }

  /**
   * A hook call starts in the hook worker; call the returned function when it ends, however
   * it ends. While it runs past the threshold, `/health` is `degraded` naming it and its age.
   *
   * @example
   * ```ts
   * const done = monitor.hookCall("attention.plan");
   * try { await hooks.hook(...); } finally { done(); }
   * ```
   */
  hookCall(hook: string): () => void {
    const run: HookRun = { hook, startedAt: this.#clock() };
    this.#hooks.add(run);
    return () => this.#hooks.delete(run);
  }

  /** The hook calls running past the threshold, the oldest first. */
  slowHooks(): SlowHook[] {
    const now = this.#clock();
    const slow: SlowHook[] = [];
    for (const run of this.#hooks) {
      const age = now - run.startedAt;
      if (age >= this.#hookSlowMs) slow.push({ hook: run.hook, age_ms: age });
    }
    return slow.sort((a, b) => b.age_ms - a.age_ms);
  }

  /** The threshold past which a running hook call is reported slow, in ms. */
  get hookSlowMs(): number {
    return this.#hookSlowMs;
  }

  /** A model request starts on `route`. */
  modelCall(route: string): ModelCallReport {
    const call: Call = { route, lastAt: this.#clock(), replying: false };
    this.#calls.add(call);
    return {
      progress: () => {
        call.lastAt = this.#clock();
        call.replying = true;
      },
      done: (error) => {
        this.#calls.delete(call);
        if (error === null) {
          if (this.#model.state !== "ok") {
            this.#log.info("model.recovered", `model route ${route} answers again`, { route });
          }
          this.#model = { state: "ok", error: null, since: null };
          return;
        }
        if (this.#model.state === "ok") {
          this.#log.warn("model.failing", `model call failed: ${error}`, { route });
        }
        const since = this.#model.state === "failing" ? this.#model.since : this.#clock();
        this.#model = { state: "failing", route, error, since };
      },
    };
  }

  /** An artifact write ended: `null` when it succeeded, else why it failed. */
  artifactWrite(error: string | null): void {
    if (error === null) {
      if (this.#artifacts.state !== "ok") {
        this.#log.info("artifacts.recovered", "artifact writes succeed again");
      }
      this.#artifacts = { state: "ok", error: null, since: null };
      return;
    }
    if (this.#artifacts.state === "ok") {
      this.#log.error(
        "artifacts.failing",
        `cannot write artifacts: ${error}; long cell output is kept as an excerpt only until a write succeeds`,
      );
    }
    const since = this.#artifacts.since ?? this.#clock();
    this.#artifacts = { state: "degraded", error, since };
  }

  /**
   * The model's state: `failing` after a failed call, `stalled` while a call that has begun its
   * reply gets no more data. A call before its first data is not a stall: llama-server sends
   * nothing until it has processed the prompt, which may take minutes, and the provider bounds
   * that wait by the route's `timeout_ms` alone (its idle deadline starts at the first data).
   */
  model(): PartHealth {
    if (this.#model.state !== "ok") return { ...this.#model };
    const now = this.#clock();
    for (const call of this.#calls) {
      if (call.replying && now - call.lastAt >= this.#stallMs) {
        return {
          state: "stalled",
          route: call.route,
          error: `no reply data for ${now - call.lastAt} ms`,
          since: call.lastAt,
        };
      }
    }
    return { state: "ok", error: null, since: null };
  }

  /** The artifact store's state: `degraded` from a failed write until one succeeds. */
  artifacts(): PartHealth {
    return { ...this.#artifacts };
  }
}

/**
 * The `/health` report. `ok` is false (HTTP 503, status `failing`) when admission is closed or
 * the store is failing or corrupt; `reasons` says, one sentence each, why it is not `ok`.
 */
export function healthReport(
  deps: {
    coordinator: Coordinator;
    store: Store;
    monitor: HealthMonitor;
    confinement: Pick<Confinement, "status" | "cell" | "limits" | "selfEdit">;
    disk: Pick<DiskReserve, "report" | "reason">;
    /** The Discord transport, when the configuration has a `discord` node. */
    discord?: { status(): DiscordStatus } | undefined;
  },
): Record<string, unknown> & { ok: boolean } {
  const discord = deps.discord?.status() ?? null;
  const discordDown = discord === null ? null : discordReason(discord);
  const status = readStatus(deps.coordinator);
  const sessions = status.sessions as Record<string, Record<string, unknown>>;
  const session = sessions[DEFAULT_SESSION] ?? {};
  const store = deps.store.health();
  const model = deps.monitor.model();
  const artifacts = deps.monitor.artifacts();
  const failing = failingReasons(status, store);
  const overBudget = (status.budget as { over_budget?: SpentBudget[] } | undefined)?.over_budget ??
    [];
  const disk = deps.disk.reason();
  const slowHooks = deps.monitor.slowHooks();
  const degraded = [
    ...(disk === null ? [] : [disk]),
    ...degradedReasons(session, model, artifacts),
    ...slowHooks.map((h) =>
      `the hook ${h.hook} has run for ${h.age_ms} ms (over ${deps.monitor.hookSlowMs} ms)`
    ),
    ...budgetReasons(overBudget),
    ...(discordDown === null ? [] : [discordDown]),
  ];
  const ok = failing.length === 0;
  return {
    ok,
    status: !ok ? "failing" : degraded.length ? "degraded" : "ok",
    reasons: [...failing, ...degraded],
    admitting: status.admitting,
    store: {
      state: store.state,
      error: store.error,
      since: store.since,
      last_commit_at: store.lastCommitAt,
    },
    store_writable: store.state === "ok",
    disk: deps.disk.report(),
    model,
    artifacts,
    discord: discord === null ? null : {
      state: discord.state,
      url: discord.url,
      since: discord.since,
      last_error: discord.lastError,
      close_code: discord.closeCode,
      fix: discord.fix,
      dms: discord.dms,
    },
    ...sessionWork(session),
    routes_adapted: session.routes_adapted ?? [],
    slow_hooks: slowHooks,
    over_budget: overBudget,
    retrying: session.retrying ?? null,
    recovered_release: status.recovered_release,
    // Where children run unconfined, every reader of /health hears it.
    sandbox: deps.confinement.status.mode,
    sandbox_reason: deps.confinement.status.reason,
    sandbox_network: deps.confinement.status.network,
    sandbox_userns: deps.confinement.status.userns,
    sandbox_cap_eff: deps.confinement.cell?.capEff ?? null,
    sandbox_limits: deps.confinement.limits?.mode ?? null,
    sandbox_limits_reason: deps.confinement.limits?.reason ?? null,
    self_edit: deps.confinement.selfEdit,
    version: VERSION,
  };
}

/** The coordinator's status, or, when the store cannot even be read, that as the answer. */
function readStatus(coordinator: Coordinator): Record<string, unknown> {
  try {
    return coordinator.status();
  } catch (error) {
    return { admitting: false, sessions: {}, recovered_release: null, unreadable: String(error) };
  }
}

/** Why the daemon is `failing`: state unreadable, admission closed, the store not committing. */
function failingReasons(
  status: Record<string, unknown>,
  store: ReturnType<Store["health"]>,
): string[] {
  const failing: string[] = [];
  if (status.unreadable !== undefined) {
    failing.push(`the state cannot be read: ${status.unreadable}`);
  } else if (status.admitting !== true) failing.push("admission is closed");
  if (store.state !== "ok") failing.push(`the store is ${store.state}: ${store.error}`);
  return failing;
}

/** Why the daemon is `degraded`: the model, artifact writes, a hook, a stall or waiting inputs. */
function degradedReasons(
  session: Record<string, unknown>,
  model: PartHealth,
  artifacts: PartHealth,
): string[] {
  const degraded: string[] = [];
  if (model.state !== "ok") degraded.push(`the model is ${model.state}: ${model.error}`);
  if (artifacts.state !== "ok") degraded.push(`artifact writes fail: ${artifacts.error}`);
  if (session.last_hook_failure != null) {
    degraded.push(`a hook fails: ${session.last_hook_failure}`);
  }
  const waiting = waitingReason(session.state);
  if (waiting !== null) degraded.push(waiting);
  if (session.stalled === true) degraded.push("the session stalled after its retries");
  if (Number(session.waiting_inputs ?? 0) > 0) {
    degraded.push(
      `${session.waiting_inputs} input(s) waiting over ${session.waiting_threshold_ms} ms`,
    );
  }
  return degraded;
}

/**
 * Why new messages wait while the operator holds the session (`stopped`, `draining`,
 * `drained`), with the fix; null while it runs.
 */
function waitingReason(state: unknown): string | null {
  switch (state) {
    case "stopped":
      return "the session is stopped by the operator: new messages wait until klbr resume default";
    case "draining":
      return "the session is draining: its turn finishes, then new messages wait until klbr resume default";
    case "drained":
      return "the session is drained by the operator: new messages wait until klbr resume default";
    default:
      return null;
  }
}

/** Why the daemon is `degraded` by its budgets: each spent limit, when it frees, how to lift it. */
function budgetReasons(spent: SpentBudget[]): string[] {
  return spent.map((e) =>
    `the budget ${e.what} is spent (${e.used} of ${e.limit} used): ${e.effect}` +
    (e.until === null ? "" : ` until ${e.until} (in ${e.frees_in_s} s)`) +
    `; ${liftHint(DEFAULT_SESSION)}`
  );
}

/** The default session's pending and unattended work, with its defaults when it reports none. */
function sessionWork(session: Record<string, unknown>): Record<string, unknown> {
  return {
    session_state: session.state ?? "running",
    waiting_reason: waitingReason(session.state),
    stalled: session.stalled ?? false,
    oldest_pending_age_ms: session.oldest_pending_age_ms ?? null,
    pending_inputs: session.pending_inputs ?? 0,
    waiting_inputs: session.waiting_inputs ?? 0,
    // The session counts it, as op.status shows it: the pending inputs a hook holds back.
    hook_backlog: session.hook_backlog ?? 0,
    last_hook_failure: session.last_hook_failure ?? null,
    running_jobs: session.running_jobs ?? 0,
    pending_jobs: session.pending_jobs ?? 0,
    pending_timers: session.pending_timers ?? 0,
    due_timers: session.due_timers ?? 0,
  };
}
