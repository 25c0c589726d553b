/**
 * The `backup` node: verified backups of the state directory on a schedule, the newest `keep`
 * of them kept. Without `every` none is scheduled; the backup taken before a store migration
 * goes to `dir` either way (`docs/configuration.md` shows the node).
 *
 * @module
 */

import { isAbsolute } from "node:path";
import { z } from "zod";
import { expected, show, whole } from "./_fields.ts";

const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** The longest `every`: a year. */
const MAX_EVERY_MS = 365 * UNIT_MS.d;

/** `every`: a whole number of minutes, hours or days ("30m", "24h", "7d"), as milliseconds. */
const Every = z.string(expected('a duration like "24h"')).transform((text, ctx) => {
  const match = /^([1-9]\d{0,5})(m|h|d)$/.exec(text);
  const ms = match === null ? NaN : Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  if (!(ms <= MAX_EVERY_MS)) {
    ctx.addIssue({
      code: "custom",
      message: `expected a duration from "1m" to "365d", in m, h or d (got ${show(text)})`,
    });
    return z.NEVER;
  }
  return ms;
});

/** The `backup` node; every default lives here. */
export const BackupSchema = z.strictObject({
  /** How often a scheduled backup is taken; absent: never (the pre-migration one still is). */
  every: Every.optional(),
  /** How many scheduled backups are kept; the oldest beyond are removed. */
  keep: whole("a whole number of backups", 1, 1000).default(7),
  /** Where backups go: an absolute path; absent: `<state>/backups`. */
  dir: z.string(expected("an absolute path")).refine(isAbsolute, expected("an absolute path"))
    .optional(),
});

/** The validated `backup` node. */
export type BackupConfig = z.output<typeof BackupSchema>;
