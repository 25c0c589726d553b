/**
 * Code skills on tree-sitter, on the host: `web-tree-sitter` with the grammars of Python,
 * TypeScript/TSX, JavaScript, Rust, Go, JSON and Markdown, loaded once per process; parse
 * trees cached by content hash; outlines, symbols, queries and reads over version-bound
 * ranges; and checked, all-or-none patches. Cells reach it through the `code.*` RPCs
 * (`workbench/klbr/code.py`); `docs/code.md` describes it.
 *
 * @module
 */

export { type CodeRpcOptions, codeRpcs } from "./_handlers.ts";
export { CodeService, type CodeServiceOptions, type CodeStats } from "./_service.ts";
export { grammar, grammarLoads, grammarPath, initTreeSitter } from "./_grammars.ts";
export { LANGUAGE_IDS, type LanguageId } from "./_languages.ts";
export type { CodeSymbol, Outline } from "./_outline.ts";
export type { PatchOutcome } from "./_patch.ts";
export type { FindResult } from "./_find.ts";
export { applyPatch } from "./_patch.ts";
export { findInWorkspace } from "./_find.ts";
