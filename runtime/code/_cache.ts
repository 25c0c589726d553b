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

/** Limits of a {@linkcode TreeCache}. */
export interface TreeCacheLimits {
  /** At most this many trees. @default 128 */
  entries?: number;
  /** At most this many source bytes across the trees. @default 64 MiB */
  bytes?: number;
}

/** A least-recently-used cache of parse trees by language and content hash. */
export class TreeCache {
  readonly #entries = new Map<string, CachedTree>();
  readonly #maxEntries: number;
  readonly #maxBytes: number;
  #bytes = 0;

  /** Creates an empty cache with the given limits. */
  constructor(limits: TreeCacheLimits = {}) {
    this.#maxEntries = limits.entries ?? 128;
    this.#maxBytes = limits.bytes ?? 64 * 1024 * 1024;
  }

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
      if (this.#entries.size <= this.#maxEntries && this.#bytes <= this.#maxBytes) break;
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

  /** How many trees are held. */
  get size(): number {
    return this.#entries.size;
  }
}
