/**
 * The klbr command line: `init | doctor | serve (default) | status | reset | compact | drain |
 * stop | activate | jobs | cancel-job | rollback | maintain | candidates | trace | example`.
 *
 * @module
 */

import { resolve } from "node:path";
import { parseArgs } from "node:util";
import {
  DEFAULT_HOST,
  DEFAULT_PORT,
  isKlbrError,
  KlbrError,
  LogFormat,
} from "./runtime/core/mod.ts";

const USAGE = `usage: klbr [command] [options]

commands:
  serve                 start the daemon under permissions derived from the configuration (default)
  daemon                run the daemon in this process (serve starts it this way)
  init                  create the state directory
  doctor                check versions, state, skills and configuration
  example               run the no-network workbench demonstration
  url                   print the UI's address with the operator token (keep it private)
  backup <dir>          copy the state directory into <dir>, consistently, while the daemon runs
  restore <dir>         restore a backup into the state directory (never over a live one)
  token rotate          replace the operator token; old tokens, sessions and cookies are refused
  status [session]      operator: show the runtime's state
  reset <session>       operator: replace the kernel (heap state is not restored)
  compact <session>     operator: compact the session's context
  drain <session>       operator: finish accepted work, then stop
  stop <session>        operator: stop the session's work now
  activate <session> <epoch> <release-path>
                        operator: switch behaviour by epoch compare-and-swap
  jobs [session]        operator: list jobs and timers with their states, and the budgets
  cancel-job <job-id>   operator: cancel a job (its process group is killed)
  rollback <session>    operator: return to the last good behaviour release
  maintain <session> [reason]
                        operator: start a maintenance turn (it loads the maintenance skill)
  candidates <session>  operator: show failed behaviour candidates with their diagnostics
  trace <session> <frame-id|trace-id>
                        operator: show hook invocation traces

options:
  --state DIR           state directory (default ./.klbr, or KLBR_STATE_DIR)
  --config FILE         KDL configuration (default <state>/config.kdl, or KLBR_CONFIG)
  --host HOST           serve: loopback address to bind (default 127.0.0.1)
  --port PORT           serve: port (default ${DEFAULT_PORT}); doctor: the port the printed
                        permissions are for; operator commands and token rotate: the daemon's port
  --json                operator commands, backup, restore: print JSON
  --probe               doctor: check the Discord token with one GET /users/@me
  --replace             restore: move a stopped state directory aside instead of refusing
  --log-format FORMAT   serve: text (default) or json, one object a line
  -h, --help            show this help
`;

/** Runs the CLI with the given arguments and returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      state: { type: "string" },
      config: { type: "string" },
      host: { type: "string" },
      port: { type: "string" },
      json: { type: "boolean", default: false },
      probe: { type: "boolean", default: false },
      replace: { type: "boolean", default: false },
      "log-format": { type: "string" },
      python: { type: "string" },
      "python-home": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const [command = "serve", ...rest] = positionals;
  const { resolveStateDir } = await import("./runtime/setup/mod.ts");
  const stateDir = resolveStateDir(values.state);
  switch (command) {
    case "init": {
      const { initStateDir } = await import("./runtime/setup/mod.ts");
      const report = await initStateDir(stateDir);
      console.log(
        report.created ? `initialised ${stateDir}` : `${stateDir} is already initialised`,
      );
      return 0;
    }
    case "doctor": {
      const { runDoctor } = await import("./runtime/setup/mod.ts");
      return await runDoctor({
        stateDir,
        configPath: values.config,
        probeDiscord: values.probe,
        port: values.port === undefined ? undefined : Number(values.port),
      });
    }
    case "serve": {
      const { launchDaemon } = await import("./runtime/setup/mod.ts");
      return await launchDaemon({
        stateDir,
        configPath: values.config,
        host: values.host,
        port: values.port === undefined ? undefined : Number(values.port),
        logFormat: logFormat(values["log-format"]),
      });
    }
    case "daemon": {
      const { serve } = await import("./runtime/daemon/mod.ts");
      return await serve({
        stateDir,
        configPath: values.config,
        host: values.host,
        port: values.port === undefined ? undefined : Number(values.port),
        logFormat: logFormat(values["log-format"]),
        python: values.python === undefined || values["python-home"] === undefined
          ? undefined
          : { executable: values.python, home: values["python-home"] },
      });
    }
    case "token": {
      if (rest[0] !== "rotate") {
        console.error(
          `klbr: cannot run token: usage: klbr token rotate (got ${rest[0] ?? "nothing"})`,
        );
        return 2;
      }
      const { rotateToken } = await import("./runtime/operator/mod.ts");
      return await rotateToken({
        stateDir,
        port: values.port === undefined ? undefined : Number(values.port),
      });
    }
    case "url": {
      // The browser reads the token from the fragment, stores it and removes it from the bar;
      // a fragment never reaches the server or its logs.
      const { readOperatorToken } = await import("./runtime/lanes/mod.ts");
      const token = await readOperatorToken(stateDir);
      console.log(`http://${DEFAULT_HOST}:${values.port ?? DEFAULT_PORT}/#token=${token}`);
      return 0;
    }
    case "backup":
    case "restore": {
      const [dir] = rest;
      if (dir === undefined) {
        throw new KlbrError(
          "invalid_input",
          `cannot ${command}: usage: klbr ${command} <dir> (got no dir)`,
        );
      }
      const { backupState, restoreState } = await import("./runtime/backup/mod.ts");
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
      const { runExample } = await import("./runtime/setup/mod.ts");
      await runExample({ repoRoot: repoRoot(), python: "python3" });
      return 0;
    }
    case "status":
    case "reset":
    case "compact":
    case "drain":
    case "stop":
    case "activate":
    case "jobs":
    case "cancel-job":
    case "rollback":
    case "maintain":
    case "candidates":
    case "trace": {
      const { runOperatorCommand } = await import("./runtime/operator/mod.ts");
      return await runOperatorCommand(command, rest, {
        stateDir,
        port: values.port === undefined ? undefined : Number(values.port),
        json: values.json,
      });
    }
    default:
      console.error(`klbr: cannot run ${JSON.stringify(command)}: unknown command\n\n${USAGE}`);
      return 2;
  }
}

function logFormat(value: string | undefined): LogFormat | undefined {
  if (value === undefined) return undefined;
  const parsed = LogFormat.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new KlbrError(
    "invalid_config",
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

function repoRoot(): string {
  return new URL(".", import.meta.url).pathname.replace(/\/$/, "");
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (error) {
    if (isKlbrError(error)) {
      console.error(`klbr: ${error.message}`);
      Deno.exit(1);
    }
    throw error;
  }
}
