/**
 * The `code.*` RPCs of a session's cells: outline, symbol, find, read, lines and patch.
 * A patch that applies is recorded as a durable `code.patch` record naming the cell that made
 * it, committed before the cell hears that it applied.
 *
 * @module
 */

import { appendEvent } from "../../store/tables/events.ts";
import type { Store } from "../../store/store.ts";
import { newId } from "../core/mod.ts";
import { defineRpc, type RpcCall } from "../kernel/mod.ts";
import { findInWorkspace } from "./_find.ts";
import { applyPatch } from "./_patch.ts";
import {
  FindParams,
  FindReply,
  LinesParams,
  LinesReply,
  OutlineParams,
  OutlineReply,
  PatchParams,
  PatchReply,
  ReadParams,
  ReadReply,
  SymbolParams,
  SymbolReply,
} from "./_schemas.ts";
import { CodeService } from "./_service.ts";

/** What the handlers need: the session's store and workspace. */
export interface CodeRpcOptions {
  store: Store;
  session: string;
  /** The workspace root every path is resolved in. */
  workspace: string;
  /** The service to use; by default the daemon's one service for this workspace. */
  service?: CodeService;
  /** Directories never part of the workspace (the state directory). @default {[]} */
  deny?: string[];
  /** Paths a patch may not write (klbr's own code, the git hooks and config). @default {[]} */
  readOnly?: string[];
}

const services = new Map<string, CodeService>();

/**
 * Returns the process's one {@linkcode CodeService} for `workspace`, so every session of a
 * daemon shares one tree cache.
 */
export function sharedCodeService(
  workspace: string,
  paths: { deny?: string[]; readOnly?: string[] } = {},
): CodeService {
  let service = services.get(workspace);
  if (service === undefined) {
    service = new CodeService({ root: workspace, deny: paths.deny, readOnly: paths.readOnly });
    services.set(workspace, service);
  }
  return service;
}

/** What the `code.*` RPCs are bound to: {@linkcode CodeRpcOptions}. */
export type CodeRpcDeps = CodeRpcOptions;

function serviceOf(deps: CodeRpcDeps): CodeService {
  return deps.service ??
    sharedCodeService(deps.workspace, { deny: deps.deny, readOnly: deps.readOnly });
}

const ROLES = ["workbench"] as const;

/** `code.outline`: a file's symbols at one version. */
export const codeOutlineRpc = defineRpc({
  name: "code.outline",
  summary: "Outlines a workspace file's symbols at its current version (`docs/code.md`).",
  roles: ROLES,
  args: OutlineParams,
  reply: OutlineReply,
  handler: (p, { deps }: RpcCall<CodeRpcDeps>) => serviceOf(deps).outline(p.path),
});

/** `code.symbol`: one symbol by name or qualified name. */
export const codeSymbolRpc = defineRpc({
  name: "code.symbol",
  summary: "Finds one symbol of a file by name or qualified name, with its range.",
  roles: ROLES,
  args: SymbolParams,
  reply: SymbolReply,
  handler: (p, { deps }: RpcCall<CodeRpcDeps>) => serviceOf(deps).symbol(p.path, p.name, p.kind),
});

/** `code.find`: a tree-sitter query or a symbol-name glob over files. */
export const codeFindRpc = defineRpc({
  name: "code.find",
  summary: "Runs a tree-sitter query or a symbol-name glob over a path or a glob.",
  roles: ROLES,
  args: FindParams,
  reply: FindReply,
  handler: (p, { deps }: RpcCall<CodeRpcDeps>) => findInWorkspace(serviceOf(deps), p),
});

/** `code.read`: the text of a version-bound range, or why it is stale. */
export const codeReadRpc = defineRpc({
  name: "code.read",
  summary: "Reads a version-bound range; a file that moved on answers `ok: false`, stale.",
  roles: ROLES,
  args: ReadParams,
  reply: ReadReply,
  handler: (p, { deps }: RpcCall<CodeRpcDeps>) => serviceOf(deps).read(p.range),
});

/** `code.lines`: whole lines as a version-bound range. */
export const codeLinesRpc = defineRpc({
  name: "code.lines",
  summary: "Reads whole lines of a file as a version-bound range with their text.",
  roles: ROLES,
  args: LinesParams,
  reply: LinesReply,
  handler: (p, { deps }: RpcCall<CodeRpcDeps>) => serviceOf(deps).lines(p.path, p.start, p.end),
});

/**
 * `code.patch`: every edit applies or none does; an applied patch is recorded as a durable
 * `code.patch` record naming its cell, committed before the cell hears that it applied.
 */
export const codePatchRpc = defineRpc({
  name: "code.patch",
  summary: "Applies checked, all-or-none edits of version-bound ranges; records `code.patch`. " +
    "A stale range or a new syntax error answers `ok: false`, nothing written.",
  roles: ROLES,
  args: PatchParams,
  reply: PatchReply,
  handler: async (p, call: RpcCall<CodeRpcDeps>) => {
    const { deps } = call;
    const outcome = await applyPatch(serviceOf(deps), p.edits);
    if (!outcome.ok) return outcome;
    const patchId = newId("patch");
    const seq = appendEvent(deps.store, deps.session, "code.patch", {
      patch_id: patchId,
      cell_id: call.cell,
      files: outcome.files,
    });
    return { ...outcome, patch_id: patchId, seq };
  },
});

/**
 * The `code.*` RPCs of a session's cells, bound to {@linkcode CodeRpcOptions}.
 *
 * Their handlers throw `KlbrError` `invalid_input` for a file without a grammar,
 * over 4 MiB or not UTF-8, an ambiguous symbol or a range that does not fit its file;
 * `not_found` for a missing file or symbol; `path_escape` for a path outside the workspace;
 * `forbidden` for a patch of a read-only path (klbr's own code, the git hooks and config). A
 * stale range or a patch that adds a syntax error is not an error: the result says `ok: false`
 * with the reason.
 *
 * @example
 * ```ts
 * new KernelSupervisor({ ..., rpc: bindRpcs(codeRpcs, { store, session, workspace }) });
 * ```
 */
export const codeRpcs = [
  codeOutlineRpc,
  codeSymbolRpc,
  codeFindRpc,
  codeReadRpc,
  codeLinesRpc,
  codePatchRpc,
];
