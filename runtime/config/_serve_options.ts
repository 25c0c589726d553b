/**
 * What `serve` (and the daemon it starts) is told on the command line.
 *
 * @module
 */

import type { LogFormat } from "../core/mod.ts";

/** Options of `serve` and of the daemon it starts. */
export interface ServeOptions {
  stateDir: string;
  /** The KDL configuration; `<state>/config.kdl` (or `KLBR_CONFIG`) otherwise. */
  configPath?: string;
  /** A loopback address. @default {DEFAULT_HOST} */
  host?: string;
  /** 0 picks a free port. @default {DEFAULT_PORT} */
  port?: number;
  /** How log lines are written. @default {"text"} */
  logFormat?: LogFormat;
  /** The real interpreter and its home, as the launcher found them; else looked up. */
  python?: { executable: string; home: string };
  /**
   * The launcher's hand-over: the interpreter and its bubblewrap probe's outcome, awaited
   * before anything is written; they then replace `python` and the daemon's own probe.
   */
  handoff?: Promise<{
    python: { executable: string; home: string };
    sandbox: {
      mode: "bwrap" | "none";
      reason: string | null;
      network: boolean;
      userns: boolean;
      usernsReason: string | null;
    };
  }>;
}
