/**
 * Start-up of the daemon's parts, in order: the state directory and store (as owner), the
 * skills index, behaviour published as a release, Discord when configured, the coordinator
 * with the default session recovered and running.
 *
 * @module
 */

import { join } from "node:path";
import { DEFAULT_SESSION } from "../../store/tables/sessions.ts";
import { openStore, type Store, unusableState } from "../../store/store.ts";
import { type BehaviorState, prepareBehavior } from "../behavior/mod.ts";
import { backupBeforeMigration } from "../backup/mod.ts";
import type { Config } from "../config/mod.ts";
import { budgetOf } from "../context/mod.ts";
import type { Logger } from "../core/mod.ts";
import { DiscordTransport } from "../discord/mod.ts";
import { loadSkills, resolvePython, type SkillRoots, skillRoots } from "../kernel/mod.ts";
import { type Confinement, prepareConfinement } from "../sandbox/mod.ts";
import { readOperatorToken } from "../lanes/mod.ts";
import { createProvider, type Provider } from "../model/mod.ts";
import { initStateDir, REPO_ROOT } from "../setup/mod.ts";
import { Coordinator } from "./_coordinator.ts";
import { HealthMonitor, VERSION } from "./_health.ts";
import type { ServeSettings } from "./_serve_settings.ts";
import { DiskReserve } from "./_disk_reserve.ts";

/** The daemon's running parts. */
export interface DaemonParts {
  store: Store;
  coordinator: Coordinator;
  discord: DiscordTransport | undefined;
  /** What the turns report for `/health`. */
  monitor: HealthMonitor;
  /** How the workbench, hook workers and `workspace.run` children are confined. */
  confinement: Confinement;
  /** The store's disk reserve, and whether the disk has filled. */
  disk: DiskReserve;
}

/**
 * Opens the state and starts every part; on return the default session has been recovered
 * and its loop is running.
 *
 * @throws {KlbrError} from the store (owner lock held, foreign or too-new store, damaged:
 * `store_corrupt`) and from behaviour publication; `state_unusable` for a state directory on a
 * full or read-only disk, or a store file that cannot be written.
 */
export async function startDaemon(
  settings: ServeSettings,
  log: Logger,
  options: StartOptions = {},
): Promise<DaemonParts> {
  try {
    return await start(settings, log, options);
  } catch (error) {
    // A full, read-only or damaged state directory is one clear line saying what to do.
    throw unusableState("start", settings.stateDir, error) ?? error;
  }
}

/** How {@linkcode startDaemon} may be varied in-process. */
export interface StartOptions {
  /**
   * Wraps the store every part uses (a test records its commits); the wrapper must delegate
   * every member to the store it is given.
   */
  wrapStore?: (store: Store) => Store;
}

async function start(
  settings: ServeSettings,
  log: Logger,
  options: StartOptions,
): Promise<DaemonParts> {
  const { opened, confinement, disk } = await openState(settings, log);
  const started: StartedParts = { store: opened, confinement };
  try {
    const store = options.wrapStore?.(opened) ?? opened;
    const monitor = new HealthMonitor({
      clock: Date.now,
      stallMs: settings.modelStallMs,
      hookSlowMs: settings.hookSlowMs,
      log,
    });
    const roots = await indexSkills(settings, log);
    const behavior = await publishBehavior(store, log);
    const { config } = settings;
    const discord = config.discord === undefined || settings.discordToken === undefined
      ? undefined
      : new DiscordTransport({ config: config.discord, token: settings.discordToken, store, log });
    started.discord = discord;
    const coordinator = await createCoordinator(settings, {
      store,
      confinement,
      roots,
      behavior,
      log,
      discord,
      monitor,
    });
    started.coordinator = coordinator;
    coordinator.start(DEFAULT_SESSION);
    // After start: recovery has turned any send left `attempting` into `unknown`.
    discord?.start({
      admitDiscord: (message) => {
        const outcome = coordinator.admitDiscord(DEFAULT_SESSION, message);
        return "error" in outcome
          ? { error: outcome.error.message }
          : { inputId: outcome.ack.input_id };
      },
    });
    return { store, coordinator, discord, monitor, confinement, disk };
  } catch (error) {
    await stopStarted(started, log);
    throw error;
  }
}

/** What a start has started so far; the parts after the store and confinement may be missing. */
export interface StartedParts {
  /** The store as opened (not a test's wrapper): closing it drops the owner lock. */
  store: Store;
  /** The confinement, whose cgroups go with it. */
  confinement: Confinement;
  /** Discord, once made. */
  discord?: DiscordTransport | undefined;
  /** The coordinator, once made; its shutdown ends the workers it started. */
  coordinator?: Coordinator;
}

/**
 * Stops what a failed start (or serve) got to, in the reverse order of starting: the
 * coordinator and its workers, Discord, the confinement's cgroups, then the store, which drops
 * the owner lock. On return a next start on the same state directory can own it. A step that
 * fails is logged and does not keep the later ones from running.
 */
export async function stopStarted(parts: StartedParts, log: Logger): Promise<void> {
  const steps: [string, () => unknown][] = [
    ["coordinator", () => parts.coordinator?.shutdown()],
    ["discord", () => parts.discord?.stop()],
    ["confinement", () => parts.confinement.close()],
    ["store", () => parts.store.close()],
  ];
  for (const [part, stop] of steps) {
    try {
      await stop();
    } catch (error) {
      log.warn("daemon.stop_failed", `cannot stop the ${part} of a failed start: ${error}`, {
        part,
      });
    }
  }
}

