/**
 * The systemd unit `klbr service install` writes: what it runs (the `serve` task's command,
 * Deno by absolute path, the state directory, configuration and workspace absolute), how it
 * restarts (on failure, bounded) and how it stops (SIGTERM to serve alone, which drains the
 * daemon; a stop timeout that covers the drain).
 *
 * @module
 */

import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { KlbrError } from "../core/mod.ts";

/** What a unit is made of; every path absolute. */
export interface UnitFacts {
  /** A system unit (`/etc/systemd/system`, run as `user`) or the user's own. */
  system: boolean;
  /** The account a system unit runs as. */
  user?: string;
  stateDir: string;
  /** The checkout: the working directory, as for `deno task serve`. */
  repoRoot: string;
  /** The full command: Deno's absolute path, then its arguments. */
  command: string[];
  /** Variables set for the service, in order (the workspace first). */
  environment: [string, string][];
  /** A file of further variables (the model keys, the Discord token), optional. */
  environmentFile: string;
  /** Seconds systemd waits after SIGTERM before it kills what is left. */
  stopTimeoutS: number;
  /** When the unit was written, for its header. */
  writtenAt: string;
}

/** How long a failed service waits before systemd starts it again. */
const RESTART_SEC = 5;
/** At most this many starts within {@linkcode START_LIMIT_INTERVAL_S}; then it stays failed. */
const START_LIMIT_BURST = 5;
/** The window of {@linkcode START_LIMIT_BURST}, in seconds. */
const START_LIMIT_INTERVAL_S = 600;

/**
 * A value as systemd reads it: `%` (specifiers) doubled; in a command's arguments (`exec`)
 * `$` doubled too, but not in its program's path (`program`), where systemd expands no
 * variable; a command word or an assignment (`env`) with a space, a quote or a backslash
 * double-quoted with `"` and `\` escaped.
 *
 * @throws {KlbrError} `usage` for a value with a line break, which no unit line can hold, or a
 *   program path with a quote, a backslash or a control character, which systemd never starts.
 */
function escape(value: string, kind: "program" | "exec" | "env" | "plain"): string {
  if (/[\n\r]/.test(value)) {
    throw new KlbrError(
      "usage",
      `cannot write the unit: a value holds a line break (got ${JSON.stringify(value)})`,
    );
  }
  // systemd refuses such a program outright ("Executable name contains special characters").
  // deno-lint-ignore no-control-regex
  if (kind === "program" && /["'\\\x00-\x1f\x7f]/.test(value)) {
    throw new KlbrError(
      "usage",
      `cannot write the unit: systemd does not start a program whose path holds a quote, a backslash or a control character (got ${
        JSON.stringify(value)
      }); install Deno at a path without them (or link it from one) and install the service again`,
    );
  }
  let text = value.replaceAll("%", "%%");
  if (kind === "plain") return text;
  // `$` is expanded in the arguments only; in the program's path `$$` would stay `$$`.
  if (kind === "exec") text = text.replaceAll("$", "$$$$");
  return /[\s"'\\;]/.test(text) || text === ""
    ? `"${text.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`
    : text;
}

/**
 * Renders the unit file.
 *
 * @throws {KlbrError} `usage` for a path or value with a line break, or a Deno path systemd
 *   refuses to start (a quote, a backslash, a control character).
 * @example
 * ```ts
 * const text = renderUnit(facts); // "[Unit]\nDescription=klbr …"
 * ```
 */
export function renderUnit(facts: UnitFacts): string {
  const install = facts.system ? "multi-user.target" : "default.target";
  const lines = [
    `# Written by \`deno task klbr service install\` at ${facts.writtenAt};`,
    "# `deno task klbr service uninstall` removes it. See docs/operations.md.",
    "[Unit]",
    `Description=klbr agent runtime (state ${escape(facts.stateDir, "plain")})`,
    // A list split at spaces and quotes: the path goes as one percent-encoded URL, and the `'`
    // a file URL leaves as is is encoded too.
    `Documentation=${
      escape(
        pathToFileURL(join(facts.repoRoot, "docs", "operations.md")).href.replaceAll("'", "%27"),
        "plain",
      )
    }`,
    ...(facts.system ? ["Wants=network-online.target", "After=network-online.target"] : []),
    `StartLimitIntervalSec=${START_LIMIT_INTERVAL_S}`,
    `StartLimitBurst=${START_LIMIT_BURST}`,
    "",
    "[Service]",
    "Type=simple",
    ...(facts.system && facts.user ? [`User=${escape(facts.user, "plain")}`] : []),
    `WorkingDirectory=${escape(facts.repoRoot, "plain")}`,
    ...facts.environment.map(([name, value]) => `Environment=${escape(`${name}=${value}`, "env")}`),
    `EnvironmentFile=-${escape(facts.environmentFile, "plain")}`,
    `ExecStart=${
      facts.command.map((word, i) => escape(word, i === 0 ? "program" : "exec")).join(" ")
    }`,
    "Restart=on-failure",
    `RestartSec=${RESTART_SEC}`,
    // SIGTERM to serve alone: it forwards it and the daemon drains; whatever is left when the
    // timeout ends is killed.
    "KillMode=mixed",
    "KillSignal=SIGTERM",
    `TimeoutStopSec=${facts.stopTimeoutS}`,
    "",
    "[Install]",
    `WantedBy=${install}`,
    "",
  ];
  return lines.join("\n");
}
