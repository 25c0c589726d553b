/**
 * `klbr doctor`'s checks (loaded by `_doctor.ts` when doctor runs): prints versions, the state directory's health, the skills index, the model
 * routes, the Discord configuration, the workbench package (imported with the interpreter the
 * daemon will use) and the active release's hooks (each imported as a hook worker loads it),
 * and exits non-zero with one line per problem; a warning (a route other than `main` not
 * answering) is printed and counted but leaves the exit code 0, and a running daemon is
 * reported as running. It never makes a paid request: a route is probed with
 * `GET <url>/models` only, and with `--probe` the Discord token with one `GET /users/@me` and
 * the gateway with one connection that waits for Hello (a refused token and an unreachable
 * Discord are told apart).
 *
 * @module
 */

import { join } from "node:path";
import { readOwnerLock } from "../../store/owner_lock.ts";
import { getRelease } from "../../store/tables/releases.ts";
import { DEFAULT_SESSION, getSession } from "../../store/tables/sessions.ts";
import { openStore } from "../../store/store.ts";
import {
  checkSqliteVersion,
  linkedSqliteVersion,
  MIN_SQLITE_VERSION,
} from "../../store/version_guard.ts";
import { loadConfig, redactRoute, resolveApiKey, type Route, Secret } from "../config/mod.ts";
import { later } from "./_later.ts";
import { REPO_ROOT } from "./_repo_root.ts";
import {
  CONFIG_FILE,
  EVERY_VARIABLE_SET,
  loadStateConfig,
  resolveConfigPath,
} from "./_state_dir.ts";
import { derivePermissionInput } from "./_launcher.ts";
import { servePermissionFlags } from "./_serve_permissions.ts";
import { checkWorkbench } from "./_doctor_workbench.ts";
import { isKlbrError } from "../core/mod.ts";
import { findDaemon } from "../lanes/mod.ts";
import { loadSkills, resolvePython, skillRoots } from "../kernel/mod.ts";
import { reportSandbox } from "./_doctor_sandbox.ts";

/** Options for {@linkcode runDoctor}. */
export interface DoctorOptions {
  stateDir: string;
  configPath?: string;
  /** Probe each route's `/models` (no paid request). @default {true} */
  probeRoutes?: boolean;
  /** Check the Discord token with one `GET /users/@me`. @default {false} */
  probeDiscord?: boolean;
  /** The checkout whose `workbench/` and `behavior/` are checked. @default {REPO_ROOT} */
  repoRoot?: string;
  /** Where report lines go. @default console.log */
  print?: (line: string) => void;
  /** The port the daemon's permissions are derived for (`--port`). @default {8765} */
  port?: number;
}

/**
 * Runs every check and prints the report; resolves with 0 when nothing is a problem (warnings
 * allowed), else 1.
 *
 * @example
 * ```ts
 * Deno.exit(await runDoctor({ stateDir: ".klbr" }));
 * ```
 */
export async function runDoctor(options: DoctorOptions): Promise<number> {
  const report = newReport(options.print ?? ((line: string) => console.log(line)));
  const { say, check } = report;
  const repoRoot = options.repoRoot ?? REPO_ROOT;
  const python = Deno.env.get("KLBR_PYTHON") ?? "python3";

  say(`deno ${Deno.version.deno}, v8 ${Deno.version.v8}, typescript ${Deno.version.typescript}`);
  const sqlite = linkedSqliteVersion();
  say(`sqlite ${sqlite} (minimum ${MIN_SQLITE_VERSION})`);
  await check("sqlite", () => checkSqliteVersion(sqlite));
  await check("python", async () => {
    const found = await resolvePython(python);
    // resolvePython refuses a Python older than 3.11 itself.
    say(`python ${found.version} at ${found.executable}`);
  });
  const activeRelease = await checkState(report, options.stateDir);
  await check("skills", () => checkSkills(report, options.stateDir));
  await check("config", () => checkConfig(report, options));
  await check("discord", () => checkDiscord(report, options));
  await check("permissions", () => checkPermissions(report, options));
  await check("behaviour", async () => {
    const dir = join(repoRoot, "behavior");
    const names = [];
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
    say(`behaviour ${dir}: ${names.sort().join(", ")}`);
  });
  // The package with the daemon's interpreter, then the hooks a hook worker would load: the
  // active release's, or the checkout's when no store could be read.
  await check("workbench", async () => {
    const release = activeRelease ??
      { label: "the checkout's behavior/", path: join(repoRoot, "behavior") };
    const checked = await checkWorkbench(python, repoRoot, release);
    for (const line of checked.lines) say(line);
    for (const line of checked.problems) report.problem(line);
  });

  const { problems, warnings } = report;
  const warned = warnings.length === 0 ? "" : `, ${warnings.length} warning(s)`;
  say(
    problems.length === 0
      ? `doctor: ok${warned}`
      : `doctor: ${problems.length} problem(s)${warned}`,
  );
  return problems.length === 0 ? 0 : 1;
}

