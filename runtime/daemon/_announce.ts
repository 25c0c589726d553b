/**
 * What the daemon says once it listens: one block with the address, the UI link with the
 * token, each model route and whether it answered a quick `GET <url>/models`, the workspace,
 * the sandbox mode and Discord's state when it is configured — and the address file the operator commands read. The probes are
 * bounded, and the daemon already serves while they run.
 *
 * @module
 */

import type { Route } from "../config/mod.ts";
import { KlbrError, type Logger } from "../core/mod.ts";
import { type Confinement, describeConfinement } from "../sandbox/mod.ts";
import { ownOrigin, writeDaemonAddress } from "../lanes/mod.ts";
import { modelNote, probeRoute } from "../model/mod.ts";
import { describeDiscord, type DiscordStatus } from "../discord/mod.ts";

/** One route as the block shows it. */
export interface RouteProbe {
  name: string;
  url: string;
  model: string;
  /** `null` when it answered; else why not. */
  problem: string | null;
  /** The HTTP status it answered with. */
  status?: number;
  /** Set when the server lists its models and this route's model is not among them. */
  note?: string;
}

/** What {@linkcode announceStart} reports. */
export interface StartFacts {
  host: string;
  port: number;
  stateDir: string;
  token: string;
  routes: Route[];
  /** Each route's key by route name, for the probe's `GET /models`. */
  apiKeys: Map<string, string | undefined>;
  workspace: string;
  /** How children are confined: the sandbox, a cell's privileges, limits, self-edit. */
  confinement: Pick<
    Confinement,
    "status" | "cell" | "limits" | "protect" | "selfEdit" | "selfInWorkspace"
  >;
  /** The configuration file. */
  configPath: string;
  /** Whether this start wrote it (there was none: it holds the defaults). */
  configWritten: boolean;
  /** The Discord transport, when the configuration has a `discord` node. */
  discord?: { status(): DiscordStatus } | undefined;
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
  // One probe per URL, with the key of the first route that names it.
  const keyed = new Map(facts.routes.toReversed().map((r) => [r.url, facts.apiKeys.get(r.name)]));
  const answers = new Map(
    await Promise.all(
      [...keyed].map(async ([url, apiKey]) => [url, await probeRoute(url, { apiKey })] as const),
    ),
  );
  const probes = facts.routes.map((route): RouteProbe => {
    const { models: _, ...answer } = answers.get(route.url)!;
    const note = modelNote(route.model, answers.get(route.url)!);
    return {
      name: route.name,
      url: route.url,
      model: route.model,
      ...answer,
      ...(note === null ? {} : { note }),
    };
  });
  const origin = ownOrigin({ host: facts.host, port: facts.port });
  if (format === "json") {
    log.info("daemon.ready", `ready on ${origin}/`, {
      url: `${origin}/`,
      routes: probes,
      workspace: facts.workspace,
      sandbox: facts.confinement.status.mode,
      confinement: Object.fromEntries(describeConfinement(facts.confinement)),
      config: facts.configPath,
      config_written: facts.configWritten,
      discord: facts.discord === undefined ? null : describeDiscord(facts.discord.status()),
    });
  } else {
    console.log(startBlock(facts, probes, origin).join("\n"));
  }
  return probes;
}

/** The block's lines. */
function startBlock(facts: StartFacts, probes: RouteProbe[], origin: string): string[] {
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
    ...describeConfinement(facts.confinement).map(([label, text]) =>
      `  ${label.padEnd(10)} ${text}`
    ),
    ...(facts.discord === undefined
      ? []
      : [`  discord    ${describeDiscord(facts.discord.status())}`]),
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
      p.problem === null
        ? `answered (HTTP ${p.status})${p.note === undefined ? "" : `, but ${p.note}`}`
        : `NOT ANSWERING: ${p.problem}`
    }`;
  });
}
