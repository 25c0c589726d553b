/**
 * The host RPCs a cell of one session may call, beyond what the kernel serves itself
 * (`workspace.run`): `local.send`, `artifact.read`, `history.search` and `history.read`, the
 * `discord.*` effects, the `behavior.*` editing calls, the `hooks.*` calls, the `skills.write` and
 * `skills.delete` calls, the `code.*` tree-sitter calls, and the
 * `timers.*`, `jobs.*` and `llm` calls of unattended work.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { readArtifact } from "../../store/artifacts.ts";
import { behaviorHandlers } from "../behavior/mod.ts";
import { codeHandlers } from "../code/mod.ts";
import { historyHandlers } from "../context/mod.ts";
import { type DiscordEffects, discordHandlers } from "../discord/mod.ts";
import type { Jobs } from "../jobs/mod.ts";
import { type RpcHandler, skillHandlers } from "../kernel/mod.ts";
import { localSend } from "../session/mod.ts";
import type { SessionDeps, SessionParts } from "./_session_parts.ts";

/** What the session's RPCs need beyond the session's own parts. */
export interface SessionRpcDeps extends SessionDeps {
  /** The Discord transport, when the configuration has a `discord` node. */
  discord?: DiscordEffects;
  /** The one activation path, shared with the operator's `activate`. */
  activate: (releaseId: string, expectedEpoch: number, reason: string) => Promise<number>;
  /** The daemon's timers, jobs and child model calls. */
  jobs: Jobs;
}

/** The RPC handlers of one session's workbench. */
export function sessionRpcHandlers(
  deps: SessionRpcDeps,
  session: string,
  parts: SessionParts,
): Record<string, RpcHandler> {
  const { store } = deps;
  return {
    "local.send": (params, ctx) => {
      // A local send is a durable publication: committed before the cell hears it succeeded.
      const sent = localSend(store, session, parts.frame, params, ctx.cell);
      return Promise.resolve(sent);
    },
    "artifact.read": async (params) => {
      const p = params as { id?: unknown; offset?: unknown; length?: unknown };
      const { data, bytes } = await readArtifact(store.stateDir, String(p.id), {
        offset: typeof p.offset === "number" ? p.offset : undefined,
        length: typeof p.length === "number" ? p.length : undefined,
      });
      return { data_b64: Buffer.from(data).toString("base64"), bytes };
    },
    ...historyHandlers({ store, session }),
    ...discordHandlers({
      store,
      session,
      discord: deps.discord,
      frame: () => parts.frame,
    }),
    ...deps.jobs.handlers({
      session,
      frame: () => parts.frame,
      release: () => parts.behavior.releaseId,
      workspace: deps.workspace,
    }),
    ...behaviorHandlers({
      store,
      session,
      python: deps.python,
      repoRoot: deps.repoRoot,
      workspace: deps.workspace,
      sandbox: deps.sandbox,
      activate: deps.activate,
      // A cell sees the release its turn is pinned to (the active one outside a turn).
      pinned: () => {
        const pin = parts.pin ?? { frameId: null, ...parts.behavior };
        return { releaseId: pin.releaseId, frameId: pin.frameId };
      },
    }),
    // A managed skill is offered from the next generation, started at the next boundary.
    ...skillHandlers({
      roots: deps.skillRoots,
      changed: (change) => (parts.skillsChanged = change),
      offeredFrom: "your next turn: the workbench restarts before it, so variables are lost",
    }),
    ...codeHandlers({
      store,
      session,
      workspace: deps.workspace,
      deny: deps.stateDir === undefined ? [] : [deps.stateDir],
      readOnly: deps.protect,
    }),
  };
}
