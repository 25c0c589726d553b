/**
 * The code domain's reads: parse (cached by content hash), outline, one symbol, the text of a
 * version-bound range, a range of whole lines. Every file is read through the workspace's
 * path check; a range whose file has changed is refused with the current hash.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";
import type { SandboxBase } from "../sandbox/mod.ts";
import { type CachedTree, TreeCache } from "./_cache.ts";
import { type Grammar, grammar } from "./_grammars.ts";
import { languageOf } from "./_languages.ts";
import { type CodeSymbol, type Outline, outlineOf } from "./_outline.ts";
import type { CodeRange } from "./_schemas.ts";
import { readSource, type Source } from "./_source.ts";

/** A range refused because its file changed: the hash it carries and the file's now. */
export interface StaleRange {
  path: string;
  range_hash: string;
  current_hash: string;
}

/** The answer to a read of a range: its text, or why it was refused. */
export type ReadOutcome =
  | { ok: true; text: string; range: CodeRange }
  | { ok: false; reason: "stale"; stale: StaleRange[] };

/** Options for {@linkcode CodeService}. */
export interface CodeServiceOptions {
  /** The workspace root; every path is resolved inside it. */
  root: string;
  /** Directories never part of the workspace (the state directory): refused, never walked. */
  deny?: string[];
  /** Paths a patch may not write (klbr's own code, the git hooks and config). @default [] */
  readOnly?: string[];
  /**
   * The daemon's confinement of its cells: a patch's files are then written by a process
   * confined as a cell's `workspace.run` is (`_write.ts`). @default unconfined: by the host
   */
  sandbox?: SandboxBase;
}

/** Counts that show the cache at work. */
export interface CodeStats {
  /** Files parsed (a cache miss). */
  parses: number;
  /** Parses avoided because the content's tree was cached. */
  hits: number;
}

/** One workspace's parsing, outlines and reads, with one tree cache. */
export class CodeService {
  readonly root: string;
  /** Directories never part of the workspace: refused, never walked. */
  readonly deny: string[];
  /** Paths a patch may not write: read, but never changed. */
  readonly readOnly: string[];
  /** Where a patch's writes are confined; null: the host writes them itself. */
  readonly sandbox: SandboxBase | null;
  readonly #cache = new TreeCache();
  readonly #stats: CodeStats = { parses: 0, hits: 0 };
  #queue: Promise<unknown> = Promise.resolve();

  /** Serves the workspace at `options.root`. */
  constructor(options: CodeServiceOptions) {
    this.root = options.root;
    this.deny = options.deny ?? [];
    this.readOnly = options.readOnly ?? [];
    this.sandbox = options.sandbox ?? null;
  }

