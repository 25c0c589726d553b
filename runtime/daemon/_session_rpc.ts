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
import type { Session } from "../session/mod.ts";
import type { SessionDeps } from "./_session_workers.ts";

/** What the session's RPCs need beyond the session itself. */
export interface SessionRpcDeps extends SessionDeps {
  /** The Discord transport, when the configuration has a `discord` node. */
  discord?: DiscordEffects;
  /** The daemon's timers, jobs and child model calls. */
  jobs: Jobs;
}

/**
 * The RPC handlers of one session's workbench; they act on `parts`, the {@linkcode Session},
 * through its named methods (`runningFrame()`, `pinnedRelease()`, `activate()`, …).
 */
export function sessionRpcHandlers(
  deps: SessionRpcDeps,
  parts: Session,
): Record<string, RpcHandler> {
  const { store } = deps;
  const session = parts.id;
  return {
    // A local send is a durable publication: committed before the cell hears it succeeded.
    "local.send": (params, ctx) => Promise.resolve(parts.sendLocal(params, ctx.cell)),
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
      frame: parts.runningFrame.bind(parts),
    }),
    ...deps.jobs.handlers({
      session,
      frame: parts.runningFrame.bind(parts),
      release: () => parts.activeRelease().releaseId,
      workspace: deps.workspace,
    }),
    ...behaviorHandlers({
      store,
      session,
      python: deps.python,
      repoRoot: deps.repoRoot,
      workspace: deps.workspace,
      sandbox: deps.sandbox,
      activate: (releaseId, expectedEpoch, reason) =>
        parts.activate({ releaseId, expectedEpoch, reason }),
      // A cell sees the release its turn is pinned to (the active one outside a turn).
      pinned: parts.pinnedRelease.bind(parts),
    }),
    // A managed skill is offered from the next generation, started at the next boundary.
    ...skillHandlers({
      roots: deps.skillRoots,
      changed: parts.skillsChanged.bind(parts),
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
