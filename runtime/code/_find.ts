/**
 * `code.find`: a tree-sitter query (a pattern that starts with `(` or `[`) or a symbol-name
 * glob, run over one file, a directory or a path glob of the workspace. Results are capped
 * and say when they were cut short, like `search`.
 *
 * @module
 */

import { join, matchesGlob } from "node:path";
import { type Node, Query } from "web-tree-sitter";
import { KlbrError } from "../core/mod.ts";
import { resolveInWorkspace, withinRoot } from "../workspace/mod.ts";
import { grammar } from "./_grammars.ts";
import { type LanguageId, languageOf } from "./_languages.ts";
import { firstLine } from "./_outline.ts";
import type { CodeRange } from "./_schemas.ts";
import type { CodeService } from "./_service.ts";
import type { Source } from "./_source.ts";

/** The most files one find looks at; past it the result says `truncated`. */
const MAX_FIND_FILES = 5_000;
const SKIP_DIRS = new Set([".git", "node_modules"]);

/** One hit of a find. */
export interface FindMatch {
  path: string;
  /** The hit's node (query) or definition (symbol), version-bound. */
  range: CodeRange;
  /** Its first line, trimmed (at most 200 characters). */
  text: string;
  /** Query mode: each capture's text (at most 200 characters). */
  captures?: Record<string, string>;
  /** Symbol mode: what the symbol is. */
  symbol?: { kind: string; qualified_name: string };
}

/** What a find returns. */
export interface FindResult {
  mode: "query" | "symbol";
  matches: FindMatch[];
  /** True when `max_results` or the file cap cut the result short: more may exist. */
  truncated: boolean;
  files_searched: number;
  /** Files skipped as too large (over 4 MiB) or not UTF-8. */
  files_skipped: number;
  /** Languages whose grammar refused the query, with the reason (query mode). */
  refused_languages: Record<string, string>;
}

/** What {@linkcode findInWorkspace} takes (the parsed `code.find` params). */
export interface FindRequest {
  pattern: string;
  path: string;
  max_results: number;
  capture: string | null;
}

