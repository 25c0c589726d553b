/**
 * The `code.*` RPCs of a session's workbench: outline, symbol, find, read, lines and patch.
 * A patch that applies is recorded as a durable `code.patch` record naming the cell that made
 * it, committed before the cell hears that it applied.
 *
 * @module
 */

import type { z } from "zod";
import { appendEvent } from "../../store/events.ts";
import type { Store } from "../../store/store.ts";
import { describeIssues, KlbrError, newId } from "../core/mod.ts";
import type { RpcHandler } from "../kernel/mod.ts";
import { findInWorkspace } from "./_find.ts";
import { applyPatch } from "./_patch.ts";
import {
  FindParams,
  LinesParams,
  OutlineParams,
  PatchParams,
  ReadParams,
  SymbolParams,
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

function parse<T extends z.ZodType>(schema: T, params: unknown, method: string): z.output<T> {
  const parsed = schema.safeParse(params);
  if (!parsed.success) {
    throw new KlbrError("invalid_input", `cannot call ${method}: ${describeIssues(parsed.error)}`);
  }
  return parsed.data;
}

/**
 * Returns the `code.*` RPC handlers for one session's workbench.
 *
 * @throws {KlbrError} (from a handler) `invalid_input` for bad params, a file without a
 *   grammar, over 4 MiB or not UTF-8, an ambiguous symbol or a range that does not fit its
 *   file; `not_found` for a missing file or symbol; `path_escape` for a path outside the
 *   workspace; `forbidden` for a patch of a read-only path (klbr's own code, the git hooks and
 *   config). A stale range or a patch that adds a syntax error is not an error: the result
 *   says `ok: false` with the reason.
 * @example
 * ```ts
 * new KernelSupervisor({ ..., rpc: { ...codeHandlers({ store, session, workspace }) } });
 * ```
 */
export function codeHandlers(options: CodeRpcOptions): Record<string, RpcHandler> {
  const service = options.service ??
    sharedCodeService(options.workspace, { deny: options.deny, readOnly: options.readOnly });
  return {
    "code.outline": (params) => service.outline(parse(OutlineParams, params, "code.outline").path),
    "code.symbol": (params) => {
      const p = parse(SymbolParams, params, "code.symbol");
      return service.symbol(p.path, p.name, p.kind);
    },
    "code.find": (params) => findInWorkspace(service, parse(FindParams, params, "code.find")),
    "code.read": (params) => service.read(parse(ReadParams, params, "code.read").range),
    "code.lines": (params) => {
      const p = parse(LinesParams, params, "code.lines");
      return service.lines(p.path, p.start, p.end);
    },
    "code.patch": async (params, ctx) => {
      const { edits } = parse(PatchParams, params, "code.patch");
      const outcome = await applyPatch(service, edits);
      if (!outcome.ok) return outcome;
      const patchId = newId("patch");
      const seq = appendEvent(options.store, options.session, "code.patch", {
        patch_id: patchId,
        cell_id: ctx.cell,
        files: outcome.files,
      });
      return { ...outcome, patch_id: patchId, seq };
    },
  };
}
