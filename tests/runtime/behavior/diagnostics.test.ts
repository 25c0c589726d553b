// The host side of failed-candidate diagnostics and the `hooks` RPCs (bind, test, trace)
// against a real store, real releases and real Python workers for the trusted runs; no daemon.

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  getTrace,
  recordTrace,
  TRACE_FIELD_MAX_CHARS,
} from "../../../store/tables/behavior_diagnostics.ts";
import { readEvents } from "../../../store/tables/events.ts";
import type { Json } from "./_support.ts";
import { rejects, withEditor } from "./_editor.ts";

Deno.test("a failing test or publish keeps its diagnostics: in the store, in a record and beside the draft", async () => {
  await withEditor(async (call, store) => {
    const { draft_id } = await call("behavior.draft");
    await call("behavior.write", {
      draft_id,
      path: "model.py",
      text: "def plan(**context):\n    raise RuntimeError('no route today')\n",
    });
    const report = await call("behavior.test", { draft_id });
    assert.equal(report.ok, false);
    assert.match(report.candidate_id, /^cd_/);
    const failing = report.checks.find((c: Json) => c.hook === "model.plan");
    assert.deepEqual(failing.fixture, { session: { id: "fixture" } });
    assert.equal(failing.error.code, "hook_failed");
    assert.match(failing.error.traceback, /raise RuntimeError\('no route today'\)/);
    const trace = getTrace(store, failing.trace_id)!;
    assert.deepEqual([trace.origin, trace.hook, trace.error?.code], [
      "candidate",
      "model.plan",
      "hook_failed",
    ]);
    assert.match(trace.releaseId, /^draft-[0-9a-f]{64}$/);

    await rejects(
      call("behavior.publish", { draft_id }),
      "release_invalid",
      /its hooks failed the host's test \(model\.plan: .*no route today.*\); diagnostics kept as cd_\w+$/,
    );
    const { candidates } = await call("behavior.candidates", { draft_id });
    assert.deepEqual(candidates.map((c: Json) => c.action), ["publish", "test"]);
    assert.deepEqual(candidates[1].id, report.candidate_id);
    assert.deepEqual(candidates[0].failing, ["model.plan"]);
    const events = readEvents(store, "default").filter((e) => e.kind === "candidate.failed");
    assert.deepEqual(
      events.map((e) => (e.body as Json).candidate_id),
      [candidates[1].id, candidates[0].id],
    );
    const beside = join(store.stateDir, "drafts", `${draft_id}.diagnostics.json`);
    assert.equal(JSON.parse(await Deno.readTextFile(beside)).id, candidates[0].id);

    // Fixed, the draft passes: the file beside it goes, the history stays.
    await call("behavior.write", {
      draft_id,
      path: "model.py",
      text: "def plan(**context):\n    return {'route': 'fast'}\n",
    });
    assert.equal((await call("behavior.test", { draft_id })).ok, true);
    await assert.rejects(Deno.stat(beside), Deno.errors.NotFound);
    assert.equal((await call("behavior.candidates")).candidates.length, 2);
  });
});

Deno.test("`hooks.bind` makes another draft function serve a hook; the host's test runs it", async () => {
  await withEditor(async (call, store) => {
    const { draft_id } = await call("behavior.draft");
    await call("behavior.write", {
      draft_id,
      path: "policy/turns.py",
      text: "def decide(**context):\n    return {'action': 'stop'}\n",
    });
    const bound = await call("hooks.bind", {
      draft_id,
      hook: "turn.next",
      target: "policy/turns.py:decide",
    });
    assert.deepEqual(bound.bindings, { "turn.next": "policy/turns.py:decide" });
    const text = await Deno.readTextFile(join(store.stateDir, "drafts", draft_id, "hooks.json"));
    assert.deepEqual(JSON.parse(text), { "turn.next": "policy/turns.py:decide" });
    const report = await call("behavior.test", { draft_id });
    assert.equal(report.ok, true);
    const check = report.checks.find((c: Json) => c.hook === "turn.next");
    assert.equal(check.detail, 'returned {"action":"stop"}');
    const one = await call("hooks.test", { hook: "turn.next", draft_id });
    assert.deepEqual([one.ok, one.output], [true, { action: "stop" }]);

    for (const target of ["../escape.py:f", "policy/turns.py", ".hidden/x.py:f", "/abs.py:f"]) {
      await rejects(
        call("hooks.bind", { draft_id, hook: "turn.next", target }),
        "invalid_input",
        /^cannot bind turn\.next: /,
      );
    }
    await rejects(
      call("hooks.bind", { draft_id, hook: "model.plan", target: "nowhere.py:plan" }),
      "not_found",
      /^cannot bind model\.plan: the draft has no file nowhere\.py$/,
    );
    // A binding to a function the file does not define fails the host's test, not the bind.
    await call("hooks.bind", { draft_id, hook: "model.plan", target: "policy/turns.py:missing" });
    const broken = await call("behavior.test", { draft_id });
    const plan = broken.checks.find((c: Json) => c.hook === "model.plan");
    assert.equal(plan.ok, false);
    assert.match(plan.detail, /defines no function missing\(\)/);
  });
});

Deno.test("`hooks.test` runs one hook on given arguments or on a recorded trace's inputs", async () => {
  await withEditor(async (call, store, release) => {
    const args = { inputs: [{ id: "in_9", conversation: "local:x" }], session: { id: "default" } };
    const first = await call("hooks.test", { hook: "attention.plan", args });
    assert.deepEqual(
      [first.ok, first.release_id, first.output],
      [true, release, { consume: ["in_9"], routing: { conversations: ["local:x"] } }],
    );
    const replay = await call("hooks.test", { hook: "attention.plan", trace_id: first.trace_id });
    assert.deepEqual(replay.output, first.output);
    assert.deepEqual(getTrace(store, replay.trace_id)!.inputs, args);

    const read = await call("hooks.trace", { target: first.trace_id });
    assert.deepEqual(
      [read.trace.hook, read.trace.origin, read.trace.inputs, read.trace.output],
      ["attention.plan", "test", args, first.output],
    );
    const cut = recordTrace(store, {
      session: "default",
      frameId: null,
      hook: "context.prepare",
      releaseId: release,
      origin: "turn",
      inputs: { messages: ["x".repeat(TRACE_FIELD_MAX_CHARS)] },
      error: null,
      durationMs: 1,
    });
    await rejects(
      call("hooks.test", { hook: "context.prepare", trace_id: cut }),
      "invalid_input",
      /its inputs were over the size bound/,
    );
    const elsewhere = recordTrace(store, {
      session: "other",
      frameId: null,
      hook: "model.plan",
      releaseId: release,
      origin: "turn",
      inputs: {},
      error: null,
      durationMs: 1,
    });
    await rejects(
      call("hooks.trace", { target: elsewhere }),
      "not_found",
      /no such trace in session default/,
    );
    await rejects(
      call("hooks.trace", {}),
      "invalid_input",
      /no frame given and no turn is running/,
    );
    const failing = await call("hooks.test", {
      hook: "model.plan",
      args: { route: 1 },
      release_id: release,
    });
    assert.equal(failing.ok, true, "model.plan ignores its arguments");
    assert.deepEqual(await call("hooks.release"), { release_id: release, frame_id: null });
  });
});
