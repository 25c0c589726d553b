/**
 * The daemon's HTTP surface: `/health`, the UI's static files, `/auth` (the token exchanged
 * for a session cookie), `/artifacts/<id>` and `/attachments` (`_artifact_routes.ts`) and the
 * v2 lane WebSocket.
 *
 * Every route first checks the request's `Host` (a loopback host with the daemon's port, so a
 * rebound DNS name is refused) and its `Origin` (absent, or exactly the daemon's own). A page
 * asked for under another loopback name is sent to the daemon's own origin instead.
 *
 * @module
 */

import { type Context, Hono, type MiddlewareHandler } from "hono";
import { extname, join } from "node:path";
import { errorReply } from "./_replies.ts";
import type { LaneHost } from "./_lane_connection.ts";
import { checkHost, checkOrigin, type ListenAddress, ownOrigin } from "./_loopback.ts";
import { DEFAULT_LANE_LIMITS, type LaneLimits, LaneRegistry } from "./_lane_registry.ts";
import { LaneSocket } from "./_lane_socket.ts";
import type { ListenerEnv } from "./_listener.ts";
import type { OperatorAuth } from "./_auth.ts";
import { AttemptLimiter, RefusalLog } from "./_refusals.ts";
import { isKlbrError, KlbrError, type Logger } from "../core/mod.ts";
import { artifactRoutes, attachmentRoutes } from "./_artifact_routes.ts";

/** What {@linkcode createApp} needs. */
export interface AppDeps {
  /** The lane protocol's view of the daemon. */
  lanes: LaneHost;
  /** The operator token and the session cookies made from it. */
  auth: OperatorAuth;
  /** Where the daemon listens; read per request, since port 0 is known only once bound. */
  address: () => ListenAddress;
  /** Answers `/health`; `ok: false` makes the status 503. The lane counters are added. */
  health: () => Record<string, unknown> & { ok: boolean };
  /** Directory of the built UI, or undefined when there is none. */
  uiDir?: string;
  /**
   * Logger for refused requests (bounded: one line per event, kind and source a minute) and
   * unexpected errors.
   */
  log: Logger;
  /** Bounds on lane connections. @default {DEFAULT_LANE_LIMITS} */
  limits?: Partial<LaneLimits>;
  /**
   * Reads a spooled output (`store/tables/artifacts.ts`'s `readArtifact`) for `GET /artifacts/<id>`;
   * without it the route answers `not_found`.
   */
  artifacts?: (
    id: string,
    range: { offset?: number; length?: number },
  ) => Promise<{ data: Uint8Array; bytes: number }>;
  /**
   * Keeps a file the page attaches (`store/tables/artifacts.ts`'s `keepAttachment`) for
   * `POST /attachments`, up to `maxBytes`; without it, or with 0, the route refuses uploads.
   */
  attachments?: {
    maxBytes: number;
    keep: (data: Uint8Array) => Promise<{ artifact: string; bytes: number }>;
  };
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
 * const app = createApp({ lanes, auth, address: () => ({ host: "127.0.0.1", port: 8765 }),
 *   health: () => ({ ok: true }), log: createLogger() });
 * await listenApp(app.fetch, { hostname: "127.0.0.1", port: 8765, maxSilent: 256, silentMs: 3_000 });
 * ```
 */
export function createApp(deps: AppDeps): Hono {
  const app = new Hono();
  const refusals = new RefusalLog(deps.log);
  const registry = new LaneRegistry({ ...DEFAULT_LANE_LIMITS, ...deps.limits }, refusals);
  deps.auth.onRotate(() => registry.closeOperators("token_revoked"));

  app.onError((error, c) => {
    const { status, code, message } = errorReply(error, deps.log);
    return c.json({ code, message }, status as 400);
  });
  app.use("*", loopbackGuard(deps, refusals));
  app.get("/health", (c) => {
    const health = { ...deps.health(), lanes: { ...registry.stats } };
    return c.json(health, health.ok ? 200 : 503);
  });
  // Each group is a sub-app of one concept; the UI's catch-all goes last.
  app.route("/auth", authRoutes(deps, { registry, refusals }));
  app.route("/v2", laneRoutes(deps, { registry, refusals }));
  app.route("/artifacts", artifactRoutes(deps));
  app.route("/attachments", attachmentRoutes(deps));
  app.route("/", uiRoutes(deps));
  return app;
}

/**
 * Checks every request's `Host` and `Origin`; a page asked for under another loopback name is
 * redirected to the daemon's own origin first.
 */
function loopbackGuard(deps: AppDeps, refusals: RefusalLog): MiddlewareHandler {
  const refused = (c: Context, kind: string, error: unknown) => {
    if (!isKlbrError(error)) return;
    const message = `refused ${c.req.path}: ${error.message}`;
    refusals.warn("http.refused", { source: sourceOf(c.env), kind, message });
  };
  return async (c, next) => {
    const address = deps.address();
    const host = c.req.header("host");
    try {
      checkHost(host, address);
    } catch (error) {
      refused(c, "host", error);
      throw error;
    }
    // A page asked for under another loopback name (localhost for 127.0.0.1) is sent to the
    // daemon's own origin, the only one its socket and /auth accept; its query (`?session=`)
    // goes along.
    const own = ownOrigin(address);
    if (c.req.method === "GET" && !isApiPath(c.req.path) && `http://${host}` !== own) {
      return c.redirect(`${own}${c.req.path}${new URL(c.req.url).search}`, 307);
    }
    try {
      checkOrigin(c.req.header("origin"), address);
    } catch (error) {
      refused(c, "origin", error);
      throw error;
    }
    await next();
  };
}

