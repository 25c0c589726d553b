// Hook traces and failed candidates against real SQLite: what a trace keeps, its bounds in
// size and count, its link to a frame, and the kept diagnostics of a failed candidate.

import assert from "node:assert/strict";
import {
  getTrace,
  listFailedCandidates,
  MAX_CANDIDATES,
  MAX_TRACES,
  recordFailedCandidate,
  type RecordTrace,
  recordTrace,
  TRACE_FIELD_MAX_CHARS,
  tracesOfFrame,
} from "../../store/tables/behavior_diagnostics.ts";
import { readEvents } from "../../store/tables/events.ts";
import { acceptFrame, finishFrame } from "../../store/tables/frames.ts";
import { admitInput } from "../../store/tables/inputs.ts";
import { type Store } from "../../store/store.ts";
import { withStore } from "../_helpers/store.ts";

const trace = (over: Partial<RecordTrace> = {}): RecordTrace => ({
  session: "default",
  frameId: null,
  hook: "model.plan",
  releaseId: "r".repeat(64),
  origin: "turn",
  inputs: { session: { id: "default" } },
  output: { route: "main" },
  error: null,
  durationMs: 1.25,
  ...over,
});

function frame(store: Store, n: number, attentionTrace?: string) {
  const { inputId } = admitInput(store, {
    session: "default",
    sourceKind: "local",
    dedupeKey: `local:t:${n}`,
    conversationId: "local:default",
    author: "owner",
    body: `hi ${n}`,
  });
  return acceptFrame(store, {
    session: "default",
    inputIds: [inputId],
    contextEpoch: 0,
    policyRevision: "r".repeat(64),
    attentionTrace,
  });
}

Deno.test("`recordTrace()` keeps a call's hook, release, inputs, output, duration and error", async () => {
  await withStore((store) => {
    const ok = getTrace(store, recordTrace(store, trace()))!;
    assert.deepEqual(
      [ok.hook, ok.releaseId, ok.origin, ok.inputs, ok.output, ok.error, ok.durationMs],
      [
        "model.plan",
        "r".repeat(64),
        "turn",
        { session: { id: "default" } },
        { route: "main" },
        null,
        1.25,
      ],
    );
    assert.equal(ok.truncated, false);
    const error = { code: "hook_failed", message: "cannot run hook", traceback: "Traceback…" };
    const failed = getTrace(store, recordTrace(store, trace({ output: undefined, error })))!;
    assert.deepEqual([failed.output, failed.error], [null, error]);
  });
});

Deno.test("`recordTrace()` bounds each field and the count of traces", async () => {
  await withStore((store) => {
    const big = { messages: ["x".repeat(TRACE_FIELD_MAX_CHARS + 10)] };
    const cut = getTrace(store, recordTrace(store, trace({ inputs: big })))!;
    assert.equal(cut.truncated, true);
    const inputs = cut.inputs as { truncated: boolean; chars: number; head: string };
    assert.equal(inputs.truncated, true);
    assert.equal(inputs.chars, JSON.stringify(big).length);
    assert.equal(inputs.head.length, TRACE_FIELD_MAX_CHARS);
    const longTrace = "line\n".repeat(5000);
    const bigError = { code: "hook_failed", message: "m", traceback: longTrace };
    const kept = getTrace(store, recordTrace(store, trace({ error: bigError })))!;
    assert.ok(JSON.stringify(kept.error).length <= 8192);
    assert.ok(longTrace.endsWith(kept.error!.traceback!), "the end of the traceback is kept");

    // Good calls never push out a failure's trace; each kind keeps its newest MAX_TRACES.
    const first = recordTrace(store, trace({ inputs: { n: 0 } }));
    for (let n = 1; n <= MAX_TRACES + 5; n++) recordTrace(store, trace({ inputs: { n } }));
    assert.equal(getTrace(store, first), undefined, "the oldest good trace was pruned");
    assert.notEqual(getTrace(store, kept.id), undefined, "the failure's trace is kept");
    const count = (store.statement(
      "SELECT COUNT(*) AS n FROM hook_traces WHERE error IS NULL",
    ).get() as { n: number }).n;
    assert.equal(count, MAX_TRACES);
  });
});

Deno.test("a frame's traces: its attention plan is linked on accept, and its end names them", async () => {
  await withStore((store) => {
    const plan = recordTrace(store, trace({ hook: "attention.plan", origin: "attention" }));
    const { frameId, seq } = frame(store, 1, plan);
    const accepted = readEvents(store, "default", { since: seq - 1 })[0];
    assert.equal((accepted.body as { attention_trace: string }).attention_trace, plan);
    const during = recordTrace(store, trace({ frameId }));
    assert.deepEqual(tracesOfFrame(store, frameId).map((t) => t.id), [plan, during]);
    const end = finishFrame(store, frameId, "done", "wait");
    const body = readEvents(store, "default", { since: end - 1 })[0].body as Record<
      string,
      unknown
    >;
    assert.deepEqual([body.trace_ids, body.trace_count], [[plan, during], 2]);
    // A trace keeps its frame.
    assert.throws(
      () => store.statement("UPDATE hook_traces SET frame_id = NULL WHERE id = ?").run(plan),
      /a trace keeps its frame/,
    );
    assert.throws(
      () => store.statement("UPDATE hook_traces SET output = '1' WHERE id = ?").run(during),
      /hook_traces identity is immutable/,
    );
  });
});

Deno.test("`recordFailedCandidate()` keeps the diagnostics and a record naming them", async () => {
  await withStore((store) => {
    const checks = [
      {
        hook: "turn.next",
        ok: false,
        detail: "turn.next returned action: Invalid option",
        fixture: { session: { id: "fixture" } },
        error: { code: "contract", message: "turn.next returned …", traceback: null },
        trace_id: "tr_1",
      },
      { hook: "model.plan", ok: true, detail: "ok", fixture: {}, error: null, trace_id: "tr_2" },
    ];
    const { candidateId, seq } = recordFailedCandidate(store, {
      session: "default",
      draftId: "dr_1",
      revision: "draft-abc",
      action: "publish",
      checks,
    });
    const [kept] = listFailedCandidates(store, "default", { draftId: "dr_1" });
    assert.deepEqual(
      [kept.id, kept.action, kept.revision, kept.failing, kept.checks],
      [candidateId, "publish", "draft-abc", ["turn.next"], checks],
    );
    const event = readEvents(store, "default", { since: seq - 1 })[0];
    assert.deepEqual([event.kind, event.body], ["candidate.failed", {
      candidate_id: candidateId,
      draft_id: "dr_1",
      revision: "draft-abc",
      action: "publish",
      failing: [{ hook: "turn.next", message: "turn.next returned …", trace_id: "tr_1" }],
    }]);
    for (let n = 0; n < MAX_CANDIDATES + 3; n++) {
      recordFailedCandidate(store, {
        session: "default",
        draftId: `dr_${n + 2}`,
        revision: "draft-x",
        action: "test",
        checks,
      });
    }
    assert.equal(listFailedCandidates(store, "default", { limit: 1000 }).length, MAX_CANDIDATES);
    assert.deepEqual(listFailedCandidates(store, "default", { draftId: "dr_1" }), []);
  });
});
