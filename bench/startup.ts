/**
 * Figure 5a/5b — start-up: how long `serve` takes until `/health` answers, on a fresh state
 * directory and on a restart, against a bare `Deno.serve` started the same way. The last
 * restarted daemon also gives figure 6a's idle resident size.
 *
 * @module
 */

import { join } from "node:path";
import { REPO_ROOT, serveFlags } from "./daemon.ts";
import { freePort, type ReadyProcess, startFloorServer, startUntilReady } from "./ready_process.ts";
import { below, type BenchRow, makeRow } from "./row.ts";
import { residentBytes, workingDenoPid } from "./rss.ts";
import { summarize } from "./stats.ts";

/** Options for {@linkcode benchStartup}. */
export interface StartupOptions {
  /** A scratch directory the run may fill. */
  root: string;
  /** Restarts (and floor starts) to take the median of. */
  restarts: number;
  /** How long an idle process settles before its size is read, in ms. */
  settleMs: number;
}

/** Figure 5's rows and the idle sizes figure 6 reports. */
export interface StartupResult {
  rows: BenchRow[];
  /** Resident bytes of the idle daemon (the Deno process that serves). */
  idleDaemonBytes: number;
  /** Resident bytes of the launcher `serve` started, when it is a separate process. */
  launcherBytes: number | null;
  /** Resident bytes of the idle bare server. */
  floorBytes: number;
}

/** A first start creates the store and publishes behaviour; a restart must be quick at any size. */
const FIRST_GOAL = below(1.5, "< 1.5 s");
const RESTART_GOAL = below(0.5, "< 0.5 s");

/** Where a bench's `serve` keeps its state, config and workspace. */
export interface ServeLayout {
  stateDir: string;
  configPath: string;
  workspace: string;
  /** How long the first start, on the fresh state directory, took until `/health`, in ms. */
  firstMs: number;
}

/**
 * Lays out `<root>/<name>-state`, `-ws` and `-config.kdl` (a model route nothing answers) and
 * starts `serve` once, which creates the state directory, the store, the token and the release;
 * the layout says how long that first start took.
 *
 * @example
 * ```ts
 * const serve = await prepareServe(root, "scale");
 * const { daemon } = await restartAfterCleanStop(serve);
 * ```
 */
export async function prepareServe(root: string, name: string): Promise<ServeLayout> {
  const layout = {
    stateDir: join(root, `${name}-state`),
    configPath: join(root, `${name}-config.kdl`),
    workspace: join(root, `${name}-ws`),
  };
  await Deno.mkdir(layout.workspace, { recursive: true });
  // No model is reached while idle; the route only has to be valid.
  await Deno.writeTextFile(
    layout.configPath,
    'llm "main" {\n    url "http://127.0.0.1:9/v1"\n    model "none"\n}\n',
  );
  const first = await startServe({ ...layout, port: freePort() });
  await first.stop();
  return { ...layout, firstMs: first.readyMs };
}

/** Starts `main.ts serve` exactly as `deno task serve` does, on `port`. */
function startServe(
  options: { stateDir: string; configPath: string; workspace: string; port: number },
): Promise<ReadyProcess> {
  return startUntilReady(Deno.execPath(), [
    "run",
    ...serveFlags(),
    join(REPO_ROOT, "main.ts"),
    "serve",
    "--state",
    options.stateDir,
    "--config",
    options.configPath,
    "--port",
    String(options.port),
  ], {
    port: options.port,
    cwd: REPO_ROOT,
    env: {
      KLBR_WORKSPACE: options.workspace,
      KLBR_SKILLS_DIR: join(REPO_ROOT, "skills"),
      NO_COLOR: "1",
    },
  });
}

/**
 * Starts `serve` on `serve`'s state once and stops it, then starts it again: the restart an
 * owner makes after a clean stop. The first start after an outside writer (a seeder) checks the
 * whole store file; the clean stop's mark lets the restart skip that check. Returns the
 * restarted server and how long the first start took, in ms.
 *
 * @example
 * ```ts
 * const { daemon, firstMs } = await restartAfterCleanStop(serve);
 * ```
 */
export async function restartAfterCleanStop(
  serve: ServeLayout,
): Promise<{ daemon: ReadyProcess; firstMs: number }> {
  const first = await startServe({ ...serve, port: freePort() });
  await first.stop();
  const daemon = await startServe({ ...serve, port: freePort() });
  return { daemon, firstMs: first.readyMs };
}

/**
 * Measures figure 5a/5b and the idle sizes of figure 6a.
 *
 * @throws {KlbrError} `worker_failed` or `worker_timeout` when a server does not start.
 */
export async function benchStartup(options: StartupOptions): Promise<StartupResult> {
  const serve = await prepareServe(options.root, "startup");
  const warm: number[] = [];
  let idleDaemonBytes = 0;
  let launcherBytes: number | null = null;
  for (let i = 0; i < options.restarts; i++) {
    const daemon = await startServe({ ...serve, port: freePort() });
    try {
      warm.push(daemon.readyMs);
      if (i === options.restarts - 1) {
        await settle(options.settleMs);
        const pid = await workingDenoPid(daemon.pid);
        idleDaemonBytes = await residentBytes(pid);
        if (pid !== daemon.pid) launcherBytes = await residentBytes(daemon.pid);
      }
    } finally {
      await daemon.stop();
    }
  }

  const floor: number[] = [];
  let floorBytes = 0;
  for (let i = 0; i < options.restarts; i++) {
    const server = await startFloorServer();
    try {
      floor.push(server.readyMs);
      if (i === options.restarts - 1) {
        await settle(options.settleMs);
        floorBytes = await residentBytes(server.pid);
      }
    } finally {
      await server.stop();
    }
  }

  const peer = { label: "bare Deno.serve", value: summarize(floor).p50 / 1000 };
  const launcher = launcherBytes === null
    ? ""
    : `; serve is a launcher here: the daemon is its child Deno process`;
  return {
    rows: [
      makeRow({
        id: "5a",
        figure: "serve answers /health, first start (fresh state dir)",
        unit: "s",
        value: serve.firstMs / 1000,
        peer,
        goal: FIRST_GOAL,
        note: `from spawning \`deno run <serve flags> main.ts serve\` to the first 200 from ` +
          `/health, polled every 5 ms; creates the store and publishes behavior/${launcher}`,
      }),
      makeRow({
        id: "5b",
        figure: `serve answers /health, restart (p50 of ${warm.length})`,
        unit: "s",
        value: summarize(warm).p50 / 1000,
        peer,
        goal: RESTART_GOAL,
        note: `the same state dir again; the peer is a bare Deno.serve answering /health, ` +
          `started and polled the same way (p50 of ${floor.length})`,
      }),
    ],
    idleDaemonBytes,
    launcherBytes,
    floorBytes,
  };
}

function settle(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