/** What the lane routes share: the sockets' registry and the bounded log of refusals. */
interface Bounds {
  registry: LaneRegistry;
  refusals: RefusalLog;
}

/**
 * `POST /auth` exchanges the token for a session cookie, replacing whatever cookie of that name
 * the browser held; `DELETE /auth` clears it. The token is checked first, so the right one is
 * never refused; a wrong one from a source past its rate is answered 429 with `Retry-After`.
 */
function authRoutes(deps: AppDeps, bounds: Bounds): Hono {
  const auth = new Hono();
  const limiter = new AttemptLimiter();
  auth.post("/", async (c) => {
    // Any JSON may arrive (`null` too): only an object's string `token` is a token.
    const body: unknown = await c.req.json().catch(() => ({}));
    const given = typeof body === "object" && body !== null
      ? (body as { token?: unknown }).token
      : undefined;
    const token = typeof given === "string" ? given : undefined;
    try {
      deps.auth.checkToken(token);
    } catch (error) {
      if (!isKlbrError(error)) throw error;
      const source = sourceOf(c.env);
      const { stats } = bounds.registry;
      stats.auth_refused++;
      const message = `refused /auth: ${error.message}`;
      bounds.refusals.warn("auth.refused", { source, kind: error.code, message });
      const wait = limiter.refused(source);
      if (wait === 0) throw error;
      stats.auth_limited++;
      c.header("retry-after", String(wait));
      throw new KlbrError(
        "too_many_attempts",
        `cannot authorise: too many refused attempts from ${source}; try again in ${wait} s (got ${error.code})`,
        { status: 429 },
      );
    }
    c.header("set-cookie", deps.auth.issueCookie(deps.address().port));
    c.header("cache-control", "no-store");
    return c.json({ ok: true, role: "operator" });
  });
  auth.delete("/", (c) => {
    c.header("set-cookie", deps.auth.clearCookie(deps.address().port));
    return c.json({ ok: true });
  });
  return auth;
}

/**
 * `GET /v2`: the lane WebSocket. Every upgrade gets a place among the sockets waiting for
 * hello (the oldest waiting one is closed when they are all taken); hello makes it a lane.
 */
function laneRoutes(deps: AppDeps, bounds: Bounds): Hono {
  const lanes = new Hono();
  lanes.get("/", (c) => {
    const upgrade = (c.env as ListenerEnv | undefined)?.upgrade;
    if (upgrade === undefined || c.req.header("upgrade")?.toLowerCase() !== "websocket") {
      return c.text("klbr: /v2 is a WebSocket; connect with Upgrade: websocket", 426);
    }
    const place = bounds.registry.reserve(sourceOf(c.env));
    const cookie = deps.auth.readCookie(c.req.header("cookie"), deps.address().port);
    const auth = {
      cookie,
      viewWithoutToken: deps.auth.viewWithoutToken,
      checkToken: (token: string | undefined) => deps.auth.checkToken(token),
      rotate: async (options?: { announce?: () => void }) => {
        await deps.auth.rotate(options);
        deps.log.warn("auth.rotated", "the operator token was rotated; old sessions closed");
      },
      refused: (code: string, reason: string) =>
        bounds.refusals.warn("lane.refused", {
          source: place.source,
          kind: code,
          message: `refused operator access: ${reason}`,
        }),
    };
    const socket = new LaneSocket(bounds.registry, {
      host: deps.lanes,
      auth,
      log: deps.log,
      place,
    });
    // The listener's socket (`_listener.ts`): one that can stop reading.
    upgrade.accept(socket.attach.bind(socket));
    return c.body(null, 204);
  });
  return lanes;
}

/** The client's address, for per-source bounds; "unknown" where the server gave none. */
function sourceOf(env: unknown): string {
  return (env as ListenerEnv | undefined)?.incoming?.socket?.remoteAddress ?? "unknown";
}

/** Every other `GET`: a file of the built UI, `/` being `index.html`. */
function uiRoutes(deps: AppDeps): Hono {
  const ui = new Hono();
  ui.get("/*", async (c) => {
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
  return ui;
}

/** Routes a native client calls by address; they are refused, never redirected. */
function isApiPath(path: string): boolean {
  return path === "/health" || path === "/auth" || path === "/v2" ||
    path.startsWith("/artifacts/") ||
    path === "/attachments";
}
