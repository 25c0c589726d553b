/**
 * What the daemon says once it listens: one block with the address, the UI link with the
 * token, each model route and whether it answered a quick `GET <url>/models`, the workspace
 * and the sandbox mode — and the address file the operator commands read. The probes are
 * bounded, and the daemon already serves while they run.
 *
 * @module
 */

import type { Route } from "../config/mod.ts";
import { KlbrError, type Logger } from "../core/mod.ts";
import type { SandboxStatus } from "../kernel/mod.ts";
import { ownOrigin, writeDaemonAddress } from "../lanes/mod.ts";
import { probeRoute } from "../model/mod.ts";

/** One route as the block shows it. */
export interface RouteProbe {
  name: string;
  url: string;
  model: string;
  /** `null` when it answered; else why not. */
  problem: string | null;
  /** The HTTP status it answered with. */
  status?: number;
}

/** What {@linkcode announceStart} reports. */
export interface StartFacts {
  host: string;
  port: number;
  stateDir: string;
  token: string;
  routes: Route[];
  workspace: string;
  sandbox: SandboxStatus;
  /** The configuration file. */
  configPath: string;
  /** Whether this start wrote it (there was none: it holds the defaults). */
  configWritten: boolean;
}

/**
 * Writes the address file, probes the routes (at once, each bounded) and prints the start-up
 * block: plain lines on stdout in text format, one `daemon.ready` event in JSON format.
 */
export async function announceStart(
  facts: StartFacts,
  log: Logger,
  format: "text" | "json",
): Promise<RouteProbe[]> {
  await writeDaemonAddress(facts.stateDir, {
    host: facts.host,
    port: facts.port,
    pid: Deno.pid,
    started_at: Date.now(),
  });
  const distinct = [...new Set(facts.routes.map((route) => route.url))];
  const answers = new Map(
    await Promise.all(distinct.map(async (url) => [url, await probeRoute(url)] as const)),
  );
  const probes = facts.routes.map((route): RouteProbe => ({
    name: route.name,
    url: route.url,
    model: route.model,
    ...answers.get(route.url)!,
  }));
  const origin = ownOrigin({ host: facts.host, port: facts.port });
  if (format === "json") {
    log.info("daemon.ready", `ready on ${origin}/`, {
      url: `${origin}/`,
      routes: probes,
      workspace: facts.workspace,
      sandbox: facts.sandbox.mode,
      config: facts.configPath,
      config_written: facts.configWritten,
    });
  } else {
    console.log(startBlock(facts, probes, origin).join("\n"));
  }
  return probes;
}

/** The block's lines. */
function startBlock(facts: StartFacts, probes: RouteProbe[], origin: string): string[] {
  const sandbox = facts.sandbox.mode === "bwrap"
    ? `bubblewrap (network ${facts.sandbox.network ? "allowed" : "off"})`
    : `NONE: the workbench runs unconfined (${facts.sandbox.reason})`;
  const lines = [
    "",
    `klbr is listening on ${origin}/`,
    `  open       ${origin}/#token=${facts.token}`,
    `             (deno task klbr url prints it again; keep it private)`,
    ...serverLines(probes).map((line, i) => `  ${i === 0 ? "model" : "     "}      ${line}`),
    `  config     ${facts.configPath}${
      facts.configWritten ? ' (written now with the defaults: edit llm "main" there)' : ""
    }`,
    `  workspace  ${facts.workspace}`,
    `  sandbox    ${sandbox}`,
  ];
  const main = probes.find((p) => p.name === "main");
  if (main !== undefined && main.problem !== null) {
    lines.push(
      `  next       start an OpenAI-compatible server at ${main.url}, or point llm "main" at one in ${facts.configPath}, then restart; messages wait until it answers`,
    );
  }
  return [...lines, ""];
}

/**
 * One line per server: the roles that share a URL and model are named together (undeclared
 * roles copy `main`), so one server is one line.
 */
function serverLines(probes: RouteProbe[]): string[] {
  const servers = new Map<string, RouteProbe[]>();
  for (const probe of probes) {
    const key = `${probe.url} ${probe.model}`;
    servers.set(key, [...(servers.get(key) ?? []), probe]);
  }
  return [...servers.values()].map((roles) => {
    const [p] = roles;
    return `${roles.map((r) => r.name).join(", ")}: ${p.url} model "${p.model}" — ${
      p.problem === null ? `answered (HTTP ${p.status})` : `NOT ANSWERING: ${p.problem}`
    }`;
  });
}

/**
 * Refuses a port something already listens on, before the daemon touches its state.
 *
 * @throws {KlbrError} `port_in_use` naming the port and the fix.
 */
export function requireFreePort(host: string, port: number): void {
  if (port === 0) return;
  try {
    Deno.listen({ hostname: host, port }).close();
  } catch (cause) {
    if (cause instanceof Deno.errors.AddrInUse) throw portInUse(host, port, cause);
    // Anything else (a permission) is for the real listen to report.
  }
}

/** The `port_in_use` refusal for `host:port`. */
export function portInUse(host: string, port: number, cause: unknown): KlbrError {
  return new KlbrError(
    "port_in_use",
    `cannot serve: ${host}:${port} is already in use (another klbr daemon? deno task klbr status asks it); start with --port N for another port, or --port 0 for any free one (got ${
      cause instanceof Error ? cause.message : cause
    })`,
    { cause },
  );
}
