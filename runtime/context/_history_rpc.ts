/**
 * The `history.*` RPCs a cell calls (`workbench/klbr/history.py`): `history.search` over the
 * lexical index, `history.read` of the exact source text of one ref (an item, input, send,
 * Discord send, cell, cell output, summary or artifact), in slices.
 *
 * @module
 */

import { z } from "zod";
import { readArtifact } from "../../store/artifacts.ts";
import { getIndexedArtifact, searchHistory } from "../../store/history_index.ts";
import { parseHistoryRef, readHistorySource } from "../../store/history_sources.ts";
import type { Store } from "../../store/store.ts";
import { KlbrError } from "../core/mod.ts";
import type { RpcHandler } from "../kernel/mod.ts";

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

function parse<T extends z.ZodType>(schema: T, method: string, params: unknown): z.output<T> {
  const parsed = schema.safeParse(params);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new KlbrError(
      "invalid_input",
      `cannot ${method}: ${issue.path.join(".") || "params"} ${issue.message}`,
    );
  }
  return parsed.data;
}

/** Reads an artifact slice by bytes, decoded as UTF-8 (a cut character becomes U+FFFD). */
async function readArtifactSlice(
  store: Store,
  session: string,
  params: z.output<typeof ReadParams>,
): Promise<Record<string, unknown>> {
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
    unit: "bytes",
    next_offset: end < bytes ? end : null,
    meta: { cell_id: indexed?.cellId ?? null },
  };
}

/**
 * The `history.search` and `history.read` handlers of one session.
 *
 * @example
 * ```ts
 * const rpc = { ...historyHandlers({ store, session: "default" }) };
 * ```
 */
export function historyHandlers(
  deps: { store: Store; session: string },
): Record<string, RpcHandler> {
  const { store, session } = deps;
  return {
    "history.search": (params) => {
      const p = parse(SearchParams, "search history", params);
      const found = searchHistory(store, session, {
        text: p.query,
        limit: p.limit,
        match: p.match,
      });
      return Promise.resolve({
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
      });
    },
    "history.read": async (params) => {
      const p = parse(ReadParams, "read history", params);
      if (parseHistoryRef(p.id).kind === "artifact") {
        return await readArtifactSlice(store, session, p);
      }
      const source = readHistorySource(store, session, p.id);
      const text = source.text.slice(p.offset, p.offset + p.length);
      const end = Math.min(source.text.length, p.offset + text.length);
      return {
        id: source.ref,
        kind: source.kind,
        text,
        offset: p.offset,
        length: text.length,
        total: source.text.length,
        unit: "characters",
        next_offset: end < source.text.length ? end : null,
        meta: source.meta,
      };
    },
  };
}
