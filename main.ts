/**
 * The klbr command line: `init | doctor | serve (default) | status | reset | compact | drain |
 * stop | resume | activate | jobs | cancel-job | cancel-cell | rollback | maintain | candidates | trace |
 * frames | context | search | budget | example`.
 *
 * @module
 */

import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { DEFAULT_PORT, isKlbrError, KlbrError, LogFormat } from "./runtime/core/mod.ts";

/**
 * Loads a module of this checkout when a command needs it. The specifier is computed on
 * purpose: Deno loads every module a literal `import("…")` names before the program starts
 * (the whole daemon, doctor and operator graph, about 0.2 s here), though one command needs
 * only its own part. The `typeof import` keeps the types and is not loaded.
 */
function load<K extends keyof Modules>(name: K): Promise<Modules[K]> {
  return import(new URL(`./runtime/${name}/mod.ts`, import.meta.url).href);
}

/** The faces {@linkcode load} loads. */
interface Modules {
  setup: typeof import("./runtime/setup/mod.ts");
  daemon: typeof import("./runtime/daemon/mod.ts");
  operator: typeof import("./runtime/operator/mod.ts");
  lanes: typeof import("./runtime/lanes/mod.ts");
  backup: typeof import("./runtime/backup/mod.ts");
  service: typeof import("./runtime/service/mod.ts");
}

const USAGE = `usage: klbr [command] [options]

commands:
  serve                 start the daemon under permissions derived from the configuration (default)
  daemon                run the daemon in this process (serve starts it this way)
  init                  create the state directory
  doctor                check versions, state, skills, configuration and each model route
  doctor-checks         run doctor's checks in this process (doctor starts them this way,
                        with the network the configuration needs)
  example               run the no-network workbench demonstration
  url                   print the UI's address with the operator token (keep it private)
  backup <dir>          copy the state directory into <dir>, consistently, while the daemon runs
  restore <dir>         restore a backup into the state directory (never over a live one)
  token rotate          replace the operator token; old tokens, sessions and cookies are refused
  service install       write a systemd user unit that runs serve with these --state, --config,
                        --port and KLBR_WORKSPACE (--system: a system unit); print how to enable it
  service uninstall     remove that unit (--system: the system unit)
  status [session]      operator: show the runtime's state
  reset <session>       operator: replace the kernel (heap state is not restored)
  compact <session>     operator: compact the session's context
  repair <session>      operator: rewrite the context from the records (a server refuses it)
  drain <session>       operator: finish accepted work, then stop
  stop <session>        operator: stop the session's work now
  resume <session>      operator: take work again after stop or drain (no restart needed)
  activate <session> <epoch> <release-path>
                        operator: switch behaviour by epoch compare-and-swap
  jobs [session]        operator: list jobs and timers with their states, and the budgets
  cancel-job <job-id>   operator: cancel a job (its process group is killed)
  cancel-cell <cell-id> [session]
                        operator: cancel one running cell; its turn goes on
  rollback <session>    operator: return to the last good behaviour release
  maintain <session> [reason]
                        operator: start a maintenance turn (it loads the maintenance skill)
  candidates <session>  operator: show failed behaviour candidates with their diagnostics
  trace <session> <frame-id|trace-id>
                        operator: show hook invocation traces
  frames <session>      operator: the newest frames with their ids (for trace)
  context <session>     operator: what the agent remembers: the summary, the items the next
                        request carries with their tokens, what is left out and why
  search <session> <words>
                        operator: search the session's history (as a cell's history.search)
  budget [session] [--reset] [--raise N]
                        operator: show the hourly model budgets; --reset starts the hour's
                        windows again now (a paused agent goes on), --raise N sets the hourly
                        request limit to N until the daemon stops

options:
  --state DIR           state directory (default ./.klbr, or KLBR_STATE_DIR)
  --config FILE         KDL configuration (default <state>/config.kdl, or KLBR_CONFIG)
  --host HOST           serve: loopback address to bind (default 127.0.0.1)
  --port PORT           serve: port (default ${DEFAULT_PORT}, 0 for any free one); doctor: the
                        port the printed permissions are for; url, operator commands and token
                        rotate: the daemon's port (default: the one <state>/daemon.json names)
  --json                operator commands, backup, restore: print JSON (else text)
  --probe               doctor: check the Discord token with one GET /users/@me
  --replace             restore: move a stopped state directory aside instead of refusing
  --reset, --raise N    budget: lift a spent hour (see budget above)
  --system              service: a system unit in /etc/systemd/system instead of the user's
  --log-format FORMAT   serve: text (default) or json, one object a line
  -h, --help            show this help
`;

