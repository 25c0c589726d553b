/**
 * The grammars, loaded once per process: `web-tree-sitter` is initialised on first use and
 * each language's `.wasm` is read from `runtime/code/grammars/` (committed with its licence
 * and sha256, see the README there) and compiled once, then shared by every parse of the
 * daemon.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { Language, Parser, Query } from "web-tree-sitter";
import { KlbrError } from "../core/mod.ts";
import { type LanguageId, LANGUAGES } from "./_languages.ts";

/** One loaded grammar with its parser and compiled outline query. */
export interface Grammar {
  id: LanguageId;
  language: Language;
  parser: Parser;
  outline: Query;
}

let init: Promise<void> | null = null;
const loaded = new Map<LanguageId, Promise<Grammar>>();
let loads = 0;

/** Initialises `web-tree-sitter` once; later calls return the same promise. */
export function initTreeSitter(): Promise<void> {
  init ??= Parser.init().catch((cause) => {
    init = null;
    throw new KlbrError("internal", "cannot parse: web-tree-sitter failed to start", { cause });
  });
  return init;
}

/** Where a language's `.wasm` is on disk (in `runtime/code/grammars/`). */
export function grammarPath(id: LanguageId): string {
  return fileURLToPath(new URL(`./grammars/tree-sitter-${id}.wasm`, import.meta.url));
}

async function loadGrammar(id: LanguageId): Promise<Grammar> {
  await initTreeSitter();
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(grammarPath(id));
  } catch (cause) {
    throw new KlbrError(
      "internal",
      `cannot parse ${id}: its grammar cannot be read; restore runtime/code/grammars/ from the checkout (got ${
        grammarPath(id)
      })`,
      { cause },
    );
  }
  const language = await Language.load(bytes);
  const parser = new Parser();
  parser.setLanguage(language);
  loads++;
  return { id, language, parser, outline: new Query(language, LANGUAGES[id].outline) };
}

/**
 * Returns the loaded grammar of `id`, loading it on first use; every later call gets the
 * same one.
 *
 * @throws {KlbrError} `internal` when `web-tree-sitter` or the grammar cannot be loaded.
 * @example
 * ```ts
 * const { parser } = await grammar("python");
 * ```
 */
export function grammar(id: LanguageId): Promise<Grammar> {
  let pending = loaded.get(id);
  if (pending === undefined) {
    pending = loadGrammar(id);
    loaded.set(id, pending);
    pending.catch(() => loaded.delete(id));
  }
  return pending;
}

/** How many grammars this process has loaded (each at most once). */
export function grammarLoads(): number {
  return loads;
}
