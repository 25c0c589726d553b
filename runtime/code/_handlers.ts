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
import type { SandboxBase } from "../sandbox/mod.ts";
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
  /** The daemon's confinement of its cells; a patch then writes through a confined process. */
  sandbox?: SandboxBase;
}

const services = new Map<string, CodeService>();

/**
 * The service of `deps`: its own, else the process's one {@linkcode CodeService} for the
 * workspace, so every session of a daemon shares one tree cache.
 */
function sharedCodeService(deps: CodeRpcOptions): CodeService {
  if (deps.service !== undefined) return deps.service;
  let service = services.get(deps.workspace);
  if (service === undefined) {
    service = new CodeService({
      root: deps.workspace,
      deny: deps.deny,
      readOnly: deps.readOnly,
      sandbox: deps.sandbox,
    });
    services.set(deps.workspace, service);
  }
  return service;
}

type Call = RpcCall<CodeRpcOptions>;
const ROLES = ["workbench"] as const;

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
  defineRpc({
    name: "code.outline",
    summary: "Outlines a workspace file's symbols at its current version (`docs/code.md`).",
    roles: ROLES,
    args: OutlineParams,
    reply: OutlineReply,
    handler: (p, { deps }: Call) => sharedCodeService(deps).outline(p.path),
  }),
  defineRpc({
    name: "code.symbol",
    summary: "Finds one symbol of a file by name or qualified name, with its range.",
    roles: ROLES,
    args: SymbolParams,
    reply: SymbolReply,
    handler: (p, { deps }: Call) => sharedCodeService(deps).symbol(p.path, p.name, p.kind),
  }),
  defineRpc({
    name: "code.find",
    summary: "Runs a tree-sitter query or a symbol-name glob over a path or a glob.",
    roles: ROLES,
    args: FindParams,
    reply: FindReply,
    handler: (p, { deps }: Call) => findInWorkspace(sharedCodeService(deps), p),
  }),
  defineRpc({
    name: "code.read",
    summary: "Reads a version-bound range; a file that moved on answers `ok: false`, stale.",
    roles: ROLES,
    args: ReadParams,
    reply: ReadReply,
    handler: (p, { deps }: Call) => sharedCodeService(deps).read(p.range),
  }),
  defineRpc({
    name: "code.lines",
    summary: "Reads whole lines of a file as a version-bound range with their text.",
    roles: ROLES,
    args: LinesParams,
    reply: LinesReply,
    handler: (p, { deps }: Call) => sharedCodeService(deps).lines(p.path, p.start, p.end),
  }),
  // Every edit applies or none does; the `code.patch` record naming the cell is committed
  // before the cell hears that it applied.
  defineRpc({
    name: "code.patch",
    summary: "Applies checked, all-or-none edits of version-bound ranges; records `code.patch`. " +
      "A stale range or a new syntax error answers `ok: false`, nothing written.",
    roles: ROLES,
    args: PatchParams,
    reply: PatchReply,
    handler: async (p, call: Call) => {
      const { deps } = call;
      const outcome = await applyPatch(sharedCodeService(deps), p.edits);
      if (!outcome.ok) return outcome;
      const patchId = newId("patch");
      const seq = appendEvent(deps.store, deps.session, "code.patch", {
        patch_id: patchId,
        cell_id: call.cell,
        files: outcome.files,
      });
      return { ...outcome, patch_id: patchId, seq };
    },
  }),
];
