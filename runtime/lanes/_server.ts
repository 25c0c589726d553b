/**
 * The daemon's HTTP surface: `/health`, the UI's static files and the v2 lane WebSocket.
 *
 * @module
 */

import { Hono } from "hono";
import { upgradeWebSocket } from "hono/deno";
import { extname, join } from "node:path";
import { errorReply } from "./_replies.ts";
import { LaneConnection, type LaneHost } from "./_lane_connection.ts";
import { isLoopbackOrigin } from "./_loopback.ts";
import { type Logger, SerialRunner } from "../core/mod.ts";

/** What {@linkcode createApp} needs. */
export interface AppDeps {
  /** The lane protocol's view of the daemon. */
  lanes: LaneHost;
  /** Answers `/health`; `ok: false` makes the status 503. */
  health: () => Record<string, unknown> & { ok: boolean };
  /** Directory of the built UI, or undefined when there is none. */
  uiDir?: string;
  /** Logger for refused connections and unexpected errors. */
  log: Logger;
}

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".json": "application/json",
};

/**
 * Builds the Hono app. Tests call `app.request(...)` without opening a port.
 *
 * @example
 * ```ts
 * const app = createApp({ lanes, health: () => ({ ok: true }), log: createLogger() });
 * Deno.serve({ hostname: "127.0.0.1", port: 8765 }, app.fetch);
 * ```
 */
export function createApp(deps: AppDeps): Hono {
  const app = new Hono();

  app.onError((error, c) => {
    const { status, code, message } = errorReply(error, deps.log);
    return c.json({ code, message }, status as 400);
  });

  app.get("/health", (c) => {
    const health = deps.health();
    return c.json(health, health.ok ? 200 : 503);
  });

  // A browser page on another origin must never drive the owner's agent: refuse the upgrade
  // before it happens. A native client sends no Origin and must show the token at hello.
  app.use("/v2", async (c, next) => {
    const origin = c.req.header("origin");
    if (origin !== undefined && !isLoopbackOrigin(origin)) {
      deps.log.warn(
        "lane.refused_origin",
        `refused /v2 upgrade from non-loopback origin ${JSON.stringify(origin)}`,
        { origin },
      );
      return c.json({
        code: "forbidden",
        message: `cannot open /v2: origin is not loopback (got ${origin})`,
      }, 403);
    }
    await next();
  });

  app.get(
    "/v2",
    upgradeWebSocket((c) => {
      const hasOrigin = c.req.header("origin") !== undefined;
      let connection: LaneConnection | undefined;
      // Messages that arrive while a batch is being handled wait here and go together next:
      // that is what lets admission commit many inputs at once.
      let buffered: string[] = [];
      const handler = new SerialRunner(async () => {
        while (buffered.length > 0 && connection !== undefined) {
          const batch = buffered;
          buffered = [];
          // receiveAll answers every message, whatever fails.
          await connection.receiveAll(batch);
          // Let the socket deliver what arrived during that commit, so it joins the next batch.
          await nextMacrotask();
        }
      });
      return {
        onOpen(_event, ws) {
          connection = new LaneConnection(deps.lanes, {
            hasOrigin,
            send: (message) => {
              if (ws.readyState === 1) ws.send(JSON.stringify(message));
            },
            close: (code, reason) => ws.close(code, reason),
            writable: () => whenDrained(ws.raw as WebSocket | undefined),
            log: deps.log,
          });
        },
        onMessage(event, _ws) {
          // Messages of one connection are handled strictly in arrival order.
          buffered.push(typeof event.data === "string" ? event.data : "");
          handler.run().catch((error) =>
            deps.log.error("lane.internal", `lane connection error: ${error?.stack ?? error}`)
          );
        },
        onClose() {
          connection?.dispose();
        },
      };
    }),
  );

  app.get("/*", async (c) => {
    if (deps.uiDir === undefined) return c.text("klbr: no UI is built", 404);
    const path = c.req.path === "/" ? "/index.html" : c.req.path;
    if (path.includes("..")) return c.text("not found", 404);
    try {
      const body = await Deno.readFile(join(deps.uiDir, path));
      return c.body(body, 200, {
        "content-type": CONTENT_TYPES[extname(path)] ?? "application/octet-stream",
        "cache-control": "no-cache",
      });
    } catch {
      return c.text("not found", 404);
    }
  });

  return app;
}

/**
 * Resolves after one turn of the event loop, so pending I/O events run first. A message
 * port, unlike a nested `setTimeout(0)`, is not clamped to 4 ms.
 */
function nextMacrotask(): Promise<void> {
  const { port1, port2 } = new MessageChannel();
  return new Promise((resolve) => {
    port1.onmessage = () => {
      port1.close();
      port2.close();
      resolve();
    };
    port2.postMessage(undefined);
  });
}

/** Bytes a socket may hold unsent before a catch-up waits for the client. */
const HIGH_WATER_BYTES = 1 << 20;
/** How long a catch-up waits for a client that reads nothing before closing it. */
const STALL_LIMIT_MS = 60_000;

/** Resolves once the socket's unsent bytes fall under the high-water mark, or it closes. */
async function whenDrained(socket: WebSocket | undefined): Promise<void> {
  if (socket === undefined) return;
  const deadline = Date.now() + STALL_LIMIT_MS;
  while (socket.readyState === WebSocket.OPEN && socket.bufferedAmount > HIGH_WATER_BYTES) {
    if (Date.now() > deadline) {
      socket.close(1013, "client too slow to read its catch-up");
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