/** What doctor has found so far, and how it says each kind of line. */
interface DoctorReport {
  problems: string[];
  warnings: string[];
  say: (line: string) => void;
  problem: (line: string) => void;
  warn: (line: string) => void;
  /** Runs one check; what it throws is a problem named for `what`. */
  check: (what: string, fn: () => Promise<void> | void) => Promise<void>;
}

function newReport(print: (line: string) => void): DoctorReport {
  // What one cause makes several checks throw (an unreadable configuration) is one problem.
  const thrown = new Map<string, string>();
  const report: DoctorReport = {
    problems: [],
    warnings: [],
    say: print,
    problem: (line) => {
      report.problems.push(line);
      print(`problem: ${line}`);
    },
    warn: (line) => {
      report.warnings.push(line);
      print(`warning: ${line}`);
    },
    check: async (what, fn) => {
      try {
        await fn();
      } catch (error) {
        const message = String(
          isKlbrError(error) || error instanceof Error ? error.message : error,
        );
        const first = thrown.get(message);
        if (first !== undefined) return print(`${what}: not checked (the ${first} problem above)`);
        thrown.set(message, what);
        report.problem(`${what}: ${message}`);
      }
    },
  };
  return report;
}

/** The state directory: a running daemon named (not a problem), else the store read. */
async function checkState(
  report: DoctorReport,
  stateDir: string,
): Promise<{ label: string; path: string } | null> {
  const { say } = report;
  say(`state ${stateDir}`);
  const lock = readOwnerLock(stateDir);
  if (lock?.alive) {
    // Not a problem: the daemon owns the store, so doctor leaves it alone and says where it is.
    const at = await findDaemon(stateDir).then(
      (d) => ` on http://${d.host}:${d.port}/`,
      () => "",
    );
    say(
      `daemon running: pid ${lock.holder.pid}${at} since ${
        new Date(lock.holder.started_at).toISOString()
      }; it owns the store (deno task klbr status asks it)`,
    );
    return null;
  }
  let activeRelease: { label: string; path: string } | null = null;
  await report.check("state", () => {
    const store = openStore(stateDir, { create: false, owner: false });
    try {
      say(`store ${store.path}: klbr store, schema ${store.schemaVersion}`);
      const active = getSession(store, DEFAULT_SESSION)?.activeRelease;
      const release = active ? getRelease(store, active) : undefined;
      if (release) {
        activeRelease = { label: `active release ${release.id.slice(0, 12)}`, path: release.path };
      }
    } finally {
      store.close();
    }
  });
  return activeRelease;
}

async function checkSkills(report: DoctorReport, stateDir: string): Promise<void> {
  const roots = skillRoots({
    repoRoot: REPO_ROOT,
    stateDir,
    skillsDir: Deno.env.get("KLBR_SKILLS_DIR"),
  });
  const skills = await loadSkills(roots);
  report.say(
    `skills ${
      skills.payload.revision.slice(0, 12)
    } from ${roots.builtinRoot} and ${roots.managedRoot}`,
  );
  for (const skill of skills.offered) report.say(`  skill ${skill.id}`);
  for (const refused of skills.payload.refused) {
    report.say(`  refused ${refused.id} in ${refused.root}: ${refused.reason}`);
  }
}

async function checkConfig(report: DoctorReport, options: DoctorOptions): Promise<void> {
  const path = await resolveConfigPath(options.stateDir, options.configPath);
  const { config, warnings } = await loadStateConfig(path, { env: Deno.env.toObject() });
  report.say(
    `config ${
      path ??
        `(none yet: the defaults, which the first serve writes to ${
          join(options.stateDir, CONFIG_FILE)
        })`
    }`,
  );
  for (const warning of warnings) report.say(`  warning: ${warning}`);
  await reportRoutes(report, Object.values(config.routes) as Route[], {
    probe: options.probeRoutes !== false,
    configPath: path,
  });
}

async function checkPermissions(report: DoctorReport, options: DoctorOptions): Promise<void> {
  const input = await derivePermissionInput({
    stateDir: options.stateDir,
    configPath: options.configPath,
    port: options.port,
  });
  report.say("daemon permissions (derived from the configuration):");
  for (const flag of servePermissionFlags(input)) report.say(`  ${flag}`);
  if (input.runPrograms === undefined && input.sandbox.mode !== "bwrap") {
    report.say("  note: run is unscoped; set KLBR_RUN_PROGRAMS=git,deno,… to narrow workspace.run");
  }
  const path = await resolveConfigPath(options.stateDir, options.configPath);
  const { config } = await loadConfig(path, { env: EVERY_VARIABLE_SET });
  await reportSandbox(input, config, { say: report.say, problem: report.problem });
}

