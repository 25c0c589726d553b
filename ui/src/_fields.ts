/**
 * Defensive readers for record `data`: each takes candidate paths (`"stdout"`,
 * `"result.stdout"`) and returns the first value of the right type, so a field that moved or
 * is missing never breaks rendering.
 *
 * @module
 */

/** A record's `data` or any JSON object. */
export type Data = Record<string, unknown>;

/** Returns whether `value` is a plain JSON object. */
export function isObject(value: unknown): value is Data {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function at(data: Data, path: string): unknown {
  let value: unknown = data;
  for (const part of path.split(".")) {
    if (!isObject(value)) return undefined;
    value = value[part];
  }
  return value;
}

/** The first string found at one of `paths`. */
export function text(data: Data, ...paths: string[]): string | undefined {
  for (const path of paths) {
    const value = at(data, path);
    if (typeof value === "string") return value;
  }
  return undefined;
}

/** The first finite number found at one of `paths`. */
export function num(data: Data, ...paths: string[]): number | undefined {
  for (const path of paths) {
    const value = at(data, path);
    if (typeof value === "number" && Number.isFinite(value)) return value;
  }
  return undefined;
}

/** The first boolean found at one of `paths`. */
export function flag(data: Data, ...paths: string[]): boolean | undefined {
  for (const path of paths) {
    const value = at(data, path);
    if (typeof value === "boolean") return value;
  }
  return undefined;
}

/** The first array found at one of `paths`, keeping only its strings. */
export function strings(data: Data, ...paths: string[]): string[] {
  for (const path of paths) {
    const value = at(data, path);
    if (Array.isArray(value)) return value.filter((v): v is string => typeof v === "string");
  }
  return [];
}

/** The first object found at one of `paths`. */
export function object(data: Data, ...paths: string[]): Data | undefined {
  for (const path of paths) {
    const value = at(data, path);
    if (isObject(value)) return value;
  }
  return undefined;
}

/** The first value present (not undefined or null) at one of `paths`. */
export function any(data: Data, ...paths: string[]): unknown {
  for (const path of paths) {
    const value = at(data, path);
    if (value !== undefined && value !== null) return value;
  }
  return undefined;
}

/**
 * Renders any JSON value as display text: strings as they are, an object with a `text` field
 * as that text, anything else as indented JSON.
 */
export function displayText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === undefined || value === null) return "";
  if (isObject(value) && typeof value.text === "string") return value.text;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}
