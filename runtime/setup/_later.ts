/**
 * Modules this folder loads when a function needs them, never before: this folder's face is
 * what `serve`'s launcher loads first, and what it does not need before it starts the daemon
 * (the store, the lanes with Hono, doctor with the OpenAI SDK and the Discord gateway) would
 * only delay that. A literal `import("…")` would not do: Deno loads every module one names
 * before the program starts. The `typeof import` keeps the types and is not loaded.
 *
 * @module
 */

/** What {@linkcode later} loads, by specifier relative to this folder. */
interface Later {
  "../model/mod.ts": typeof import("../model/mod.ts");
  "../discord/mod.ts": typeof import("../discord/mod.ts");
  "../lanes/mod.ts": typeof import("../lanes/mod.ts");
  "../../store/store.ts": typeof import("../../store/store.ts");
  "./_doctor_checks.ts": typeof import("./_doctor_checks.ts");
}

/**
 * Imports `specifier` (relative to this folder) now.
 *
 * @example
 * ```ts
 * const { openStore } = await later("../../store/store.ts");
 * ```
 */
export function later<K extends keyof Later>(specifier: K): Promise<Later[K]> {
  return import(new URL(specifier, import.meta.url).href);
}
