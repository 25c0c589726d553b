/**
 * `klbr doctor`: prints versions, the state directory's health, the skills index and the
 * model routes, and exits non-zero with one line per problem. It never makes a paid request:
 * a route is probed with `GET <url>/models` only.
 *
 * @module
 */

import { join } from "node:path";
import { readOwnerLock } from "../../store/owner_lock.ts";
import { openStore } from "../../store/store.ts";
import {
  checkSqliteVersion,
  linkedSqliteVersion,
  MIN_SQLITE_VERSION,
} from "../../store/version_guard.ts";
import { loadConfig, redactRoute, type Route } from "../config/mod.ts";
import { REPO_ROOT } from "./_repo_root.ts";
import { resolveConfigPath } from "./_state_dir.ts";
import { derivePermissionInput } from "./_launcher.ts";
import { servePermissionFlags } from "./_serve_permissions.ts";
import { isKlbrError } from "../core/mod.ts";
import { loadSkills, resolvePython, skillRoots } from "../kernel/mod.ts";

/** Options for {@linkcode runDoctor}. */
export interface DoctorOptions {
  stateDir: string;
  configPath?: string;
  /** Probe each route's `/models` (no paid request). @default {true} */
  probeRoutes?: boolean;
}

/**
 * Runs every check and prints the report; resolves with 0 when nothing is wrong, else 1.
 *
 * @example
 * ```ts
 * Deno.exit(await runDoctor({ stateDir: ".klbr" }));
 * ```
 */
export async function runDoctor(options: DoctorOptions): Promise<number> {
  const problems: string[] = [];
  const say = (line: string) => console.log(line);
  const problem = (line: string) => {
    problems.push(line);
    console.log(`problem: ${line}`);
  };
  const check = async (what: string, fn: () => Promise<void> | void) => {
    try {
      await fn();
    } catch (error) {
      problem(`${what}: ${isKlbrError(error) || error instanceof Error ? error.message : error}`);
    }
  };

  say(`deno ${Deno.version.deno}, v8 ${Deno.version.v8}, typescript ${Deno.version.typescript}`);
  const sqlite = linkedSqliteVersion();
  say(`sqlite ${sqlite} (minimum ${MIN_SQLITE_VERSION})`);
  await check("sqlite", () => checkSqliteVersion(sqlite));
  await check("python", async () => {
    const python = await resolvePython(Deno.env.get("KLBR_PYTHON") ?? "python3");
    say(`python ${python.version} at ${python.executable}`);
    const [major, minor] = python.version.split(".").map(Number);
    if (major < 3 || (major === 3 && minor < 11)) {
      throw new Error(`klbr needs Python 3.11 or newer (got ${python.version})`);
    }
  });

  say(`state ${options.stateDir}`);
  const lock = readOwnerLock(options.stateDir);
  if (lock?.alive) {
    problem(
      `owner lock held by pid ${lock.holder.pid} since ${
        new Date(lock.holder.started_at).toISOString()
      } (a daemon is running; stop it or use klbr status)`,
    );
  } else {
    await check("state", () => {
      const store = openStore(options.stateDir, { create: false, owner: false });
      say(`store ${store.path}: klbr store, schema ${store.schemaVersion}`);
      store.close();
    });
  }

  const workspace = Deno.env.get("KLBR_WORKSPACE") ?? Deno.cwd();
  const roots = skillRoots({
    workspace,
    stateDir: options.stateDir,
    skillsDir: Deno.env.get("KLBR_SKILLS_DIR"),
  });
  await check("skills", async () => {
    const skills = await loadSkills(roots);
    say(
      `skills ${
        skills.payload.revision.slice(0, 12)
      } from ${roots.builtinRoot} and ${roots.managedRoot}`,
    );
    for (const skill of skills.offered) say(`  skill ${skill.id}`);
    for (const refused of skills.payload.refused) {
      say(`  refused ${refused.id} in ${refused.root}: ${refused.reason}`);
    }
  });

  await check("config", async () => {
    const path = await resolveConfigPath(options.stateDir, options.configPath);
    const { config, warnings } = await loadConfig(path, { env: Deno.env.toObject() });
    say(`config ${path ?? "(defaults)"}`);
    for (const warning of warnings) say(`  warning: ${warning}`);
    for (const route of Object.values(config.routes) as Route[]) {
      const shown = redactRoute(route);
      const reach = options.probeRoutes === false ? "not probed" : await probe(route.url);
      say(`  route ${route.name}: ${shown.url} model ${shown.model} (${reach})`);
    }
  });

  await check("permissions", async () => {
    const input = await derivePermissionInput({
      stateDir: options.stateDir,
      configPath: options.configPath,
    });
    say("daemon permissions (derived from the configuration):");
    for (const flag of servePermissionFlags(input)) say(`  ${flag}`);
    if (input.runPrograms === undefined) {
      say("  note: run is unscoped; set KLBR_RUN_PROGRAMS=git,deno,… to narrow workspace.run");
    }
  });

  await check("behaviour", async () => {
    const dir = join(REPO_ROOT, "behavior");
    const names = [];
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
    say(`behaviour ${dir}: ${names.sort().join(", ")}`);
  });

  say(problems.length === 0 ? "doctor: ok" : `doctor: ${problems.length} problem(s)`);
  return problems.length === 0 ? 0 : 1;
}

async function probe(url: string): Promise<string> {
  try {
    const response = await fetch(`${url.replace(/\/$/, "")}/models`, {
      signal: AbortSignal.timeout(2000),
    });
    await response.body?.cancel();
    return `reachable, HTTP ${response.status}`;
  } catch (error) {
    return `unreachable: ${error instanceof Error ? error.message.slice(0, 80) : error}`;
  }
}
