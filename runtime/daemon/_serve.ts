/**
 * `klbr daemon` (what `serve` starts): reads its settings, starts its parts, serves HTTP and
 * the v2 socket on loopback, and drains on SIGINT or SIGTERM — admission stops, accepted
 * turns finish, workbench groups die, exit 0.
 *
 * @module
 */

import { resolve as resolvePath } from "node:path";
import type { Route, ServeOptions } from "../config/mod.ts";
import { createLogger, KlbrError, type Logger } from "../core/mod.ts";
import {
  type AppFetch,
  createApp,
  ensureSessionKey,
  type ListenAddress,
  listenApp,
  type Listening,
  OperatorAuth,
  readOperatorToken,
  removeDaemonAddress,
} from "../lanes/mod.ts";
import { announceStart, portInUse, requireFreePort } from "./_announce.ts";
import { startBackupSchedule } from "../backup/mod.ts";
import { REPO_ROOT } from "../setup/mod.ts";
import { keepAttachment, readArtifact } from "../../store/tables/artifacts.ts";
import { healthReport } from "./_health.ts";
import type { Hono } from "hono";
import { readServeSettings, type ServeSettings } from "./_serve_settings.ts";
import { type DaemonParts, startDaemon, stopStarted } from "./_start.ts";

/**
 * Runs the daemon until a signal drains it; resolves with the exit code.
 *
 * Once it listens, `<state>/daemon.json` names its address (removed again at a clean exit)
 * and one start-up block says where it is and whether each model route answered.
 *
 * @throws {KlbrError} `not_loopback` for a non-loopback host, `invalid_config` for a bad
 * configuration, `port_in_use` for a taken port — each before anything listens or is written;
 * `state_unusable` naming a state file it cannot read or write (`session.key`, `daemon.json`),
 * after stopping what it started.
 */
export async function serve(options: ServeOptions): Promise<number> {
  const read = await readServeSettings(options);
  requireFreePort(read.host, read.port);
  const settings = await handedOver(read, options.handoff);
  const log = createLogger({ format: options.logFormat });
  for (const warning of settings.warnings) log.warn("config.warning", `config: ${warning}`);
  // The UI's staleness check reads only the checkout: it runs while the parts start.
  const ui = builtUi(log);
  const daemon = await startDaemon(settings, log);
  const address: ListenAddress = { host: settings.host, port: settings.port };
  // Listen for signals before announcing the port, so an early SIGTERM still drains.
  const { promise: stopped, resolve } = Promise.withResolvers<string>();
  const onInt = () => resolve("SIGINT");
  const onTerm = () => resolve("SIGTERM");
  Deno.addSignalListener("SIGINT", onInt);
  Deno.addSignalListener("SIGTERM", onTerm);
  const { host } = settings;
  let server: Listening | undefined;
  try {
    const token = await readOperatorToken(settings.stateDir);
    const sessionKey = await ensureSessionKey(settings.stateDir);
    const app = daemonApp(settings, daemon, { address, token, sessionKey, log, uiDir: await ui });
    server = await listen(settings, address, app.fetch as AppFetch);
    await announceStart(
      {
        host,
        port: address.port,
        stateDir: settings.stateDir,
        token,
        routes: Object.values(settings.config.routes) as Route[],
        apiKeys: settings.apiKeys,
        workspace: resolvePath(settings.workspace),
        confinement: daemon.confinement,
        configPath: settings.configPath,
        configWritten: settings.configWritten,
        discord: daemon.discord,
      },
      log,
      options.logFormat ?? "text",
    );
  } catch (error) {
    // Nothing of a start that cannot serve outlives it: no listener, worker, cgroup or owner
    // lock (`daemon.json` cannot be written once it listens, say).
    Deno.removeSignalListener("SIGINT", onInt);
    Deno.removeSignalListener("SIGTERM", onTerm);
    if (server !== undefined) await closeServer(server, log);
    await stopStarted(daemon, log);
    throw error;
  }
  log.info("daemon.listening", `listening on http://${host}:${address.port}/`, {
    host,
    port: address.port,
  });
  const backups = startBackupSchedule({
    stateDir: settings.stateDir,
    config: settings.config.backup,
    log,
  });

  const signal = await stopped;
  log.info("daemon.draining", `${signal}: draining`, { signal });
  // The shutdown is recorded as what caused it: the signal, not an operator.
  await daemon.coordinator.shutdown(settings.drainGraceMs, `daemon shutdown (${signal})`);
  await daemon.discord?.stop();
  // A backup in progress ends (and is verified) before the store closes.
  await backups?.stop();
  await closeServer(server, log);
  await daemon.confinement.close();
  daemon.store.close();
  await removeDaemonAddress(settings.stateDir);
  log.info("daemon.drained", "drained; exiting");
  return 0;
}

