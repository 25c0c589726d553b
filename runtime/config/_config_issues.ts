/**
 * Where a configuration that failed its schema went wrong: each zod issue located on a line
 * of the file and worded for its node (`llm "<role>"`, `discord`, a settings or block node).
 *
 * @module
 */

import type { z } from "zod";
import type { RawBlock } from "./_fields.ts";
import { type RawConfig, ROUTE_NAMES, type RouteName } from "./_kdl.ts";
import { locateSettingsIssue, SETTINGS_NODES } from "./_settings.ts";
import { BLOCK_FIELD_NAMES } from "./_blocks.ts";

/** The field names an "unknown field" error offers: of a route and of `discord`. */
export interface FieldNames {
  route: readonly string[];
  discord: readonly string[];
}

/**
 * Where in the file a schema issue is, how it sorts among the others (routes by role, then
 * `discord`, then the other nodes) and what it says.
 */
export function locateIssue(
  issue: z.core.$ZodIssue,
  kdl: RawConfig,
  raw: Partial<Record<RouteName, RawBlock>>,
  names: FieldNames,
): { line: number; order: number; text: string } {
  if ((SETTINGS_NODES as readonly PropertyKey[]).includes(issue.path[0])) {
    const at = locateSettingsIssue(issue, kdl.settings);
    return { ...at, order: ROUTE_NAMES.length + 1 };
  }
  const block = issue.path[0];
  if (block === "sandbox" || block === "workspace" || block === "lanes") {
    const at = blockIssue(block, kdl[block], issue, BLOCK_FIELD_NAMES[block]);
    return { ...at, order: ROUTE_NAMES.length + 1 };
  }
  if (block === "discord") {
    return { ...blockIssue(block, kdl.discord, issue, names.discord), order: ROUTE_NAMES.length };
  }
  const role = issue.path[1] as RouteName;
  const keys = issue.code === "unrecognized_keys" ? issue.keys : [];
  const rest = issue.path.slice(2);
  const field = keys.length > 0 ? keys.join(", ") : rest.map(String).join(".");
  const message = keys.length > 0
    ? `unknown field, expected one of ${names.route.join(", ")} (got ${keys.join(", ")})`
    : issue.message;
  const line = issueLine(raw[role], rest, keys);
  return { line, order: ROUTE_NAMES.indexOf(role), text: `llm "${role}" ${field}: ${message}` };
}

/** The line of a route field an issue names: the sub-field's, the field's, or the route's. */
function issueLine(raw: RawBlock | undefined, path: PropertyKey[], keys: string[]): number {
  if (raw === undefined) return 1;
  const [field, sub] = [String(keys[0] ?? path[0] ?? ""), path[1]];
  return (sub !== undefined ? raw.lines.get(`${field}.${String(sub)}`) : undefined) ??
    raw.lines.get(field) ?? raw.line;
}

/** Locates one issue of a block node (`discord`, `sandbox`, …): its line and a sentence. */
function blockIssue(
  block: string,
  raw: RawBlock | undefined,
  issue: z.core.$ZodIssue,
  fieldNames: readonly string[],
): { line: number; text: string } {
  const keys = issue.code === "unrecognized_keys" ? issue.keys : [];
  const field = keys.length > 0 ? keys.join(", ") : String(issue.path[1] ?? "");
  const message = keys.length > 0
    ? `unknown field, expected one of ${fieldNames.join(", ")} (got ${keys.join(", ")})`
    : issue.message;
  const line = raw?.lines.get(keys[0] ?? field) ?? raw?.line ?? 1;
  return { line, text: `${block} ${field}: ${message}`.trim() };
}
