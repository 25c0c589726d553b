/**
 * What a workbench handle does with each frame its worker writes: a reply settles its
 * request, a stream chunk joins its cell's output, an `rpc` starts a host call under its
 * request, an `rpc_cancel` aborts one; and how the answer to an RPC goes back.
 *
 * @module
 */

import { type HostRpcReply, KlbrError, type WorkerFrame } from "../core/mod.ts";
import { type Pending, type PendingRequests, replyError } from "./_pending.ts";
import type { WorkerChannel } from "./_channel.ts";
import type { RpcDispatcher } from "./_rpc.ts";

/** Where {@linkcode routeWorkerFrame} delivers frames. */
export interface FrameRoutes {
  /** The requests still waiting for their reply. */
  pending: PendingRequests;
  /** The host RPC calls running. */
  rpc: RpcDispatcher;
  /** Settles a request once (its running RPCs are ended first). */
  settle(pending: Pending, how: { value: unknown } | { error: unknown }): void;
}

/**
 * Delivers one frame of a live worker. A frame for a request that already ended is dropped:
 * a late reply, or output after the cell's end.
 */
export function routeWorkerFrame(frame: WorkerFrame, to: FrameRoutes): void {
  switch (frame.kind) {
    case "ok":
    case "error": {
      const pending = to.pending.get(frame.id);
      if (!pending) return; // a late reply to a request that already ended
      if (frame.kind === "ok") to.settle(pending, { value: frame.result });
      else to.settle(pending, { error: replyError(pending, frame) });
      return;
    }
    case "stream": {
      const pending = to.pending.get(frame.id);
      if (!pending || pending.kind !== "execute") return;
      (frame.name === "stdout" ? pending.out : pending.err).add(frame.text);
      try {
        pending.onStream?.(frame.name, frame.text);
      } catch {
        // Live output is lossy; a failing listener must not end the cell.
      }
      return;
    }
    case "rpc": {
      const parent = to.pending.get(frame.parent);
      const open = parent && (parent.kind === "execute" || parent.kind === "hook");
      const call = to.rpc.start(frame, open ? parent : null);
      if (call && parent) {
        parent.rpcs.set(frame.id, call);
        call.finally(() => parent.rpcs.delete(frame.id));
      }
      return;
    }
    case "rpc_cancel":
      to.rpc.abort(frame.id);
      return;
  }
}

/**
 * Sends the answer to an RPC; a result too large for a frame becomes an `rpc_error` the cell
 * can read. Any other failure to send is dropped: the worker is ending.
 */
export function sendRpcReply(channel: WorkerChannel, frame: HostRpcReply): void {
  try {
    channel.send(frame);
  } catch (error) {
    if (frame.kind === "rpc_ok" && error instanceof KlbrError) {
      channel.send({
        kind: "rpc_error",
        id: frame.id,
        code: error.code,
        message: error.message,
      });
    }
  }
}