/** The workspace-relative files `path` names: a file, a directory's tree, or a glob. */
async function filesOf(
  root: string,
  path: string,
  deny: string[],
): Promise<{ files: string[]; cut: boolean }> {
  const globbed = /[*?[{]/.test(path);
  const segments = path.split("/");
  const literal = globbed ? segments.slice(0, segments.findIndex((s) => /[*?[{]/.test(s))) : [];
  const base = await resolveInWorkspace(root, globbed ? literal.join("/") || "." : path, {
    action: "find",
    label: "path",
    deny,
  });
  if ((await Deno.stat(base.real)).isFile) return { files: [base.relative], cut: false };
  const files: string[] = [];
  let cut = false;
  const walk = async (dir: string, rel: string): Promise<void> => {
    const entries = [];
    for await (const entry of Deno.readDir(dir)) entries.push(entry);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (cut) return;
      const child = rel === "." ? entry.name : `${rel}/${entry.name}`;
      // Links are never followed: a walk cannot leave the root through one.
      if (entry.isSymlink) continue;
      // The state directory, inside the root in the default layout, is never walked.
      if (entry.isDirectory && deny.some((d) => withinRoot(d, join(dir, entry.name)))) continue;
      if (entry.isDirectory && !SKIP_DIRS.has(entry.name)) {
        await walk(join(dir, entry.name), child);
      } else if (entry.isFile && languageOf(entry.name) !== null) {
        if (globbed && !matchesGlob(child, path.replace(/^\.\//, ""))) continue;
        if (files.length >= MAX_FIND_FILES) cut = true;
        else files.push(child);
      }
    }
  };
  await walk(base.real, base.relative);
  return { files, cut };
}

function compile(id: LanguageId, pattern: string, cache: Map<LanguageId, Query | string>) {
  return grammar(id).then((g) => {
    if (!cache.has(id)) {
      try {
        cache.set(id, new Query(g.language, pattern));
      } catch (error) {
        cache.set(id, error instanceof Error ? error.message : String(error));
      }
    }
    return cache.get(id)!;
  });
}

async function symbolMatches(
  service: CodeService,
  source: Source,
  glob: string,
): Promise<FindMatch[]> {
  const outline = await service.outlineOfSource(source, `find in ${source.path}`);
  return outline.symbols
    .filter((s) => matchesGlob(s.qualified_name, glob) || matchesGlob(s.name, glob))
    .map((s) => ({
      path: source.path,
      range: s.range,
      text: s.signature,
      symbol: { kind: s.kind, qualified_name: s.qualified_name },
    }));
}

async function queryMatches(
  service: CodeService,
  source: Source,
  query: Query,
  capture: string | null,
): Promise<FindMatch[]> {
  if (capture !== null && !query.captureNames.includes(capture)) {
    throw new KlbrError(
      "invalid_input",
      `cannot find: the query has no capture @${capture} (got ${
        query.captureNames.map((n) => "@" + n).join(", ") || "none"
      })`,
    );
  }
  const parsed = await service.parsed(source);
  if (parsed === null) return [];
  const out: FindMatch[] = [];
  const size = (n: Node) => n.endIndex - n.startIndex;
  for (const match of query.matches(parsed.cached.tree.rootNode)) {
    if (match.captures.length === 0) continue;
    const chosen = capture === null
      ? match.captures.reduce((a, b) => (size(b.node) > size(a.node) ? b : a))
      : match.captures.find((c) => c.name === capture);
    if (chosen === undefined) continue;
    const captures: Record<string, string> = {};
    for (const c of match.captures) captures[c.name] ??= c.node.text.slice(0, 200);
    const node = chosen.node;
    out.push({
      path: source.path,
      range: source.range(source.byteAt(node.startIndex), source.byteAt(node.endIndex)),
      text: firstLine(node.text, 200),
      captures,
    });
  }
  return out;
}

/**
 * Runs one find over the workspace.
 *
 * @throws {KlbrError} `invalid_input` when every language searched refuses the query (the
 * message is the grammar's), or for a bad `capture`; the path check's codes for `path`.
 */
export async function findInWorkspace(
  service: CodeService,
  request: FindRequest,
): Promise<FindResult> {
  const trimmed = request.pattern.trim();
  const mode = trimmed.startsWith("(") || trimmed.startsWith("[") ? "query" : "symbol";
  const { files, cut } = await filesOf(service.root, request.path, service.deny);
  const result: FindResult = {
    mode,
    matches: [],
    truncated: cut,
    files_searched: 0,
    files_skipped: 0,
    refused_languages: {},
  };
  const queries = new Map<LanguageId, Query | string>();
  let compiled = 0;
  try {
    for (const file of files) {
      if (result.matches.length > request.max_results) break;
      let source: Source;
      try {
        source = await service.source(file, `find in ${file}`);
      } catch (error) {
        if (!(error instanceof KlbrError && error.code === "invalid_input")) throw error;
        result.files_skipped++;
        continue;
      }
      result.files_searched++;
      if (mode === "symbol") {
        result.matches.push(...await symbolMatches(service, source, trimmed));
        continue;
      }
      // A walk yields only files a grammar reads; a file named by the path may be any file.
      const id = languageOf(file);
      if (id === null) {
        throw new KlbrError(
          "invalid_input",
          `cannot find in ${file}: no grammar for this kind of file (got ${JSON.stringify(file)})`,
        );
      }
      const query = await compile(id, request.pattern, queries);
      if (typeof query === "string") {
        result.refused_languages[id] = query;
        continue;
      }
      compiled++;
      result.matches.push(...await queryMatches(service, source, query, request.capture));
    }
  } finally {
    for (const q of queries.values()) if (typeof q !== "string") q.delete();
  }
  if (mode === "query" && compiled === 0 && Object.keys(result.refused_languages).length > 0) {
    const [lang, message] = Object.entries(result.refused_languages)[0];
    throw new KlbrError(
      "invalid_input",
      `cannot find: the ${lang} grammar refuses the query: ${message}`,
    );
  }
  if (result.matches.length > request.max_results) result.truncated = true;
  result.matches = result.matches.slice(0, request.max_results);
  return result;
}