/**
 * The settings with the launcher's hand-over in: its interpreter, and its probe instead of
 * the daemon's own. Nothing is written before it arrives.
 */
async function handedOver(
  settings: ServeSettings,
  handoff: ServeOptions["handoff"],
): Promise<ServeSettings> {
  if (handoff === undefined) return settings;
  const { python, sandbox } = await handoff;
  return { ...settings, pythonInfo: python, sandbox };
}

/** The HTTP and lane routes of a started daemon. */
function daemonApp(
  settings: ServeSettings,
  daemon: DaemonParts,
  o: {
    address: ListenAddress;
    token: string;
    sessionKey: string;
    log: Logger;
    uiDir: string | undefined;
  },
): Hono {
  const { config } = settings;
  return createApp({
    lanes: daemon.coordinator,
    auth: new OperatorAuth({
      stateDir: settings.stateDir,
      token: o.token,
      sessionKey: o.sessionKey,
      viewWithoutToken: config.lanes.view_without_token,
    }),
    address: () => o.address,
    limits: {
      maxConnections: config.lanes.max_connections,
      maxPendingHello: config.lanes.max_pending_hello,
      helloTimeoutMs: config.lanes.hello_timeout_ms,
      maxUnackedInputs: config.lanes.max_unacked_inputs,
    },
    log: o.log,
    uiDir: o.uiDir,
    health: () => healthReport(daemon),
    artifacts: (id, range) => readArtifact(settings.stateDir, id, range),
    attachments: {
      maxBytes: config.lanes.attachment_max_bytes,
      keep: async (data) => {
        const kept = await keepAttachment(settings.stateDir, data);
        return { artifact: kept.id, bytes: kept.bytes };
      },
    },
  });
}

/**
 * Listens on the configured address and fills in the port it got.
 *
 * @throws {KlbrError} `port_in_use` for a taken port, `invalid_config` for any other refusal.
 */
async function listen(
  settings: ServeSettings,
  address: ListenAddress,
  fetch: AppFetch,
): Promise<Listening> {
  const { host } = settings;
  try {
    const listening = await listenApp(fetch, {
      hostname: host,
      port: settings.port,
      maxSilent: settings.config.lanes.max_pending_hello,
      silentMs: settings.config.lanes.hello_timeout_ms,
    });
    address.port = listening.port;
    return listening;
  } catch (cause) {
    if ((cause as { code?: string }).code === "EADDRINUSE") {
      throw portInUse(host, settings.port, cause);
    }
    throw new KlbrError(
      "invalid_config",
      `cannot serve: cannot listen on ${host}:${settings.port} (got ${
        cause instanceof Error ? cause.message : cause
      })`,
      { cause },
    );
  }
}

/** How long the drain waits for open connections to close before the process exits. */
const SHUTDOWN_GRACE_MS = 5_000;

/**
 * Shuts the server down. A client that stopped reading holds its connection open with unsent
 * bytes; the drain does not wait for it forever.
 */
async function closeServer(server: Listening, log: Logger): Promise<void> {
  if (!(await server.close(SHUTDOWN_GRACE_MS))) {
    log.warn(
      "daemon.connections_cut",
      `connections still open after ${SHUTDOWN_GRACE_MS} ms were cut at exit`,
    );
  }
}

/** The built UI's directory, rebuilt when stale; undefined (and said) when it cannot be. */
async function builtUi(log: Logger): Promise<string | undefined> {
  try {
    const { ensureUiBuilt } = await import("../setup/mod.ts");
    return await ensureUiBuilt({ repoRoot: REPO_ROOT });
  } catch (error) {
    log.error(
      "ui.unavailable",
      `UI unavailable: ${
        error instanceof Error ? error.message : error
      }; run deno task ui:build to see why`,
    );
    return undefined;
  }
}