const OPTIONS = {
  state: { type: "string" },
  config: { type: "string" },
  host: { type: "string" },
  port: { type: "string" },
  json: { type: "boolean", default: false },
  probe: { type: "boolean", default: false },
  replace: { type: "boolean", default: false },
  reset: { type: "boolean", default: false },
  raise: { type: "string" },
  system: { type: "boolean", default: false },
  "log-format": { type: "string" },
  python: { type: "string" },
  "python-home": { type: "string" },
  handoff: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

/**
 * Reads the command line; an unknown option, a missing value or a value given to a switch is one
 * `usage` error naming it.
 *
 * @throws {KlbrError} `usage`.
 */
function parseCommandLine(args: string[]) {
  try {
    return parseArgs({ args, allowPositionals: true, options: OPTIONS });
  } catch (error) {
    const code = (error as { code?: string }).code ?? "";
    if (!code.startsWith("ERR_PARSE_ARGS")) throw error;
    const message = String((error as Error).message);
    const option = /'(-[^' ]+)/.exec(message)?.[1] ?? "?";
    const what = code === "ERR_PARSE_ARGS_UNKNOWN_OPTION"
      ? `there is no option ${option}`
      : /does not take an argument/.test(message)
      ? `${option} takes no value (give ${option} alone)`
      : `${option} needs a value`;
    throw new KlbrError(
      "usage",
      `cannot read the command line: ${what}; deno task klbr --help lists the options (got ${
        args.join(" ")
      })`,
    );
  }
}

/**
 * Reads `--port`: a whole number from 0 (any free port) to 65535.
 *
 * @throws {KlbrError} `usage` for anything else.
 */
function portOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (Number.isInteger(port) && port <= 65535) return port;
  throw new KlbrError(
    "usage",
    `cannot use --port: give a whole number from 1 to 65535, or 0 for any free port (got ${
      JSON.stringify(value)
    })`,
  );
}

/** Each command's positional arguments: at least, at most, and the usage line naming them. */
const ARITY: Record<string, readonly [min: number, max: number, usage: string]> = {
  serve: [0, 0, "serve [--state DIR] [--config FILE] [--port N]"],
  daemon: [0, 0, "daemon (serve starts it)"],
  init: [0, 0, "init [--state DIR]"],
  doctor: [0, 0, "doctor [--state DIR] [--probe]"],
  "doctor-checks": [0, 0, "doctor-checks (doctor starts it)"],
  example: [0, 0, "example"],
  url: [0, 0, "url [--state DIR]"],
  backup: [1, 1, "backup <dir>"],
  restore: [1, 1, "restore <dir> [--replace]"],
  token: [1, 1, "token rotate"],
  service: [1, 1, "service install|uninstall [--system]"],
  status: [0, 1, "status [session]"],
  jobs: [0, 1, "jobs [session]"],
  reset: [1, 1, "reset <session>"],
  compact: [1, 1, "compact <session>"],
  repair: [1, 1, "repair <session>"],
  budget: [0, 1, "budget [session] [--reset] [--raise N]"],
  drain: [1, 1, "drain <session>"],
  stop: [1, 1, "stop <session>"],
  resume: [1, 1, "resume <session>"],
  rollback: [1, 1, "rollback <session>"],
  candidates: [1, 1, "candidates <session>"],
  activate: [3, 3, "activate <session> <epoch> <release-path>"],
  "cancel-job": [1, 1, "cancel-job <job-id>"],
  "cancel-cell": [1, 2, "cancel-cell <cell-id> [session]"],
  maintain: [1, Infinity, "maintain <session> [reason]"],
  trace: [2, 2, "trace <session> <frame-id|trace-id>"],
  frames: [1, 1, "frames <session>"],
  context: [1, 1, "context <session>"],
  search: [2, Infinity, "search <session> <words>"],
};

/**
 * Refuses an unknown command, or too few or too many arguments for one, naming its usage.
 *
 * @throws {KlbrError} `usage`.
 */
