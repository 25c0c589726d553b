/**
 * `klbr serve`: validates the configuration, opens the store as owner, publishes behaviour,
 * starts the default session and serves HTTP and the v2 socket on loopback. SIGINT and
 * SIGTERM drain: admission stops, accepted turns finish, workbench groups die, exit 0.
 *
 * @module
 */

import { join } from "node:path";
import { REPO_ROOT } from "../setup/mod.ts";
import { DEFAULT_SESSION } from "../../store/sessions.ts";
import { openStore } from "../../store/store.ts";
import { prepareBehavior } from "../behavior/mod.ts";
import { loadConfig, resolveApiKey, resolveDiscordToken, type Route } from "../config/mod.ts";
import { DiscordTransport } from "../discord/mod.ts";
import { Coordinator } from "./_coordinator.ts";
import { createLogger, KlbrError, type LogFormat } from "../core/mod.ts";
import { readOperatorToken } from "../lanes/mod.ts";
import { createProvider, type Provider } from "../model/mod.ts";
import { createApp } from "../lanes/mod.ts";
import { loadSkills, skillRoots } from "../kernel/mod.ts";
import { initStateDir, resolveConfigPath } from "../setup/mod.ts";
import { requireLoopbackHost } from "../lanes/mod.ts";

/** The version the daemon reports. */
export const VERSION = "0.1.0";

export { REPO_ROOT };

/** Options for {@linkcode serve}. */
export interface ServeOptions {
  stateDir: string;
  configPath?: string;
  /** @default {"127.0.0.1"} */
  host?: string;
  /** @default {8765}; 0 picks a free port. */
  port?: number;
  /** How log lines are written. @default {"text"} */
  logFormat?: LogFormat;
}

/**
 * Runs the daemon until a signal drains it; resolves with the exit code.
 *
 * @throws {KlbrError} `not_loopback` for a non-loopback host, `invalid_config` for a bad
 * configuration — both before anything listens or is written.
 */
