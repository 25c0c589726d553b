/**
 * The daemon's one logger: every line has a timestamp, a level, a stable event name, a
 * sentence for a person and the fields behind it. `text` is for people, `json` (one object a
 * line) for machines; both go to stderr unless told otherwise.
 *
 * @module
 */

import * as z from "zod";

/** How bad a log line is. */
type LogLevel = "info" | "warn" | "error";

/** The fields of a log line: plain JSON values. */
export type LogFields = Record<string, unknown>;

/** How lines are written: for people (`text`) or one JSON object a line (`json`). */
export const LogFormat = z.enum(["text", "json"]);
/** How lines are written. */
export type LogFormat = z.infer<typeof LogFormat>;

/** Writes log lines; every domain takes one instead of printing. */
export interface Logger {
  /** Something a person may want to know: start-up, a drain, a recovery. */
  info(event: string, message: string, fields?: LogFields): void;
  /** Something went wrong and was handled: a refused client, a fallback, a retry. */
  warn(event: string, message: string, fields?: LogFields): void;
  /** Something went wrong that was not expected; the message says what to do. */
  error(event: string, message: string, fields?: LogFields): void;
}

/** Options for {@linkcode createLogger}. */
export interface LoggerOptions {
  /** @default {"text"} */
  format?: LogFormat;
  /** Where each line goes. @default {writing to stderr} */
  write?: (line: string) => void;
  /** @default {Date.now} */
  clock?: () => number;
}

/**
 * Creates a logger.
 *
 * @example
 * ```ts
 * const log = createLogger({ format: "json" });
 * log.info("behavior.release", "behaviour release 3fa2… at epoch 2", { epoch: 2 });
 * ```
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const format = options.format ?? "text";
  const write = options.write ?? ((line: string) => console.error(line));
  const clock = options.clock ?? Date.now;
  const line = (level: LogLevel) => (event: string, message: string, fields: LogFields = {}) => {
    const at = new Date(clock()).toISOString();
    write(
      format === "json"
        ? JSON.stringify({ at, level, event, message, ...fields })
        : `${at} ${level.toUpperCase().padEnd(5)} ${event} ${message}${textFields(fields)}`,
    );
  };
  return { info: line("info"), warn: line("warn"), error: line("error") };
}

/** A logger that drops every line, for code run where nobody reads the log. */
export const SILENT_LOGGER: Logger = { info() {}, warn() {}, error() {} };

function textFields(fields: LogFields): string {
  const parts = Object.entries(fields).filter(([, value]) => value !== undefined).map(
    ([key, value]) => `${key}=${typeof value === "string" ? quoteIfNeeded(value) : json(value)}`,
  );
  return parts.length ? ` (${parts.join(" ")})` : "";
}

function quoteIfNeeded(value: string): string {
  return /^[\w.:/@+-]+$/.test(value) ? value : JSON.stringify(value);
}

function json(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