function checkArity(command: string, rest: string[]): void {
  const arity = ARITY[command];
  if (arity === undefined) {
    throw new KlbrError(
      "usage",
      `cannot run ${
        JSON.stringify(command)
      }: there is no such command; deno task klbr --help lists them (got ${command})`,
    );
  }
  const [min, max, usage] = arity;
  if (rest.length < min || rest.length > max) {
    throw new KlbrError(
      "usage",
      `cannot run ${command}: usage: klbr ${usage} (got ${rest.length} arguments${
        rest.length ? `: ${rest.join(" ")}` : ""
      })`,
    );
  }
}

/** Errors that are the caller's to fix on the command line: exit 2, like a usage error. */
const USAGE_CODES: readonly string[] = [
  "usage",
  "port_in_use",
  "no_daemon",
  "not_loopback",
  "owner_locked",
];

/** Runs the CLI with the given arguments and returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(args);
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const [command = "serve", ...rest] = positionals;
  checkArity(command, rest);
  const { readHandoff, resolveStateDir } = await load("setup");
  const stateDir = resolveStateDir(values.state);
  switch (command) {
    case "init": {
      const { describeInit, initStateDir } = await load("setup");
      const report = await initStateDir(stateDir);
      const env = Deno.env.toObject();
      const lines = await describeInit(report, { configPath: values.config, env, cwd: Deno.cwd() });
      console.log(lines.join("\n"));
      return 0;
    }
    case "doctor": {
      const { launchDoctor } = await load("setup");
      return await launchDoctor({
        stateDir,
        configPath: values.config,
        probeDiscord: values.probe,
        port: portOf(values.port),
      });
    }
    case "doctor-checks": {
      const { runDoctor } = await load("setup");
      return await runDoctor({
        stateDir,
        configPath: values.config,
        probeDiscord: values.probe,
        port: portOf(values.port),
      });
    }
    case "serve": {
      const { launchDaemon } = await load("setup");
      return await launchDaemon({
        stateDir,
        configPath: values.config,
        host: values.host,
        port: portOf(values.port),
        logFormat: logFormat(values["log-format"]),
      });
    }
    case "daemon": {
      // serve's launcher hands the interpreter and its probe over on stdin; read it at once.
      const handoff = values.handoff ? readHandoff(Deno.stdin.readable) : undefined;
      handoff?.catch(() => {}); // awaited by serve
      const { serve } = await load("daemon");
      return await serve({
        stateDir,
        configPath: values.config,
        host: values.host,
        port: portOf(values.port),
        logFormat: logFormat(values["log-format"]),
        python: values.python === undefined || values["python-home"] === undefined
          ? undefined
          : { executable: values.python, home: values["python-home"] },
        handoff,
      });
    }
    case "token": {
      if (rest[0] !== "rotate") {
        throw new KlbrError(
          "usage",
          `cannot run token: usage: klbr token rotate (got token ${rest[0]})`,
        );
      }
      const { rotateToken } = await load("operator");
      return await rotateToken({
        stateDir,
        port: portOf(values.port),
      });
    }
    case "service":
      return await service(rest[0], { stateDir, values });
    case "url": {
      // The browser reads the token from the fragment, stores it and removes it from the bar;
      // a fragment never reaches the server or its logs.
      const { ownOrigin, readOperatorToken } = await load("lanes");
      const { daemonAddress } = await load("operator");
      // The daemon first: a mistyped --state has no daemon (exit 2), not a token to create.
      const address = await daemonAddress(stateDir, portOf(values.port));
      const token = await readOperatorToken(stateDir);
      console.log(`${ownOrigin(address)}/#token=${token}`);
      return 0;
    }
    case "backup":
    case "restore": {
      const [dir] = rest;
      const { backupState, restoreState } = await load("backup");
      const report = command === "backup"
        ? await backupState(stateDir, resolve(dir))
        : await restoreState(resolve(dir), stateDir, { replace: values.replace });
      console.log(
        values.json
          ? JSON.stringify(report)
          : describe(command, dir, report as unknown as Record<string, unknown>),
      );
      return 0;
    }
    case "example": {
      const { REPO_ROOT, runExample } = await load("setup");
      await runExample({ repoRoot: REPO_ROOT, python: "python3" });
      return 0;
    }
    case "status":
    case "reset":
    case "compact":
    case "repair":
    case "drain":
    case "stop":
    case "resume":
    case "activate":
    case "jobs":
    case "cancel-job":
    case "cancel-cell":
    case "rollback":
    case "maintain":
    case "candidates":
    case "trace":
    case "frames":
    case "context":
    case "search":
    case "budget": {
      if (command !== "budget" && (values.reset || values.raise !== undefined)) {
        throw new KlbrError(
          "usage",
          `cannot run ${command}: --reset and --raise are options of budget (got ${
            args.join(" ")
          })`,
        );
      }
      const { runOperatorCommand } = await load("operator");
      return await runOperatorCommand(command, rest, {
        stateDir,
        port: portOf(values.port),
        json: values.json,
        reset: values.reset,
        raise: values.raise,
      });
    }
    default:
      throw new KlbrError("internal", `cannot run ${command}: it has no handler`);
  }
}

/**
 * `service install | uninstall`: writes or removes the systemd unit and prints what it did.
 *
 * @throws {KlbrError} `usage` for another subcommand or an unwritable unit directory.
 */