  /** Parse counts so far (a copy). */
  get stats(): CodeStats {
    return { ...this.#stats };
  }

  /** Frees every cached tree (their memory is WASM's, not the garbage collector's). */
  dispose(): void {
    this.#cache.clear();
  }

  /** Runs `fn` after every earlier `exclusive` call has settled (the patch lock). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  /** Reads a workspace file through the path check. */
  source(path: string, action: string): Promise<Source> {
    return readSource(this.root, path, action, this.deny);
  }

  /**
   * Returns the tree of `source`, parsing it only when this content is not cached; null when
   * the file's language has no grammar. Use the tree before the next `await`: a later parse
   * may evict it.
   */
  async parsed(source: Source): Promise<{ grammar: Grammar; cached: CachedTree } | null> {
    const id = languageOf(source.path);
    if (id === null) return null;
    const g = await grammar(id);
    const hit = this.#cache.get(id, source.hash);
    if (hit !== undefined) {
      this.#stats.hits++;
      return { grammar: g, cached: hit };
    }
    const tree = g.parser.parse(source.text);
    if (tree === null) {
      throw new KlbrError("internal", `cannot parse ${source.path}: the parser gave no tree`);
    }
    this.#stats.parses++;
    return { grammar: g, cached: this.#cache.put(id, source, tree) };
  }

  /** The outline of a source, computed once per content. */
  async outlineOfSource(source: Source, action: string): Promise<Outline> {
    const parsed = await this.parsed(source);
    if (parsed === null) {
      throw new KlbrError(
        "invalid_input",
        `cannot ${action}: no grammar for this kind of file (got ${JSON.stringify(source.path)})`,
      );
    }
    const { grammar: g, cached } = parsed;
    let outline = cached.derived.get("outline") as Outline | undefined;
    if (outline === undefined) {
      outline = outlineOf(g, cached);
      cached.derived.set("outline", outline);
    }
    return outline.path === source.path ? outline : atPath(outline, source.path);
  }

  /**
   * Returns the outline of the workspace file at `path`.
   *
   * @throws {KlbrError} `invalid_input` for a file without a grammar, over the size cap or
   * not UTF-8; the path check's `path_escape`, `not_found`, `path_invalid`.
   */
  async outline(path: string): Promise<Outline> {
    const action = `outline ${path}`;
    return await this.outlineOfSource(await this.source(path, action), action);
  }

  /**
   * Returns the one symbol of `path` whose qualified name (or, failing that, plain name) is
   * `name`, narrowed by `kind` when given.
   *
   * @throws {KlbrError} `not_found` when none matches; `invalid_input` when several do (the
   * message lists them with their lines); as {@linkcode outline}.
   */
  async symbol(path: string, name: string, kind: string | null): Promise<CodeSymbol> {
    const outline = await this.outline(path);
    const ofKind = outline.symbols.filter((s) => kind === null || s.kind === kind);
    let found = ofKind.filter((s) => s.qualified_name === name);
    if (found.length === 0) found = ofKind.filter((s) => s.name === name);
    const what = kind === null ? JSON.stringify(name) : `${kind} ${JSON.stringify(name)}`;
    if (found.length === 0) {
      throw new KlbrError(
        "not_found",
        `cannot find symbol ${what} in ${outline.path}: no such symbol (got ${outline.symbols.length} symbols; see outline)`,
      );
    }
    if (found.length > 1) {
      const list = found.slice(0, 10).map((s) =>
        `${s.kind} ${s.qualified_name} at line ${s.range.start_line}`
      );
      throw new KlbrError(
        "invalid_input",
        `cannot pick symbol ${what} in ${outline.path}: ${found.length} symbols match (got ${
          list.join("; ")
        }); pass kind= or a qualified name`,
      );
    }
    return found[0];
  }

  /**
   * Returns the text of a version-bound range, or a refusal naming the file's current hash
   * when the file changed since the range was taken.
   *
   * @throws {KlbrError} `invalid_input` for a range that does not fit the file it names; as
   * {@linkcode outline} for the path.
   */
  async read(range: CodeRange): Promise<ReadOutcome> {
    const source = await this.source(range.path, `read ${range.path}`);
    if (source.hash !== range.hash) {
      return {
        ok: false,
        reason: "stale",
        stale: [{ path: source.path, range_hash: range.hash, current_hash: source.hash }],
      };
    }
    checkRange(source, range, "read");
    const text = new TextDecoder().decode(source.bytes.subarray(range.start_byte, range.end_byte));
    return { ok: true, text, range: { ...range, path: source.path } };
  }

  /**
   * Returns the range of whole lines `start`…`end` (1-based, inclusive) of a file as it is
   * now, with their text.
   *
   * @throws {KlbrError} `invalid_input` for lines past the end or `end` before `start`; as
   * {@linkcode outline} for the path.
   */
  async lines(
    path: string,
    start: number,
    end: number | null,
  ): Promise<{ range: CodeRange; text: string }> {
    const source = await this.source(path, `read lines of ${path}`);
    const last = end ?? start;
    const count = Math.max(source.lineCount, 1);
    if (last < start || last > count) {
      throw new KlbrError(
        "invalid_input",
        `cannot read lines of ${source.path}: lines must lie in 1-${count} with end >= start (got ${start}-${last})`,
      );
    }
    const from = source.lineStart(start);
    const to = last >= count ? source.bytes.length : source.lineStart(last + 1);
    const range = source.range(from, to);
    return { range, text: new TextDecoder().decode(source.bytes.subarray(from, to)) };
  }
}

/**
 * The outline of the same content at another path. A tree and its outline are cached by
 * content, so they carry the path of the first file read with it; a copy's symbols must name
 * the copy, or a patch of them would change the original.
 */
function atPath(outline: Outline, path: string): Outline {
  return {
    ...outline,
    path,
    symbols: outline.symbols.map((s) => ({ ...s, range: { ...s.range, path } })),
  };
}

/**
 * Checks that a range whose hash matches `source` also fits it: inside the file, on
 * character boundaries, with the lines its bytes give.
 *
 * @throws {KlbrError} `invalid_input` naming what does not fit.
 */
export function checkRange(source: Source, range: CodeRange, action: string): void {
  const size = source.bytes.length;
  const continuation = (at: number) => at < size && (source.bytes[at] & 0xc0) === 0x80;
  let problem: string | null = null;
  if (range.end_byte > size) problem = `end_byte is past the end of the file (${size} bytes)`;
  else if (continuation(range.start_byte) || continuation(range.end_byte)) {
    problem = "a byte offset falls inside a UTF-8 character";
  } else {
    const expected = source.range(range.start_byte, range.end_byte);
    if (expected.start_line !== range.start_line || expected.end_line !== range.end_line) {
      problem =
        `its lines do not match its bytes (expected ${expected.start_line}-${expected.end_line})`;
    }
  }
  if (problem !== null) {
    throw new KlbrError(
      "invalid_input",
      `cannot ${action} ${source.path}: ${problem} (got bytes ${range.start_byte}-${range.end_byte}, lines ${range.start_line}-${range.end_line})`,
    );
  }
}
