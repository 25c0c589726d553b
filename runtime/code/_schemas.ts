/**
 * The zod schemas of the `code.*` RPCs: the version-bound range every call speaks in, each
 * method's params, and the body of the durable `code.patch` record.
 *
 * @module
 */

import { z } from "zod";

const hash = z.string().regex(/^[0-9a-f]{64}$/, "expected a sha256 hex digest");
const offset = z.number().int().nonnegative();
const line = z.number().int().positive();
const path = z.string().min(1).max(4096);

/**
 * A span of one file at one version: the workspace-relative path, the sha256 of the whole
 * file's bytes, the byte span `[start_byte, end_byte)` and the 1-based lines holding its first
 * and last byte. A range is honoured only while the file still hashes to `hash`.
 */
export const CodeRange = z.strictObject({
  path,
  hash,
  start_byte: offset,
  end_byte: offset,
  start_line: line,
  end_line: line,
}).refine((r) => r.end_byte >= r.start_byte, "end_byte must not be before start_byte");
/** A version-bound range. */
export type CodeRange = z.infer<typeof CodeRange>;

/** Params of `code.outline`. */
export const OutlineParams = z.strictObject({ path });

/** Params of `code.symbol`: a name or qualified name, optionally narrowed by kind. */
export const SymbolParams = z.strictObject({
  path,
  name: z.string().min(1).max(1000),
  kind: z.string().min(1).max(40).nullable().default(null),
});

/** Params of `code.find`: a tree-sitter query or a symbol-name glob, over a path or a glob. */
export const FindParams = z.strictObject({
  pattern: z.string().min(1).max(100_000),
  path: path.default("."),
  max_results: z.number().int().min(1).max(1000).default(100),
  capture: z.string().min(1).max(200).nullable().default(null),
});

/** Params of `code.read`. */
export const ReadParams = z.strictObject({ range: CodeRange });

/** Params of `code.lines`: a range of whole lines, `end` included (default: `start`). */
export const LinesParams = z.strictObject({
  path,
  start: line,
  end: line.nullable().default(null),
});

/** One edit: replace the text of `range` by `text`. */
export const CodeEdit = z.strictObject({ range: CodeRange, text: z.string().max(4_000_000) });
/** One edit of a patch. */
export type CodeEdit = z.infer<typeof CodeEdit>;

/** Params of `code.patch`: every edit applies, or none does. */
export const PatchParams = z.strictObject({ edits: z.array(CodeEdit).min(1).max(1000) });

const Loose = z.unknown();
const Symbol = z.object({
  kind: z.string(),
  name: z.string(),
  qualified_name: z.string(),
  range: CodeRange,
});

/** Reply of `code.outline`: a file's symbols at one version. */
export const OutlineReply = z.object({
  path: z.string(),
  hash,
  language: z.string(),
  lines: z.int(),
  symbols: z.array(Symbol),
  truncated: z.boolean(),
  syntax_errors: z.int(),
});

/** Reply of `code.symbol`: one symbol of the file. */
export const SymbolReply = Symbol;

/** Reply of `code.find`: the matches, and what the search covered. */
export const FindReply = z.object({
  mode: z.enum(["query", "symbol"]),
  matches: z.array(z.object({ path: z.string(), range: CodeRange, text: z.string() })),
  truncated: z.boolean(),
  files_searched: z.int(),
  files_skipped: z.int(),
  refused_languages: z.record(z.string(), z.string()),
});

/** Reply of `code.read`: the range's text, or `ok: false` when the file moved on. */
export const ReadReply = z.union([
  z.object({ ok: z.literal(true), text: z.string(), range: CodeRange }),
  z.object({ ok: z.literal(false), reason: z.literal("stale"), stale: z.array(Loose) }),
]);

/** Reply of `code.lines`: whole lines as a version-bound range, with their text. */
export const LinesReply = z.object({ range: CodeRange, text: z.string() });

/** Reply of `code.patch`: applied (with its record), or `ok: false` and why nothing was. */
export const PatchReply = z.union([
  z.object({
    ok: z.literal(true),
    files: z.array(Loose),
    ranges: z.array(CodeRange),
    patch_id: z.string(),
    seq: z.int(),
  }),
  z.object({ ok: z.literal(false), reason: z.enum(["stale", "syntax"]) }),
]);