async function service(
  what: string,
  o: { stateDir: string; values: ReturnType<typeof parseCommandLine>["values"] },
): Promise<number> {
  const { installService, uninstallService } = await load("service");
  const env = Deno.env.toObject();
  if (what === "install") {
    const report = await installService({
      stateDir: o.stateDir,
      configPath: o.values.config,
      system: o.values.system,
      host: o.values.host,
      port: portOf(o.values.port),
      logFormat: logFormat(o.values["log-format"]),
      env,
      cwd: Deno.cwd(),
    });
    console.log(
      [
        `${report.replaced ? "replaced" : "wrote"} ${report.path}:`,
        "",
        report.text,
        ...report.next,
      ].join("\n"),
    );
    return 0;
  }
  if (what === "uninstall") {
    const report = await uninstallService({ system: o.values.system, env });
    console.log(
      [report.removed ? `removed ${report.path}` : `no unit at ${report.path}`, ...report.next]
        .join("\n"),
    );
    return 0;
  }
  throw new KlbrError(
    "usage",
    `cannot run service: usage: klbr service install|uninstall [--system] (got service ${what})`,
  );
}

function logFormat(value: string | undefined): LogFormat | undefined {
  if (value === undefined) return undefined;
  const parsed = LogFormat.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new KlbrError(
    "usage",
    `cannot serve: --log-format must be text or json (got ${JSON.stringify(value)})`,
  );
}

function describe(command: string, dir: string, report: Record<string, unknown>): string {
  const manifest = (command === "backup" ? report : report.manifest) as {
    inputs: number;
    releases: unknown[];
    artifacts: unknown[];
    artifacts_missing: unknown[];
  };
  const what =
    `${manifest.inputs} inputs, ${manifest.releases.length} releases, ${manifest.artifacts.length} artifacts` +
    (manifest.artifacts_missing.length
      ? ` (${manifest.artifacts_missing.length} evicted before the backup)`
      : "");
  return command === "backup"
    ? `backed up and verified into ${dir}: ${what}`
    : `restored and verified from ${dir}: ${what}${
      report.movedAside ? `; the old state is in ${report.movedAside}` : ""
    }`;
}

/**
 * The last resort for an error no part of klbr turned into a `KlbrError`: one line with what
 * was thrown and the first place in this checkout it came from, never a stack trace. An owner
 * cannot fix it; the line is what to report.
 *
 * @example
 * ```ts
 * unforeseen(new TypeError("boom"), ["serve"]);
 * // "cannot run klbr serve: unexpected TypeError: boom (at main.ts:12:3); this is a bug in klbr, …"
 * ```
 */
export function unforeseen(error: unknown, args: string[]): string {
  const what = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const root = new URL(".", import.meta.url).href;
  const stack = error instanceof Error ? error.stack ?? "" : "";
  const at = stack.split("\n").map((line) => line.split(root)[1]?.replace(/\)$/, ""))
    .find((place) => place !== undefined);
  return `cannot run ${["klbr", ...args].join(" ")}: unexpected ${what}${
    at === undefined ? "" : ` (at ${at})`
  }; this is a bug in klbr, please report it with this line`;
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (error) {
    if (isKlbrError(error)) {
      console.error(`klbr: ${error.message}`);
      Deno.exit(USAGE_CODES.includes(error.code) ? 2 : 1);
    }
    console.error(`klbr: ${unforeseen(error, Deno.args)}`);
    Deno.exit(1);
  }
}
