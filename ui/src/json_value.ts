/**
 * Plain JSON values as the page meets them: telling an object apart, and showing any value as
 * text. Record bodies are read through the shared schemas (`readRecord`), not here.
 *
 * @module
 */

/** A JSON object. */
export type Data = Record<string, unknown>;

/** Returns whether `value` is a plain JSON object. */
export function isObject(value: unknown): value is Data {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The field `key` of `data` when it is a non-empty string; `undefined` otherwise. */
export function stringField(data: unknown, key: string): string | undefined {
  const value = isObject(data) ? data[key] : undefined;
  return typeof value === "string" && value !== "" ? value : undefined;
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
