/**
 * Complete record bodies for UI tests: each type's body as the runtime writes it, with the
 * fields a test cares about given as overrides. The page reads records through the shared
 * schemas, so a fixture must be a body a writer could have written.
 *
 * @module
 */

import { readRecord, type RecordInput, type RecordType } from "../../runtime/core/mod.ts";
import { describeReading, type EventTitle } from "../../ui/src/event_titles.ts";

const FRAME = "fr_1";
const RELEASE = "3fa2c41d9e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f";

const DEFAULTS: { [T in RecordType]: RecordInput<T> } = {
  "input.admitted": {
    input_id: "in_1",
    source_kind: "local",
    dedupe_key: "local:web-1:m-1",
    conversation_id: "local:default",
    author: "owner",
    received_at: 1_736_933_400_000,
    body: "hi",
  },
  "frame.accepted": {
    frame_id: FRAME,
    number: 1,
    input_ids: [],
    routing: {},
    context_epoch: 0,
    policy_revision: RELEASE,
  },
  "frame.finished": { frame_id: FRAME, number: 1, state: "done", reason: "wait", input_ids: [] },
  "frame.abandoned": {
    frame_id: FRAME,
    number: 1,
    state: "abandoned",
    reason: "lease_expired",
    input_ids: [],
  },
  "frame.resumed": { frame_id: FRAME, number: 1 },
  "kernel.reset": {
    generation: 1,
    reason: "start",
    skills_revision: "9b0c6a3e51f2",
    behavior_revision: null,
    heap_restored: false,
  },
  "cell.started": {
    cell_id: "cell_1",
    generation: 1,
    frame_id: FRAME,
    tool_call_id: null,
    code: "1",
  },
  "cell.finished": { cell_id: "cell_1", tool_call_id: null, outcome: "ok", result: null },
  "scratchpad": { frame_id: FRAME, text: "thinking", partial: false },
  "send": {
    send_id: "snd_1",
    text: "done",
    conversation: "local:default",
    frame_id: FRAME,
    cell_id: null,
    state: "delivered",
  },
  "outbox.pending": {
    outbox_id: "ob_1",
    state: "pending",
    conversation: "discord:555",
    destination: { channel_id: "555" },
    body: "Build is green.",
    frame_id: FRAME,
    cell_id: "cell_1",
  },
  "outbox.attempting": {
    outbox_id: "ob_1",
    state: "attempting",
    attempts: 1,
    remote_id: null,
    error: null,
  },
  "outbox.confirmed": {
    outbox_id: "ob_1",
    state: "confirmed",
    attempts: 1,
    remote_id: "1234567",
    error: null,
  },
  "outbox.failed": { outbox_id: "ob_1", state: "failed", attempts: 1, remote_id: null, error: "x" },
  "outbox.unknown": {
    outbox_id: "ob_1",
    state: "unknown",
    attempts: 1,
    remote_id: null,
    error: "x",
  },
  "outbox.rate_limited": {
    outbox_id: "ob_1",
    state: "pending",
    attempts: 1,
    remote_id: null,
    error: "HTTP 429",
    not_before: 5,
    tries: [{ at: 4, how: "rate_limit", outcome: "HTTP 429" }],
  },
  "input.replied": { input_id: "in_1", outbox_id: "ob_1", remote_id: "1234567" },
  "input.ignored": { input_id: "in_1", frame_id: FRAME, reason: "ambient", by: "agent" },
  "input.edited": { input_id: "in_1", message_id: "9", text: "hi (edited)", edited_at: null },
  "input.deleted": { input_id: "in_1", message_id: "9" },
  "activation": { epoch: 1, release_id: RELEASE, previous_release: null, reason: "startup" },
  "release.last_good": { release_id: RELEASE },
  "release.recovered": { broken: RELEASE, restored: RELEASE },
  "hook.failed": { hook: "attention.plan", revision: RELEASE, error: "boom" },
  "role.loaded": {
    role: "hooks",
    generation: 2,
    pid: 4242,
    reason: "behaviour activated",
    python: { executable: "/usr/bin/python3", version: "3.11.7", interpreter: "1:2:3" },
    package: "p".repeat(64),
    skills_revision: "s".repeat(64),
    release_id: RELEASE,
  },
  "candidate.failed": {
    candidate_id: "cd_1",
    draft_id: "dr_1",
    revision: "draft-x",
    action: "publish",
    failing: [{ hook: "turn.next", message: "returned 42", trace_id: null }],
  },
  "session.stalled": { failures: 6, message: "gave up" },
  "recovery": {
    abandoned_frames: [],
    resumed_frames: [],
    interrupted_cells: [],
    closed_tool_calls: [],
  },
  "input.expired": { input_id: "in_1", reason: "pending for more than 1000 ms", waited_ms: 1200 },
  "model.reply": {
    frame_id: FRAME,
    route: "main",
    model: "qwen2.5-coder",
    url: "http://127.0.0.1:8080/v1",
    usage: { prompt_tokens: 1204, completion_tokens: 88 },
    finish_reason: "tool_calls",
    tool_calls: 1,
    text_chars: 0,
  },
  "turn.retrying": { frame_id: FRAME, attempt: 1, delay_ms: 1000, reason: "model failed: 500" },
  "model.failing": {
    frame_id: FRAME,
    input_ids: ["in_1"],
    route: "main",
    url: "http://localhost:8001/v1",
    model: "default",
    error: "Connection error.",
    attempt: 1,
    of: 7,
    next_retry_ms: 1000,
    config_path: "/home/me/klbr/.klbr/config.kdl",
  },
  "model.recovered": {
    frame_id: FRAME,
    route: "main",
    url: "http://localhost:8001/v1",
    failed_attempts: 3,
  },
  "turn.reminded": { frame_id: FRAME, reminder: "[runtime] your text reached nobody" },
  "daemon.stopping": { reason: "daemon shutdown (SIGTERM)", grace_ms: 10000 },
  "operator": { op: "op.stop", message: "stopped; resume takes work again" },
  "context.compacted": { epoch: 1, covers_to_idx: 10, summarized_items: 10, summary_chars: 100 },
  "reasoning": { frame_id: "fr_1", text: "think", field: "reasoning_content" },
  "route.adapted": { route: "main", setting: "tool_calls", to: "text", reason: "refused" },
  "context.repaired": {
    by: "operator",
    reason: "refused",
    epoch: 2,
    covers_to_idx: 10,
    summary_chars: 100,
  },
  "turn.started": { frame_id: FRAME, frame: 1, resumed: false },
  "turn.ended": { frame_id: FRAME, reason: "wait" },
  "code.patch": {
    patch_id: "pa_1",
    cell_id: "cell_1",
    files: [{
      path: "calc.py",
      before_hash: "a".repeat(64),
      after_hash: "b".repeat(64),
      syntax_checked: true,
      edits: [{
        before: { start_byte: 0, end_byte: 31, start_line: 1, end_line: 2 },
        after: { start_byte: 0, end_byte: 31, start_line: 1, end_line: 2 },
      }],
    }],
  },
  "timer.set": {
    timer_id: "tm_1",
    due_at: 1_736_933_460_000,
    note: "check the build",
    wait: true,
    frame_id: FRAME,
    cell_id: "cell_1",
    job_id: null,
  },
  "timer.fired": { timer_id: "tm_1", input_id: "in_2", due_at: 1_736_933_460_000, note: "" },
  "timer.cancelled": { timer_id: "tm_1", cause: "cancelled by a cell" },
  "job.state": {
    job_id: "job_1",
    name: "tests",
    kind: "code",
    from: null,
    to: "pending",
    cause: "started by cell cell_1",
  },
  "job.queued": { job_id: "job_1", reason: "waiting for a slot" },
  "job.cell": {
    job_id: "job_1",
    step: 1,
    code: "1",
    outcome: "ok",
    stdout: "",
    error: null,
  },
  "model_call": {
    call_id: "mc_1",
    kind: "llm",
    route: "fast",
    state: "done",
    frame_id: FRAME,
    cell_id: "cell_1",
    job_id: null,
    prompt_tokens: 10,
    completion_tokens: 2,
  },
  "budget.exhausted": {
    what: "tokens_per_hour",
    limit: 1000,
    used: 1234,
    until: null,
    effect: "llm() and child agents are refused",
  },
  "maintenance.started": { run_id: "mt_1", trigger: "start", policy: {}, drafts: [], releases: [] },
  "maintenance.finished": { run_id: "mt_1", errors: [] },
};

/**
 * A complete body of `type`: the defaults above with `fields` over them.
 *
 * @example
 * ```ts
 * host.append("scratchpad", body("scratchpad", { text: "draft 1" }));
 * ```
 */
export function body<T extends RecordType>(
  type: T,
  fields: Partial<RecordInput<T>> = {},
): Record<string, unknown> {
  return { ...DEFAULTS[type], ...fields };
}

/** A `[type, body]` pair, for tests that list records as tuples. */
export function rec<T extends RecordType>(
  type: T,
  fields: Partial<RecordInput<T>> = {},
): [string, Record<string, unknown>] {
  return [type, body(type, fields)];
}

/** The event lane's title for a record, read as the page reads every record. */
export function titleOf(record: { type: string; data: unknown }): EventTitle {
  return describeReading(readRecord(record.type, record.data));
}