export async function serve(options: ServeOptions): Promise<number> {
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 8765;
  requireLoopbackHost(host);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new KlbrError(
      "invalid_config",
      `cannot serve: port must be 0-65535 (got ${options.port})`,
    );
  }
  const env = Deno.env.toObject();
  const configPath = await resolveConfigPath(options.stateDir, options.configPath);
  const { config, warnings } = await loadConfig(configPath, { env });
  const keys = new Map<string, string | undefined>();
  for (const route of Object.values(config.routes) as Route[]) {
    keys.set(route.name, resolveApiKey(route, env));
  }
  const discordToken = config.discord === undefined
    ? undefined
    : resolveDiscordToken(config.discord, env);
  const cellTimeoutMs = parseCellTimeout(env.KLBR_CELL_TIMEOUT_MS);
  const log = createLogger({ format: options.logFormat });
  for (const warning of warnings) log.warn("config.warning", `config: ${warning}`);

  await initStateDir(options.stateDir);
  const store = openStore(options.stateDir, { create: false });
  const workspace = env.KLBR_WORKSPACE ?? Deno.cwd();
  const roots = skillRoots({
    workspace,
    stateDir: options.stateDir,
    skillsDir: env.KLBR_SKILLS_DIR,
  });
  const skills = await loadSkills(roots);
  log.info(
    "skills.index",
    `skills ${skills.payload.revision.slice(0, 12)}: ${
      skills.offered.map((s) => s.id).join(", ") || "(none)"
    }${
      skills.payload.refused.length
        ? `; refused: ${skills.payload.refused.map((r) => `${r.id} (${r.reason})`).join("; ")}`
        : ""
    }`,
  );
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

  const discord = config.discord === undefined || discordToken === undefined
    ? undefined
    : new DiscordTransport({ config: config.discord, token: discordToken, store, log });
  const providers = new Map<string, Provider>();
  const coordinator = new Coordinator({
    store,
    token: await readOperatorToken(options.stateDir),
    version: VERSION,
    python: env.KLBR_PYTHON ?? "python3",
    cellTimeoutMs,
    repoRoot: REPO_ROOT,
    workspace,
    skillRoots: roots,
    behavior,
    log,
    discord,
    provider: (name) => {
      let provider = providers.get(name);
      if (provider === undefined) {
        const route = config.routes[name as keyof typeof config.routes] ?? config.routes.main;
        provider = createProvider(route, { apiKey: keys.get(route.name) });
        providers.set(name, provider);
      }
      return provider;
    },
  });
  coordinator.start(DEFAULT_SESSION);
  // After start: recovery has turned any send left `attempting` into `unknown`.
  discord?.start({
    admitDiscord: (message) => {
      const outcome = coordinator.admitDiscord(DEFAULT_SESSION, message);
      if ("error" in outcome) {
        log.warn(
          "discord.refused",
          `discord: refused message ${message.messageId}: ${outcome.error}`,
          { message_id: message.messageId },
        );
      }
    },
    notify: (session) => coordinator.bus.wake(session),
  });

  let uiDir: string | undefined;
  try {
    const { ensureUiBuilt } = await import("../setup/mod.ts");
    uiDir = await ensureUiBuilt({ repoRoot: REPO_ROOT });
  } catch (error) {
    log.error(
      "ui.unavailable",
      `UI unavailable: ${
        error instanceof Error ? error.message : error
      }; run deno task ui:build to see why`,
    );
  }

  const app = createApp({
    lanes: coordinator,
    log,
    uiDir,
    health: () => {
      const status = coordinator.status();
      const sessions = status.sessions as Record<string, Record<string, unknown>>;
      const session = sessions[DEFAULT_SESSION] ?? {};
      // Admission works only if the store takes a write lock now; check it, do not assume it.
      let writable = true;
      try {
        store.transaction(() => {});
      } catch (error) {
        writable = false;
        log.error(
          "health.store_unwritable",
          `health: the store refused a write transaction: ${error}`,
        );
      }
      const degraded = session.last_hook_failure != null || session.stalled === true;
      return {
        ok: status.admitting === true && writable,
        status: !(status.admitting === true && writable) ? "failing" : degraded ? "degraded" : "ok",
        admitting: status.admitting,
        store_writable: writable,
        stalled: session.stalled ?? false,
        oldest_pending_age_ms: session.oldest_pending_age_ms ?? null,
        pending_inputs: session.pending_inputs ?? 0,
        hook_backlog: session.hook_backlog ?? 0,
        last_hook_failure: session.last_hook_failure ?? null,
        recovered_release: status.recovered_release,
        version: VERSION,
      };
    },
  });

  // Listen for signals before announcing the port, so an early SIGTERM still drains.
  const { promise: stopped, resolve } = Promise.withResolvers<string>();
  const onSignal = (name: string) => () => resolve(name);
  Deno.addSignalListener("SIGINT", onSignal("SIGINT"));
  Deno.addSignalListener("SIGTERM", onSignal("SIGTERM"));
  const server = Deno.serve({
    hostname: host,
    port,
    onListen: ({ port }) =>
      log.info("daemon.listening", `listening on http://${host}:${port}/`, { host, port }),
  }, app.fetch);

  const signal = await stopped;
  log.info("daemon.draining", `${signal}: draining`, { signal });
  await coordinator.shutdown();
  await discord?.stop();
  await server.shutdown();
  store.close();
  log.info("daemon.drained", "drained; exiting");
  return 0;
}

/**
 * Reads `KLBR_CELL_TIMEOUT_MS`: how long one cell may run (default 10 minutes).
 *
 * @throws {KlbrError} `invalid_config` for anything but a whole number of 1,000–86,400,000 ms.
 */
export function parseCellTimeout(value: string | undefined): number {
  if (value === undefined || value === "") return 600_000;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < 1_000 || ms > 86_400_000) {
    throw new KlbrError(
      "invalid_config",
      `cannot serve: KLBR_CELL_TIMEOUT_MS must be a whole number of milliseconds from 1000 to 86400000 (got ${value})`,
    );
  }
  return ms;
}
