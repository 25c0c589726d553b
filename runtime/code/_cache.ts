/**
 * Parse trees kept by content: the key is the language and the sha256 of the file's bytes, so
 * a file parsed once is not parsed again until its content changes, whatever its path or
 * mtime. Bounded by entry count and source bytes; an evicted tree's WASM memory is freed.
 *
 * @module
 */

import type { Tree } from "web-tree-sitter";
import type { LanguageId } from "./_languages.ts";
import type { Source } from "./_source.ts";

/** One cached parse. */
export interface CachedTree {
  language: LanguageId;
  source: Source;
  tree: Tree;
  /** Derived results computed once per content (the outline), keyed by name. */
  derived: Map<string, unknown>;
}

/** At most this many trees are cached. */
const MAX_ENTRIES = 128;
/** At most this many source bytes across the cached trees. */
const MAX_BYTES = 64 * 1024 * 1024;

/** A least-recently-used cache of parse trees by language and content hash. */
export class TreeCache {
  readonly #entries = new Map<string, CachedTree>();
  #bytes = 0;

  /** Returns the tree of this content, marking it recently used, or undefined. */
  get(language: LanguageId, hash: string): CachedTree | undefined {
    const key = `${language}:${hash}`;
    const entry = this.#entries.get(key);
    if (entry !== undefined) {
      this.#entries.delete(key);
      this.#entries.set(key, entry);
    }
    return entry;
  }

  /** Keeps a tree, evicting the least recently used beyond the limits; returns the entry. */
  put(language: LanguageId, source: Source, tree: Tree): CachedTree {
    const key = `${language}:${source.hash}`;
    const old = this.#entries.get(key);
    if (old !== undefined) {
      tree.delete();
      return old;
    }
    const entry = { language, source, tree, derived: new Map<string, unknown>() };
    this.#entries.set(key, entry);
    this.#bytes += source.bytes.length;
    for (const [k, e] of this.#entries) {
      if (this.#entries.size <= MAX_ENTRIES && this.#bytes <= MAX_BYTES) break;
      if (k === key) continue;
      this.#entries.delete(k);
      this.#bytes -= e.source.bytes.length;
      e.tree.delete();
    }
    return entry;
  }

  /** Frees every tree and empties the cache. */
  clear(): void {
    for (const entry of this.#entries.values()) entry.tree.delete();
    this.#entries.clear();
    this.#bytes = 0;
  }
}
