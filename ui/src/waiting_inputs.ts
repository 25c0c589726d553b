/**
 * The inputs an `op.status` answer says have waited longer than its threshold, in words.
 *
 * @module
 */

import { isObject } from "./json_value.ts";

/**
 * The status's inputs waiting longer than its threshold, in words: how many, over how long,
 * and the first ones with how long each has waited.
 */
export function waitingLine(status: unknown): { count: number; label: string } | undefined {
  const count = find(status, "waiting_inputs");
  const threshold = find(status, "waiting_threshold_ms");
  if (typeof count !== "number" || typeof threshold !== "number") return undefined;
  const over = `over ${Math.round(threshold / 1000)} s`;
  if (count === 0) return { count, label: `none ${over}` };
  const list = find(status, "waiting");
  const first = (Array.isArray(list) ? list : []).slice(0, 3).map((w) => {
    const item = w as { id?: unknown; waited_ms?: unknown };
    return `${String(item.id)} (${Math.round(Number(item.waited_ms) / 1000)} s)`;
  });
  return { count, label: `${count} waiting ${over}${first.length ? `: ${first.join(", ")}` : ""}` };
}

/** The first value named `name`, searched a few levels deep. */
function find(value: unknown, name: string, depth = 3): unknown {
  if (!isObject(value) || depth < 0) return undefined;
  if (value[name] !== undefined) return value[name];
  for (const v of Object.values(value)) {
    const found = find(v, name, depth - 1);
    if (found !== undefined) return found;
  }
  return undefined;
}
