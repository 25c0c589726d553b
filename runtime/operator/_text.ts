/**
 * Operator results in words for the command line: `status` (with `/health`'s verdict),
 * `candidates`, `trace`, `frames`, `context`, `search`, and a command that changed something.
 * Each reads its result through the schema in `runtime/core/`; `--json` prints the result as
 * it came instead.
 *
 * @module
 */

import {
  adaptedRouteText,
  type ContextResult,
  type FramesResult,
  type HealthReport,
  parseOperatorResult,
  type SearchResult,
  type StatusResult,
  type TraceResult,
  type TraceView,
} from "../core/mod.ts";

/**
 * Lays `rows` out under `headers` in columns two spaces apart, each cell on one line.
 *
 * @example
 * ```ts
 * table(["id", "state"], [["fr_1", "done"]]); // "id    state\nfr_1  done"
 * ```
 */
function table(headers: string[], rows: unknown[][]): string {
  const cells = [headers, ...rows.map((row) => row.map(cellText))];
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? "").length)));
  return cells.map((row) => row.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd())
    .join("\n");
}

function cellText(value: unknown): string {
  if (value === null || value === undefined) return "—";
  return String(value).replace(/\s+/g, " ");
}

/** A duration in words: `850 ms`, `12 s`, `4 min`, `3 h`. */
function durationText(ms: number | null): string {
  if (ms === null) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

/** An epoch-ms time as ISO text without milliseconds. */
function when(at: number | null): string {
  return at === null ? "—" : new Date(at).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** `klbr status` in words: the health verdict and its reasons, then one row per session. */
export function statusText(value: unknown, health: HealthReport | undefined): string {
  const status: StatusResult = parseOperatorResult("op.status", value);
  const lines: string[] = [];
  if (health !== undefined) {
    lines.push(`health: ${health.status}${health.reasons.length ? "" : " (nothing to report)"}`);
    for (const reason of health.reasons) lines.push(`  - ${reason}`);
  }
  lines.push(
    `klbr ${status.version}, ${status.admitting ? "admitting messages" : "NOT admitting"}` +
      (status.recovered_release === null
        ? ""
        : `, recovered to release ${status.recovered_release.slice(0, 12)}`),
  );
  const rows = Object.entries(status.sessions).map(([id, s]) => [
    id,
    s.state,
    s.current_frame === null
      ? "idle"
      : `frame ${s.current_frame.number} for ${durationText(s.current_frame.running_ms)}`,
    s.pending_inputs === 0
      ? "0"
      : `${s.pending_inputs} (oldest ${durationText(s.oldest_pending_age_ms)})`,
    `${s.running_jobs} running, ${s.pending_jobs} pending`,
    `${s.pending_timers} (${s.due_timers} due)`,
    `${s.kernel_generation}${s.kernel_alive ? "" : " (not running)"}`,
    `${s.behavior_epoch} / ${s.active_release.slice(0, 12)}`,
  ]);
  lines.push(
    "",
    table(
      ["session", "state", "turn", "pending inputs", "jobs", "timers", "kernel", "behaviour"],
      rows,
    ),
  );
  const budget = status.budget;
  lines.push(
    "",
    `model requests this hour: ${budget.model_requests_hour.used} of ${budget.model_requests_hour.limit}; ` +
      `tokens: ${budget.tokens_hour.used} of ${budget.tokens_hour.limit}`,
    ...budget.over_budget.map((e) => `over budget: ${e.what} ${e.used} of ${e.limit}: ${e.effect}`),
  );
  for (const [id, s] of Object.entries(status.sessions)) {
    // `resume` refuses a draining session (its turn still runs): that one says to wait.
    if (s.state === "draining") {
      lines.push(
        `session ${id} is draining: its turn finishes, then new messages wait; once it is drained, klbr resume ${id} takes them up`,
      );
    } else if (s.state !== "running") {
      lines.push(`session ${id} is ${s.state}: new messages wait; klbr resume ${id} takes them up`);
    }
    if (s.stalled) lines.push(`session ${id} stalled after its retries; klbr reset ${id}`);
    for (const adapted of s.routes_adapted) {
      lines.push(`session ${id} ${adaptedRouteText(adapted)}`);
    }
  }
  return lines.join("\n");
}

/** `klbr candidates` in words: one row per failed candidate, then its failing checks. */
export function candidatesText(value: unknown): string {
  const { candidates } = parseOperatorResult("op.candidates", value);
  if (candidates.length === 0) return "no failed behaviour candidates";
  const rows = candidates.map((c) => [
    c.id,
    when(c.at),
    c.action,
    c.draft_id,
    c.revision.slice(0, 12),
    c.failing.join(", "),
  ]);
  const details = candidates.flatMap((c) =>
    c.checks.filter((check) => !check.ok).map((check) => `  ${c.id} ${check.hook}: ${check.detail}`)
  );
  return [
    table(["candidate", "at", "action", "draft", "revision", "failing hooks"], rows),
    ...(details.length ? ["", "failing checks:", ...details] : []),
  ].join("\n");
}

function traceRow(t: TraceView): unknown[] {
  const error = t.error === null || t.error === undefined
    ? "ok"
    : typeof t.error === "object" && "message" in (t.error as object)
    ? String((t.error as { message: unknown }).message)
    : String(t.error);
  return [t.id, t.hook, t.origin, `${t.duration_ms} ms`, when(t.at), error];
}

/** `klbr trace` in words: one row per hook call of the frame (or the one trace). */
export function traceText(value: unknown): string {
  const result: TraceResult = parseOperatorResult("op.trace", value);
  const traces = "traces" in result ? result.traces as TraceView[] : [result.trace as TraceView];
  if (traces.length === 0) return "no hook traces for that frame";
  return table(["trace", "hook", "origin", "took", "at", "result"], traces.map(traceRow));
}

/** `klbr frames` in words: the newest frames with their ids, for `klbr trace`. */
export function framesText(value: unknown): string {
  const result: FramesResult = parseOperatorResult("op.frames", value);
  if (result.frames.length === 0) return `no frames yet in session ${result.session}`;
  const rows = result.frames.map((f) => [
    f.frame_id,
    f.number,
    f.state,
    f.inputs,
    when(f.created_at),
    f.ended_at === null ? "running" : durationText(f.ended_at - f.created_at),
    f.reason,
  ]);
  return [
    table(["frame", "#", "state", "inputs", "started", "took", "reason"], rows),
    "",
    `hook calls of a frame: klbr trace ${result.session} <frame>`,
  ].join("\n");
}

/** `klbr context` in words: the budget bar, the summary, the items carried, what is left out. */
export function contextText(value: unknown): string {
  const view: ContextResult = parseOperatorResult("op.context", value);
  const b = view.budget;
  const share = b.context_tokens === 0 ? 0 : b.used_tokens / b.context_tokens;
  const filled = Math.min(30, Math.round(share * 30));
  const lines = [
    `context of ${view.session} on route ${view.route}: ${b.used_tokens} of ${b.context_tokens} tokens ` +
    `(${Math.round(share * 100)}%; compaction at ${b.compact_at_tokens})`,
    `[${"#".repeat(filled)}${".".repeat(30 - filled)}]` +
    (view.over_compact ? " the next request compacts first" : ""),
    `contract message: ${view.system_tokens} tokens`,
    "",
  ];
  if (view.summary === null) lines.push("summary: none yet (nothing was compacted)");
  else {
    const s = view.summary;
    lines.push(
      `summary (context epoch ${s.epoch}, ${s.source}, ${s.tokens} tokens, covers #1–#${s.covers_to_idx}):`,
      ...s.text.split("\n").map((line) => `  ${line}`),
    );
  }
  lines.push("", `items carried: ${view.items.length}`);
  if (view.items.length > 0) {
    lines.push(table(
      ["item", "role", "tokens", "starts with"],
      view.items.map((i) => [`#${i.idx}`, i.role, i.tokens, i.preview.slice(0, 80)]),
    ));
  }
  lines.push("", "left out:");
  if (view.left_out.length === 0) lines.push("  nothing");
  for (const l of view.left_out) {
    lines.push(`  #${l.from_idx}–#${l.to_idx} (${l.count}): ${l.reason}`);
  }
  return lines.join("\n");
}

/** `klbr search` in words: one row per hit with its ref for `history.read`. */
export function searchText(value: unknown): string {
  const result: SearchResult = parseOperatorResult("op.history_search", value);
  if (result.results.length === 0) return "nothing found";
  const rows = result.results.map((r) => [r.id, r.kind, when(r.at), r.snippet.slice(0, 100)]);
  return [
    table(["ref", "kind", "at", "snippet"], rows),
    ...(result.truncated ? ["(more matched than shown; a narrower query finds the others)"] : []),
  ].join("\n");
}

/** A command that changed something, in words: its message, else its fields as `key: value`. */
export function actionText(command: string, result: Record<string, unknown>): string {
  if (typeof result.message === "string") return `${command}: ${result.message}`;
  const fields = Object.entries(result).map(([k, v]) =>
    `  ${k}: ${typeof v === "object" ? JSON.stringify(v) : String(v)}`
  );
  return [`${command}: done`, ...fields].join("\n");
}
