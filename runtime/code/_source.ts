/**
 * One file's content as the code domain sees it: its bytes, its UTF-8 text, its content
 * hash, and the byte and line arithmetic that turns tree-sitter positions (UTF-16 indices in
 * web-tree-sitter) into the byte and line spans of a version-bound range.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";
import { resolveInWorkspace } from "../workspace/mod.ts";
import type { CodeRange } from "./_schemas.ts";

/** The largest file the code domain reads, parses or patches. */
const MAX_SOURCE_BYTES = 4 * 1024 * 1024;

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

/** Returns the lower-case hex sha256 of `bytes`. */
async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** A file's content at one version. */
export class Source {
  /** The workspace-relative, `/`-separated path. */
  readonly path: string;
  /** The absolute real path it was read from. */
  readonly real: string;
  readonly bytes: Uint8Array;
  readonly text: string;
  /** The sha256 of `bytes`, hex. */
  readonly hash: string;
  #utf8At: Uint32Array | null | undefined;
  #lineStarts: Uint32Array | undefined;

  /** Wraps content already decoded and hashed; see {@linkcode sourceFromBytes}. */
  constructor(path: string, real: string, bytes: Uint8Array, text: string, hash: string) {
    this.path = path;
    this.real = real;
    this.bytes = bytes;
    this.text = text;
    this.hash = hash;
  }

  /** The UTF-8 byte offset of a UTF-16 index into `text`. */
  byteAt(index: number): number {
    if (this.#utf8At === undefined) this.#utf8At = utf8Offsets(this.text);
    return this.#utf8At === null ? index : this.#utf8At[index];
  }

  /** The 1-based line holding byte `offset` (the line after the last newline at the end). */
  lineAt(offset: number): number {
    this.#lineStarts ??= lineStarts(this.bytes);
    const starts = this.#lineStarts;
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  }

  /** How many lines the file has (a final newline ends the last line). */
  get lineCount(): number {
    this.#lineStarts ??= lineStarts(this.bytes);
    const n = this.#lineStarts.length;
    return this.bytes.length > 0 && this.bytes[this.bytes.length - 1] === 0x0a ? n - 1 : n;
  }

  /** The byte offset where 1-based `line` starts. */
  lineStart(line: number): number {
    this.#lineStarts ??= lineStarts(this.bytes);
    return line - 1 < this.#lineStarts.length ? this.#lineStarts[line - 1] : this.bytes.length;
  }

  /** The version-bound range of bytes `[start, end)`: its lines hold its first and last byte. */
  range(start: number, end: number): CodeRange {
    return {
      path: this.path,
      hash: this.hash,
      start_byte: start,
      end_byte: end,
      start_line: this.lineAt(start),
      end_line: this.lineAt(end > start ? end - 1 : start),
    };
  }
}

/** Null when `text` is ASCII (indices are offsets), else the byte offset of each index. */
function utf8Offsets(text: string): Uint32Array | null {
  // deno-lint-ignore no-control-regex
  if (!/[^\x00-\x7f]/.test(text)) return null;
  const out = new Uint32Array(text.length + 1);
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    out[i] = bytes;
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      // A surrogate pair is one 4-byte character; its low half starts nowhere of its own.
      out[++i] = bytes;
      bytes += 4;
    } else bytes += 3;
  }
  out[text.length] = bytes;
  return out;
}

function lineStarts(bytes: Uint8Array): Uint32Array {
  let count = 1;
  for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x0a) count++;
  const starts = new Uint32Array(count);
  let line = 1;
  for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x0a) starts[line++] = i + 1;
  return starts;
}

/**
 * Decodes and hashes `bytes` as the content of `path`.
 *
 * @throws {KlbrError} `invalid_input` when the bytes are not UTF-8 text.
 */
export async function sourceFromBytes(
  path: string,
  real: string,
  bytes: Uint8Array,
): Promise<Source> {
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch (cause) {
    throw new KlbrError("invalid_input", `cannot read ${path}: it is not UTF-8 text`, { cause });
  }
  return new Source(path, real, bytes, text, await sha256Hex(bytes));
}

/** Encodes text as UTF-8. */
export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/**
 * Reads a workspace file through the workspace's path check.
 *
 * @throws {KlbrError} `path_escape`, `not_found` or `path_invalid` from the path check;
 * `invalid_input` for a file over {@linkcode MAX_SOURCE_BYTES} or not UTF-8.
 */
export async function readSource(
  root: string,
  path: string,
  action: string,
  deny: string[] = [],
): Promise<Source> {
  const checked = await resolveInWorkspace(root, path, {
    action,
    label: "path",
    expect: "file",
    deny,
  });
  const bytes = await Deno.readFile(checked.real);
  if (bytes.length > MAX_SOURCE_BYTES) {
    throw new KlbrError(
      "invalid_input",
      `cannot ${action}: the file is over ${MAX_SOURCE_BYTES} bytes (got ${bytes.length})`,
    );
  }
  return await sourceFromBytes(checked.relative, checked.real, bytes);
}