/**
 * Prints each route and probes it (each distinct URL once): `main` not answering is a problem,
 * since no turn can run, with the fix named; another role not answering is a warning.
 */
async function reportRoutes(
  out: DoctorReport,
  routes: Route[],
  { probe, configPath }: { probe: boolean; configPath: string | undefined },
): Promise<void> {
  const { modelNote, probeRoute } = await later("../model/mod.ts");
  const answers = new Map<string, ReturnType<typeof probeRoute>>();
  const where = configPath ?? "a configuration file (deno task init writes one)";
  const reported = new Set<string>();
  // The roles that share a server (undeclared roles copy main) are one line.
  const servers = new Map<string, Route[]>();
  for (const route of routes) {
    const key = `${route.url} ${route.model}`;
    servers.set(key, [...(servers.get(key) ?? []), route]);
  }
  for (const [route, ...others] of servers.values()) {
    const shown = redactRoute(route);
    const names = [route, ...others].map((r) => r.name).join(", ");
    if (!probe) {
      out.say(`  route ${names}: ${shown.url} model ${shown.model} (not probed)`);
      continue;
    }
    if (!answers.has(route.url)) {
      const apiKey = resolveApiKey(route, Deno.env.toObject());
      answers.set(route.url, probeRoute(route.url, { timeoutMs: 2000, apiKey }));
    }
    const answer = await answers.get(route.url)!;
    const reach = answer.problem === null
      ? `reachable, HTTP ${answer.status}`
      : `unreachable: ${answer.problem}`;
    out.say(`  route ${names}: ${shown.url} model ${shown.model} (${reach})`);
    const note = modelNote(route.model, answer);
    if (note !== null) {
      out.warn(`route ${names}: ${note}; set model of llm "${route.name}" to one of them`);
    }
    // A role at main's URL with another model was reported with main.
    if (answer.problem === null || reported.has(route.url)) continue;
    reported.add(route.url);
    const line = `route ${names}: the model at ${shown.url} is not answering (${answer.problem})`;
    if (route.name === "main") {
      out.problem(
        `${line}; start an OpenAI-compatible server there, or point llm "main" at one in ${where}`,
      );
    } else out.warn(`${line}; it runs ${ROLE_USES[route.name] ?? "its calls"}`);
  }
}

const ROLE_USES: Record<string, string> = {
  fast: "policy hooks' model calls",
  long: "compaction of long histories",
};

/** The names of the gateway intents klbr asks for. */
const INTENT_NAMES: [number, string][] = [
  [1 << 0, "GUILDS"],
  [1 << 9, "GUILD_MESSAGES"],
  [1 << 12, "DIRECT_MESSAGES"],
  [1 << 15, "MESSAGE_CONTENT"],
];

/**
 * Prints the Discord configuration; with `--probe`, checks the token and reaches the gateway.
 * A missing token variable is reported here, by name.
 */
async function checkDiscord(report: DoctorReport, options: DoctorOptions): Promise<void> {
  const { say, problem } = report;
  const path = await resolveConfigPath(options.stateDir, options.configPath);
  const discord = (await loadStateConfig(path, { env: EVERY_VARIABLE_SET })).config.discord;
  if (discord === undefined) return say("discord off (no discord node in the configuration)");
  const { probeDiscord, GATEWAY_INTENTS } = await later("../discord/mod.ts");
  const token = Deno.env.get(discord.token_env);
  const intents = INTENT_NAMES.filter(([bit]) => (GATEWAY_INTENTS & bit) !== 0).map(([, n]) => n);
  say(`discord: token ${discord.token_env} ${token ? "is set" : "is NOT set"}`);
  say(`  channels ${discord.channels.join(", ")}`);
  say(`  direct messages ${discord.dms ? "answered" : "refused (dms #false)"}`);
  say(`  intents ${GATEWAY_INTENTS} (${intents.join(" | ")}; MESSAGE_CONTENT is privileged)`);
  say(`  api ${discord.api_url}, gateway ${discord.gateway_url}`);
  say(
    `  send timeout ${discord.send_timeout_ms} ms, nonce window ${discord.nonce_window_ms} ms, attachments up to ${discord.attachment_max_bytes} bytes, backfill up to ${discord.backfill_max_messages} messages a channel`,
  );
  if (!token) return problem(`discord: environment variable ${discord.token_env} is not set`);
  if (options.probeDiscord !== true) {
    return say("  token not probed (doctor --probe checks it with GET /users/@me)");
  }
  const { lines, problems } = await probeDiscord(discord, { token: new Secret(token) });
  lines.forEach(say);
  problems.forEach(problem);
}
