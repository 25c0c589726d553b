/**
 * The `history.*` RPCs a cell calls (`workbench/klbr/history.py`): `history.search` over the
 * lexical index, `history.read` of the exact source text of one ref (an item, input, send,
 * Discord send, cell, cell output, summary or artifact), in slices; and `artifact.read`, the bytes
 * of a spooled output, for a session's cells and for jobs.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { z } from "zod";
import { readArtifact } from "../../store/tables/artifacts.ts";
import { getIndexedArtifact, searchHistory } from "../../store/tables/history_index.ts";
import { parseHistoryRef, readHistorySource } from "../../store/tables/history_sources.ts";
import type { Store } from "../../store/store.ts";
import { KlbrError } from "../core/mod.ts";
import { defineRpc, type RpcCall } from "../kernel/mod.ts";
import { wholeCharacters } from "./_budget.ts";

/** The longest slice one `history.read` returns: 1,000,000 characters (bytes for artifacts). */
export const MAX_READ_LENGTH = 1_000_000;

const SearchParams = z.strictObject({
  query: z.string().min(1).max(2000),
  limit: z.int().min(1).max(100).default(10),
  match: z.enum(["all", "any"]).default("all"),
});

const ReadParams = z.strictObject({
  id: z.string().min(1).max(200),
  offset: z.int().min(0).default(0),
  length: z.int().min(1).max(MAX_READ_LENGTH).default(4000),
});

/** Reads an artifact slice by bytes, decoded as UTF-8 (a cut character becomes U+FFFD). */
async function readArtifactSlice(
  store: Store,
  session: string,
  params: z.output<typeof ReadParams>,
): Promise<z.input<typeof HistoryPage>> {
  const id = parseHistoryRef(params.id).key;
  const indexed = getIndexedArtifact(store, id);
  if (indexed !== undefined && indexed.session !== session) {
    throw new KlbrError("not_found", `cannot read history: nothing is recorded as ${params.id}`);
  }
  const { data, bytes } = await readArtifact(store.stateDir, id, {
    offset: params.offset,
    length: params.length,
  });
  const end = params.offset + data.length;
  return {
    id: params.id,
    kind: "artifact",
    text: new TextDecoder().decode(data),
    offset: params.offset,
    length: data.length,
    total: bytes,
    unit: "bytes" as const,
    next_offset: end < bytes ? end : null,
    meta: { cell_id: indexed?.cellId ?? null },
  };
}

/**
 * Where a slice of `length` from `offset` ends: never between the two halves of a character
 * outside the BMP (a lone surrogate reaches the cell as a broken character, and two slices
 * would not join back to the text), one unit sooner, or one later when the slice would
 * otherwise be empty (`length` 1 at an emoji), so paging by `next_offset` always moves.
 */
function sliceEnd(text: string, offset: number, length: number): number {
  const end = Math.min(text.length, offset + length);
  const whole = wholeCharacters(text, end);
  return whole > offset ? whole : Math.min(text.length, end + 1);
}

/** What the `history.*` RPCs are bound to: the store and the session whose history they read. */
export interface HistoryRpcDeps {
  store: Store;
  session: string;
}

const HistoryPage = z.strictObject({
  id: z.string(),
  kind: z.string(),
  text: z.string(),
  offset: z.int(),
  length: z.int(),
  total: z.int(),
  unit: z.enum(["characters", "bytes"]),
  next_offset: z.int().nullable(),
  meta: z.unknown(),
});

/** `history.search`: the lexical index of the session's history, best first. */
export const historySearchRpc = defineRpc({
  name: "history.search",
  summary: "Searches the session's history by words, best first; each hit names an id for " +
    "`history.read`.",
  roles: ["workbench"],
  action: "search history",
  args: SearchParams,
  reply: z.strictObject({
    results: z.array(z.strictObject({
      id: z.string(),
      kind: z.string(),
      snippet: z.string(),
      rank: z.int(),
      score: z.number(),
      at: z.number(),
    })),
    truncated: z.boolean(),
    query: z.unknown(),
  }),
  handler: (p, { deps }: RpcCall<HistoryRpcDeps>) => {
    const found = searchHistory(deps.store, deps.session, {
      text: p.query,
      limit: p.limit,
      match: p.match,
    });
    return {
      results: found.hits.map((hit) => ({
        id: hit.ref,
        kind: hit.kind,
        snippet: hit.snippet,
        rank: hit.rank,
        score: hit.score,
        at: hit.at,
      })),
      truncated: found.truncated,
      query: found.query,
    };
  },
});

/** `history.read`: the exact source text of one ref, in slices (bytes for an artifact). */
export const historyReadRpc = defineRpc({
  name: "history.read",
  summary: "Reads the exact source text of one history id (input, send, item, cell, output, " +
    "summary, artifact) in slices.",
  roles: ["workbench"],
  action: "read history",
  args: ReadParams,
  reply: HistoryPage,
  handler: async (p, { deps }: RpcCall<HistoryRpcDeps>) => {
    const { store, session } = deps;
    if (parseHistoryRef(p.id).kind === "artifact") {
      return await readArtifactSlice(store, session, p);
    }
    const source = readHistorySource(store, session, p.id);
    const end = sliceEnd(source.text, p.offset, p.length);
    const text = source.text.slice(p.offset, end);
    return {
      id: source.ref,
      kind: source.kind,
      text,
      offset: p.offset,
      length: text.length,
      total: source.text.length,
      unit: "characters" as const,
      next_offset: end < source.text.length ? end : null,
      meta: source.meta,
    };
  },
});

/** The `history.*` RPCs of a session's cells. */
export const historyRpcs = [historySearchRpc, historyReadRpc];

/**
 * `artifact.read`: a byte range of a spooled output, for a session's cells and for jobs. An
 * artifact is content-addressed; any process that was shown its id may read it.
 */
export const artifactReadRpc = defineRpc({
  name: "artifact.read",
  summary: "Reads a byte range of a spooled output, base64.",
  roles: ["workbench", "job"],
  action: "read artifact",
  args: z.object({
    id: z.string(),
    offset: z.int().nonnegative().optional(),
    length: z.int().positive().optional(),
  }),
  reply: z.strictObject({ data_b64: z.string(), bytes: z.int() }),
  handler: async (p, { deps }: RpcCall<{ store: Store }>) => {
    const { data, bytes } = await readArtifact(deps.store.stateDir, p.id, {
      offset: p.offset,
      length: p.length,
    });
    return { data_b64: Buffer.from(data).toString("base64"), bytes };
  },
});