/** Loads the skills of both roots and logs which are offered and which refused. */
async function indexSkills(settings: ServeSettings, log: Logger): Promise<SkillRoots> {
  const roots = skillRoots({
    repoRoot: REPO_ROOT,
    stateDir: settings.stateDir,
    skillsDir: settings.skillsDir,
  });
  const skills = await loadSkills(roots);
  const refused = skills.payload.refused.map((r) => `${r.id} (${r.reason})`).join("; ");
  log.info(
    "skills.index",
    `skills ${skills.payload.revision.slice(0, 12)}: ${
      skills.offered.map((s) => s.id).join(", ") || "(none)"
    }${refused ? `; refused: ${refused}` : ""}`,
  );
  return roots;
}

/** Publishes the checkout's `behavior/` as a release of the default session, and logs it. */
async function publishBehavior(store: Store, log: Logger): Promise<BehaviorState> {
  const behavior = await prepareBehavior(store, {
    session: DEFAULT_SESSION,
    sourceDir: join(REPO_ROOT, "behavior"),
  });
  log.info(
    "behavior.release",
    `behaviour release ${behavior.releaseId.slice(0, 12)} at epoch ${behavior.epoch}`,
    { release_id: behavior.releaseId, epoch: behavior.epoch },
  );
  if (behavior.recovered) log.warn("behavior.recovered", `recovered: ${behavior.recovered}`);
  return behavior;
}

/** The coordinator over the parts started so far, with the settings it reads. */
async function createCoordinator(
  settings: ServeSettings,
  parts: {
    store: Store;
    confinement: Confinement;
    roots: SkillRoots;
    behavior: BehaviorState;
    log: Logger;
    discord: DiscordTransport | undefined;
    monitor: HealthMonitor;
  },
): Promise<Coordinator> {
  const { store, confinement, roots, behavior, log, discord, monitor } = parts;
  const { config } = settings;
  return new Coordinator({
    store,
    token: await readOperatorToken(settings.stateDir),
    version: VERSION,
    python: confinement.python,
    sandbox: confinement.base,
    stateDir: confinement.stateDir,
    protect: confinement.protect,
    runPrograms: settings.runPrograms,
    cellTimeoutMs: settings.cellTimeoutMs,
    maintenanceIntervalMs: settings.maintenanceIntervalMs,
    repoRoot: REPO_ROOT,
    workspace: settings.workspace,
    skillRoots: roots,
    behavior,
    log,
    discord,
    provider: providersOf(config, settings.apiKeys),
    budget: config.budget,
    cleanup: config.cleanup,
    contextBudget: (name) =>
      budgetOf(config.routes[name as keyof typeof config.routes] ?? config.routes.main),
    health: monitor,
    hookRunning: (hook) => monitor.hookCall(hook),
    hookSlow: () => monitor.slowHooks().length > 0,
    inputExpireMs: settings.inputExpireMs,
    inputWaitWarnMs: settings.inputWaitWarnMs,
    retryBaseMs: settings.retryBaseMs,
    configPath: settings.configPath,
  });
}

/**
 * Opens the store (creating, migrating and checking it: once, not first in `init` and then
 * again; a store of an older schema is backed up first), lays out the rest of the state directory and decides the confinement; a refusal
 * after the store opened closes it again.
 */
async function openState(
  settings: ServeSettings,
  log: Logger,
): Promise<{ opened: Store; confinement: Confinement; disk: DiskReserve }> {
  const disk = new DiskReserve(settings.stateDir, settings.workspace, log);
  // An upgrade: the store of an older schema is backed up (verified) before it migrates.
  await backupBeforeMigration({ stateDir: settings.stateDir, config: settings.config.backup, log });
  const opened = openStore(settings.stateDir, {
    create: true,
    onHealthChange: (health) => {
      if (health.state === "ok") log.info("store.recovered", "the store commits again");
      else log.error(`store.${health.state}`, `store ${health.state}: ${health.error}`);
      // The first full disk releases the reserve: the next commit finds room.
      if (health.state === "failing" && /disk is full/.test(health.error ?? "")) disk.full();
    },
  });
  try {
    await initStateDir(settings.stateDir, { store: false });
    const { sandbox, workspace } = settings.config;
    const reserving = disk.prepare();
    const confinement = await prepareConfinement({
      config: sandbox,
      limits: {
        maxProcesses: sandbox.max_processes,
        memoryBytes: sandbox.memory,
        cpuWeight: sandbox.cpu_weight,
        fileSizeBytes: sandbox.max_file_size,
      },
      selfEdit: workspace.self_edit,
      python: settings.pythonInfo ?? await resolvePython(settings.python),
      status: settings.sandbox,
      bwrap: settings.bwrap,
      stateDir: settings.stateDir,
      workspace: settings.workspace,
      repoRoot: REPO_ROOT,
      log,
    });
    await reserving;
    return { opened, confinement, disk };
  } catch (error) {
    opened.close();
    throw error;
  }
}

/** One provider per route, made on first use; an unknown route name falls back to `main`. */
function providersOf(
  config: Config,
  apiKeys: Map<string, string | undefined>,
): (route: string) => Provider {
  const providers = new Map<string, Provider>();
  return (name) => {
    let provider = providers.get(name);
    if (provider === undefined) {
      const route = config.routes[name as keyof typeof config.routes] ?? config.routes.main;
      provider = createProvider(route, { apiKey: apiKeys.get(route.name) });
      providers.set(name, provider);
    }
    return provider;
  };
}
