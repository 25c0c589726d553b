/**
 * How a turn speaks to a route's server: its configured switches, plus what this session
 * learned of the server (`route.adapted`). A route of `tool_calls "auto"` starts native and
 * moves to text-mode cells when its server refuses `tools` or its model answers twice in a row
 * with a fenced cell and no tool call; a route whose server refuses a role order becomes
 * strict; a route whose server refuses a request past its context sends smaller ones (while the
 * route's configured `context_tokens` stays what it was). Each move is recorded once and holds
 * for the session from the next request on.
 *
 * @module
 */

import { lastEventOfKinds, readEventsOfKind } from "../../store/tables/events.ts";
import type { Store } from "../../store/store.ts";
import type { Route } from "../config/mod.ts";
import type { RouteShape } from "../context/mod.ts";
import type { AdaptedRoute, RecordInput } from "../core/mod.ts";

/** A route's mode for one request. */
export interface RouteMode {
  /** How the request is rendered on the wire. */
  shape: RouteShape;
  /** The configured `tool_calls`: `auto` may still move to text. */
  toolCalls: "native" | "text" | "auto";
  /** The most model requests one turn may make. */
  maxSteps: number;
  /** The largest request, when the server's context is smaller than the configured one. */
  contextTokens?: number;
}

/**
 * The smallest context a server's refusal or its cut requests move a route to: below it the
 * route stays as it is and the turn meets the server's failure instead.
 */
const MIN_LEARNED_CONTEXT = 1024;

/** The default when a route (a test's provider) declares no switches. */
const DEFAULT_MAX_STEPS = 50;

/**
 * The route's mode in `session`: its configuration, then every `route.adapted` of the route.
 *
 * @example
 * ```ts
 * const mode = routeMode(store, "default", provider.route);
 * if (mode.shape.toolMode === "text") // no tools on the wire
 * ```
 */
export function routeMode(store: Store, session: string, route: Route | undefined): RouteMode {
  return modeOf(route, adaptations(store, session));
}

/** The session's `route.adapted` records, of every route. */
function adaptations(store: Store, session: string): RecordInput<"route.adapted">[] {
  return readEventsOfKind(store, session, "route.adapted", 100)
    .map((event) => event.body as RecordInput<"route.adapted">);
}

/** The mode of `route`: its configuration, then each of `moves` that is the route's. */
function modeOf(route: Route | undefined, moves: RecordInput<"route.adapted">[]): RouteMode {
  const toolCalls = route?.tool_calls ?? "native";
  const shape: RouteShape = {
    toolMode: toolCalls === "text" ? "text" : "native",
    strictRoles: route?.role_order === "strict",
    reasoning: route?.reasoning ?? "echo",
  };
  let contextTokens: number | undefined;
  for (const body of moves) {
    if (body.route !== route?.name) continue;
    if (body.setting === "tool_calls" && toolCalls === "auto") shape.toolMode = "text";
    if (body.setting === "role_order") shape.strictRoles = true;
    if (body.setting === "context_tokens" && body.configured === route?.context_tokens) {
      contextTokens = Math.min(contextTokens ?? Infinity, Number(body.to));
    }
  }
  const maxSteps = route?.max_steps ?? DEFAULT_MAX_STEPS;
  return { shape, toolCalls, maxSteps, ...(contextTokens === undefined ? {} : { contextTokens }) };
}

/**
 * Each configured route whose mode in `session` differs from its configuration (by a
 * `route.adapted` that still holds), with what differs; `routeOf` gives a route's
 * configuration, or undefined for a route no longer configured (left out).
 *
 * @example
 * ```ts
 * adaptedRoutes(store, { session: "default", routeOf: (name) => config.routes[name] });
 * // [{ route: "main", context_tokens: 5_000, configured_context_tokens: 32_768 }]
 * ```
 */
export function adaptedRoutes(
  store: Store,
  of: { session: string; routeOf: (name: string) => Route | undefined },
): AdaptedRoute[] {
  const moves = adaptations(store, of.session);
  const adapted: AdaptedRoute[] = [];
  for (const name of [...new Set(moves.map((move) => move.route))].sort()) {
    const route = of.routeOf(name);
    if (route === undefined) continue;
    const mode = modeOf(route, moves);
    const learned: AdaptedRoute = {
      route: name,
      ...(route.tool_calls !== "text" && mode.shape.toolMode === "text"
        ? { tool_calls: "text" as const }
        : {}),
      ...(route.role_order !== "strict" && mode.shape.strictRoles
        ? { role_order: "strict" as const }
        : {}),
      ...(mode.contextTokens === undefined ? {} : {
        context_tokens: mode.contextTokens,
        configured_context_tokens: route.context_tokens,
      }),
    };
    if (Object.keys(learned).length > 1) adapted.push(learned);
  }
  return adapted;
}

/**
 * Whether the session's previous reply on `route` was a fenced cell with no tool call: the
 * second such reply in a row moves an `auto` route to text mode.
 */
export function lastReplyWasFenced(store: Store, session: string, route: string): boolean {
  const last = lastEventOfKinds(store, session, ["model.reply"]);
  const body = last?.body as { route?: string; text_cell?: boolean } | undefined;
  return body?.route === route && body.text_cell === true;
}

/**
 * The `route.adapted` that keeps `route`'s requests (named `name` in the session) within `to`
 * tokens, for as long as its configured `context_tokens` stays what it is now ({@linkcode
 * routeMode} reads it so); undefined when `to` would not make them smaller than they are
 * (`current`) or would go below {@linkcode MIN_LEARNED_CONTEXT}.
 */
export function contextMove(
  route: Route,
  move: { name: string; current: number; to: number; reason: string },
): RecordInput<"route.adapted"> | undefined {
  const { name, current, to, reason } = move;
  if (to >= current || to < MIN_LEARNED_CONTEXT) return undefined;
  return {
    route: name,
    setting: "context_tokens",
    to: String(to),
    reason,
    configured: route.context_tokens,
  };
}
