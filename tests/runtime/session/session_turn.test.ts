// The turn engine in-process, driven through `Session` (fake workbench, fake hooks, the fake
// model server, the real store in a temp dir): a turn that reaches its route's `max_steps` is
// told so and ends with the limit recorded, and the next turn hears of it; a turn is pinned to
// the release its frame recorded even when a release is activated under its running cell; a
// frame a dead owner left mid-cell is continued from the persisted sequence, its cell never
// run again; the operator's `cancelCell` ends one running cell and the turn goes on; failing
// turn hooks fall back to their safe defaults; a two-step turn asks `model.plan` once and
// `context.prepare` per request, every call traced and counted.

import assert from "node:assert/strict";
import { startCell } from "../../../store/tables/cells.ts";
import { appendProviderItems } from "../../../store/tables/provider_items.ts";
import { startGeneration } from "../../../store/tables/kernel_generations.ts";
import { requireSession } from "../../../store/tables/sessions.ts";
import { tracesOfFrame } from "../../../store/tables/behavior_diagnostics.ts";
import { isKlbrError, KlbrError } from "../../../runtime/core/mod.ts";
import { assistantMessage } from "../../../runtime/model/mod.ts";
import { frameOf } from "../../_helpers/store.ts";
import { cellResult, SESSION, withSessionLoop } from "../../_helpers/session_loop.ts";
import { admitInput } from "../../../store/tables/inputs.ts";

type Message = { role: string; content: string | null };

Deno.test("`Session` ends a turn at its route's max_steps, tells the model so, and the next turn hears of it", async () => {
  const fake = { fallback: () => ({ toolCall: { code: "print('working')" } }) };
  await withSessionLoop({ routeFields: "    max_steps 3", fake }, async (loop) => {
    loop.admit("a long task");
    await loop.settle("the turn ended", () => loop.records("turn.ended").length === 1);
    const [ended] = loop.records("turn.ended");
    assert.deepEqual([ended.reason, ended.step_limit], ["step limit 3", 3]);
    assert.equal(loop.chats().length, 3, "three steps, three requests");
    assert.equal(loop.kernel.ran.length, 3);
    await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    assert.equal(loop.records("frame.finished")[0].state, "done");

    loop.fake.enqueue({ toolCall: { code: "send('resuming')\nwait()" } });
    loop.admit("go on");
    await loop.settle("the send", () => loop.records("send").length === 1);
    const next = loop.chats()[3].body.messages as Message[];
    // The third cell's result, now in the history, told the model the turn ended there.
    const results = next.filter((m) => m.role === "tool");
    assert.match(String(results[2].content), /reached its limit of 3 model steps and ends after/);
    assert.match(
      String(next[next.length - 1].content),
      /^\[runtime\] your previous turn stopped at its limit of 3 model steps/,
    );
  });
});

Deno.test("`Session` pins a turn to its frame's release when a release is activated under its cell", async () => {
  await withSessionLoop({}, async (loop) => {
    const first = await loop.publish({ "attention.py": "# first\n" }, false);
    const second = await loop.publish({ "attention.py": "# second\n" }, false);
    // The operator activates the first release between turns.
    const epoch = requireSession(loop.store, SESSION).behaviorEpoch;
    assert.equal(
      await loop.session.activate({ releaseId: first, expectedEpoch: epoch, reason: "t" }),
      epoch + 1,
    );
    const seen: unknown[] = [];
    loop.kernel.script = (cell) => {
      if (!cell.code.includes("activate")) return undefined;
      return (async () => {
        seen.push(loop.session.pinnedRelease(), loop.session.runningFrame()?.policyRevision);
        const expectedEpoch = requireSession(loop.store, SESSION).behaviorEpoch;
        await loop.session.activate({ releaseId: second, expectedEpoch, reason: "under a cell" });
        seen.push(loop.session.pinnedRelease().releaseId, loop.session.activeRelease().releaseId);
        return cellResult();
      })();
    };
    // The cell activates; the next step replies with text only, so `turn.next` is asked.
    loop.fake.enqueue({ toolCall: { code: "activate()" } }, { text: "done for now" });
    loop.admit("switch releases");
    await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    const [frame] = loop.records("frame.accepted");
    assert.equal(frame.policy_revision, first);
    const [pin, revision, pinnedAfter, activeAfter] = seen;
    assert.deepEqual(pin, { releaseId: first, frameId: frame.frame_id });
    assert.deepEqual([revision, pinnedAfter, activeAfter], [first, first, second]);
    const turnHooks = loop.hooks.calls.filter((c) => c.name !== "attention.plan");
    assert.deepEqual(
      turnHooks.map((c) => [c.name, c.release]),
      [
        ["model.plan", first],
        ["context.prepare", first],
        ["model.plan", first],
        ["context.prepare", first],
        ["turn.next", first],
      ],
      "every hook of the turn ran from its frame's release, also after the activation",
    );
    assert.equal(loop.hooks.retired.length, 2, "each activation retires the hook worker");
    assert.equal(loop.session.runningFrame(), null, "no frame between turns");
    assert.deepEqual(loop.session.pinnedRelease(), { releaseId: second, frameId: null });

    loop.hooks.calls.length = 0;
    loop.admit("next");
    await loop.settle("the second frame", () => loop.records("frame.finished").length === 2);
    assert.equal(loop.records("frame.accepted")[1].policy_revision, second);
    assert.deepEqual(new Set(loop.hooks.calls.map((c) => c.release)), new Set([second]));
  });
});

Deno.test("`Session` continues a frame a dead owner left mid-cell from the persisted sequence, never running the cell again", async () => {
  let inputId = "";
  let frameId = "";
  const before = (store: Parameters<typeof frameOf>[0]) => {
    // The dead owner's turn: an input, its frame, the model's reply with a call, a cell begun.
    inputId = admitInput(store, {
      session: SESSION,
      sourceKind: "local",
      dedupeKey: "local:cl_dead:m1",
      conversationId: "local:main",
      author: "owner",
      body: "count the files",
    }).inputId;
    frameId = frameOf(store, [inputId]).frameId;
    const call = { id: "call_dead", name: "python", arguments: JSON.stringify({ code: "n = 1" }) };
    appendProviderItems(store, SESSION, frameId, [
      { role: "user", content: "count the files" },
      assistantMessage("", [call]),
    ]);
    const { generation } = startGeneration(store, {
      session: SESSION,
      reason: "startup",
      skillsRevision: "none",
      behaviorRevision: null,
    });
    startCell(store, { session: SESSION, generation, frameId, toolCallId: call.id, code: "n = 1" });
  };
  await withSessionLoop({ before }, async (loop) => {
    await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    const [recovery] = loop.records("recovery");
    assert.deepEqual(recovery.resumed_frames, [frameId]);
    assert.equal((recovery.interrupted_cells as unknown[]).length, 1);
    const [finished] = loop.records("frame.finished");
    assert.deepEqual([finished.frame_id, finished.state], [frameId, "done"]);
    assert.equal(loop.records("frame.accepted").length, 1, "no new frame: the same one went on");
    assert.deepEqual(loop.kernel.ran.map((c) => c.code), ["wait()"], "the cut cell never reran");
    const [request] = loop.chats();
    const messages = request.body.messages as (Message & { tool_call_id?: string })[];
    assert.equal(messages.filter((m) => m.content?.includes("count the files")).length, 1);
    const result = messages.find((m) => m.tool_call_id === "call_dead");
    assert.match(
      String(result?.content),
      /^\[interrupted: the daemon restarted while this cell ran/,
    );
    assert.match(String(result?.content), /this is not a new request/);
    assert.equal(loop.records("turn.started")[0].resumed, true);
  });
});

Deno.test("`Session.cancelCell()` ends one running cell, the model hears it was cancelled, and the turn goes on", async () => {
  await withSessionLoop({}, async (loop) => {
    let running = "";
    loop.kernel.script = (cell, options) => {
      if (!cell.code.includes("sleep")) return undefined;
      running = cell.cellId;
      return new Promise((resolve) =>
        options.signal!.addEventListener(
          "abort",
          () => resolve(cellResult({ outcome: "cancelled" })),
        )
      );
    };
    loop.fake.enqueue({ toolCall: { code: "sleep()" } }, { toolCall: { code: "wait()" } });
    loop.admit("a slow one");
    await loop.settle("the cell running", () => running !== "");
    assert.throws(
      () => loop.session.cancelCell("cell_other"),
      (e) =>
        isKlbrError(e) && e.code === "not_found" &&
        /not running \(got cell_other\)/.test(e.message),
    );
    loop.session.cancelCell(running);
    await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    assert.equal(loop.records("frame.finished")[0].state, "done");
    const messages = loop.chats()[1].body.messages as Message[];
    assert.match(String(messages[messages.length - 1].content), /cancelled/);
    assert.deepEqual(loop.kernel.ran.map((c) => c.code), ["sleep()", "wait()"]);
    assert.throws(
      () => loop.session.cancelCell(running),
      (e) => isKlbrError(e) && e.code === "not_found",
    );
  });
});

Deno.test("`Session` falls back to the safe defaults of a failing model.plan, context.prepare and turn.next", async () => {
  await withSessionLoop({}, async (loop) => {
    loop.hooks.answer = (call) => {
      if (call.name === "model.plan") throw new Error("no route today");
      if (call.name === "context.prepare") return "not a list";
      if (call.name === "turn.next") return { action: "dance" };
      return undefined;
    };
    // Text only, no tool call: turn.next decides, and its garbage falls back to wait.
    loop.fake.enqueue({ text: "just thinking" });
    loop.admit("hello");
    await loop.settle("the turn ended", () => loop.records("turn.ended").length === 1);
    assert.equal(loop.records("turn.ended")[0].reason, "turn.next: wait");
    const failures = loop.records("hook.failed").map((r) => [r.hook, r.fallback]);
    assert.deepEqual(failures.sort(), [
      ["context.prepare", true],
      ["model.plan", true],
      ["turn.next", true],
    ]);
    // The request still went out, on the main route, with the unprepared context.
    const chats = loop.chats();
    assert.equal(chats.length, 1);
    assert.equal(chats[0].body.messages[0].role, "system");
    assert.equal(loop.records("send").length, 0, "a turn without a send says nothing");
  });
});

Deno.test("`Session` asks model.plan and context.prepare per request, every call traced and counted", async () => {
  await withSessionLoop({}, async (loop) => {
    loop.fake.enqueue({ toolCall: { code: "x = 1" } }, { toolCall: { code: "wait()" } });
    const before = Number(loop.session.status().hook_calls);
    loop.admit("two steps");
    await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    assert.equal(loop.chats().length, 2, "two requests");
    const frameId = String(loop.records("frame.finished")[0].frame_id);
    const traces = tracesOfFrame(loop.store, frameId);
    const hooks = traces.map((t) => t.hook);
    const count = (name: string) => hooks.filter((h) => h === name).length;
    assert.equal(count("attention.plan"), 1, `traces: ${hooks.join(", ")}`);
    assert.equal(count("model.plan"), 2, `model.plan per request: ${hooks.join(", ")}`);
    assert.equal(count("context.prepare"), 2, `context.prepare per request: ${hooks.join(", ")}`);
    // What status counts is what reached the hook worker: the traces of this turn.
    assert.equal(Number(loop.session.status().hook_calls) - before, hooks.length);
    assert.equal(loop.hooks.calls.length, hooks.length);
    // A context.prepare that hands the request back keeps the messages once, in its inputs,
    // and its output says unchanged.
    for (const trace of traces.filter((t) => t.hook === "context.prepare")) {
      assert.deepEqual(trace.output, { unchanged: "the messages it was given" });
      const messages = (trace.inputs as { messages: { role: string }[] }).messages;
      assert.equal(messages[0].role, "system", "the inputs hold the whole request");
    }
  });
});

Deno.test("`Session` starts a reply's first cell in the reply's own commit, and a later cell of the reply in its own", async () => {
  await withSessionLoop({}, async (loop) => {
    // One reply with two calls: the first cell starts with the reply, the second after it ends.
    loop.fake.enqueue({ text: "two cells", toolCall: [{ code: "x = 1" }, { code: "wait()" }] });
    const commits: string[][] = [];
    const stop = loop.store.onCommit((commit) => {
      const kinds = [...commit.records.values()].flat().map((record) => record.kind);
      if (kinds.length > 0) commits.push(kinds);
    });
    try {
      loop.admit("go");
      await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    } finally {
      stop();
    }
    const holding = (kind: string) => commits.filter((kinds) => kinds.includes(kind));
    const [reply] = holding("model.reply");
    assert.deepEqual(
      reply.filter((kind) => kind !== "hook.traced" && kind !== "turn.started"),
      ["model.reply", "scratchpad", "cell.started"],
      "the reply, its scratchpad and the first cell's start: one commit",
    );
    const started = holding("cell.started");
    assert.equal(started.length, 2);
    assert.deepEqual(started[1], ["cell.started"], "the second cell starts in a commit of its own");
    assert.deepEqual(loop.kernel.ran.map((cell) => cell.code), ["x = 1", "wait()"]);
    const cells = loop.records("cell.started").map((record) => record.tool_call_id);
    assert.equal(new Set(cells).size, 2, "each call's cell started once");
  });
});

Deno.test("`Session` commits each cell's outcome with its call's tool result: no commit leaves one without the other", async () => {
  await withSessionLoop({}, async (loop) => {
    // After every commit, no finished cell's call may still wait for its result.
    const unanswered: string[][] = [];
    const stop = loop.store.onCommit(() => {
      const rows = loop.store.statement(
        `SELECT c.tool_call_id AS call FROM cells c JOIN open_tool_calls o
           ON o.session_id = c.session_id AND o.call_id = c.tool_call_id
         WHERE c.outcome IS NOT NULL`,
      ).all() as { call: string }[];
      if (rows.length > 0) unanswered.push(rows.map((row) => row.call));
    });
    try {
      loop.fake.enqueue(
        { toolCall: { code: "print('one')" } },
        { toolCall: { code: "print('two')\nwait()" } },
      );
      loop.admit("two cells");
      await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    } finally {
      stop();
    }
    assert.equal(loop.kernel.ran.length, 2);
    assert.deepEqual(unanswered, []);
    const results = loop.store.statement(
      "SELECT COUNT(*) AS n FROM provider_items WHERE role = 'tool'",
    ).get() as { n: number };
    assert.equal(results.n, 2, "each call has its one result");
  });
});

Deno.test("`Session` keeps the route's context when its server reports only the prompt tokens it had not cached", async () => {
  // Some Ollama 0.30 versions reported only the new part of a prompt (ollama/ollama#16428):
  // far under the request, like a cut one, but never the same count twice in a row.
  let n = 0;
  const fallback = (request: { body: { messages: Message[] } }) => {
    const usage = { prompt_tokens: 1_500 + 97 * (n++ % 5), completion_tokens: 10 };
    const last = request.body.messages.at(-1);
    return last?.role === "user" && String(last.content).includes("task")
      ? { toolCall: { code: "print('done')" }, usage }
      : { toolCall: { code: "wait()" }, usage };
  };
  await withSessionLoop({ fake: { fallback } }, async (loop) => {
    for (let i = 1; i <= 4; i++) {
      // Each task is about 4,000 tokens: the requests grow far past what is reported.
      loop.admit(`task ${i}: ${"words ".repeat(2_700)}`);
      await loop.settle(`turn ${i}`, () => loop.records("turn.ended").length === i);
    }
    assert.ok(loop.chats().length >= 8);
    assert.deepEqual(loop.records("route.adapted"), []);
  });
});

Deno.test("`Session` asks again with three quarters of the context when a server refuses a request past a context it does not name", async () => {
  // Ollama's words when it refuses instead of cutting name no size.
  const fake = { fallback: () => ({ toolCall: { code: "send('done')\nwait()" } }) };
  await withSessionLoop({ fake }, async (loop) => {
    loop.fake.enqueue({ status: 400, message: "the input length exceeds the context length" });
    loop.admit("hello");
    await loop.settle("the send", () => loop.records("send").length === 1);
    const [adapted] = loop.records("route.adapted");
    assert.deepEqual([adapted.setting, adapted.to, adapted.configured], [
      "context_tokens",
      String((32_768 * 3) / 4),
      32_768,
    ]);
    assert.equal(loop.chats().length, 2, "refused once, then asked again at once");
    assert.deepEqual(loop.records("model.failing"), []);
  });
});

Deno.test("`Session` answers a call whose workbench cannot start with the failure, leaves no cell open, and the turn goes on", async () => {
  await withSessionLoop({}, async (loop) => {
    // The first cell starts with its reply, then its generation fails to spawn; the second
    // reply's workbench fails before its cell could be recorded; the third runs.
    const cannotStart = () =>
      new KlbrError("worker_failed", "cannot start generation 2: the worker ended during init");
    const ready = loop.kernel.ready.bind(loop.kernel);
    // Two spawns fail after the first cell's: the second reply's and its cell's own.
    let failing = 0;
    loop.kernel.ready = () => failing-- > 0 ? Promise.reject(cannotStart()) : ready();
    loop.kernel.script = (cell) => {
      if (cell.code !== "print(1)") return undefined;
      failing = 2;
      return Promise.reject(cannotStart());
    };
    loop.fake.enqueue(
      { toolCall: { code: "print(1)" } },
      { toolCall: { code: "print(2)" } },
      { toolCall: { code: "send('back')\nwait()" } },
    );
    loop.admit("go");
    await loop.settle("the frame ended", () => loop.records("frame.finished").length === 1);
    const [finished] = loop.records("frame.finished");
    assert.deepEqual([finished.state, finished.reason], ["done", "wait"]);
    assert.deepEqual(loop.records("send").map((s) => s.text), ["back"]);
    const open = loop.store.statement("SELECT id FROM cells WHERE outcome IS NULL").all();
    assert.deepEqual(open, [], "no cell is left without an outcome");
    const messages = loop.chats()[2].body.messages as Message[];
    const results = messages.filter((m) => m.role === "tool").map((m) => String(m.content));
    assert.equal(results.length, 2, "each call has its one result");
    assert.match(results[0], /^outcome: error\n/);
    assert.match(results[0], /the workbench could not run this cell: cannot start generation 2/);
    assert.match(
      results[1],
      /^\[not run: the workbench could not start: cannot start generation 2/,
    );
  });
});

Deno.test("`Session` stopped by a shutdown answers the calls it did not run with the shutdown, not the operator", async () => {
  await withSessionLoop({}, async (loop) => {
    let running = false;
    loop.kernel.script = (cell, options) => {
      if (cell.code !== "sleep()") return undefined;
      running = true;
      return new Promise((resolve) =>
        options.signal!.addEventListener("abort", () => resolve(cellResult({ outcome: "killed" })))
      );
    };
    loop.fake.enqueue({ toolCall: [{ code: "sleep()" }, { code: "wait()" }] });
    loop.admit("two cells");
    await loop.settle("the first cell running", () => running);
    await loop.session.runtime.stop("daemon shutdown (SIGTERM)");
    const results = loop.store.statement(
      "SELECT message FROM provider_items WHERE role = 'tool' ORDER BY idx",
    ).all().map((row) => JSON.parse(String(row.message)).content as string);
    assert.equal(results.length, 2, "each call has its one result");
    assert.equal(results[1], "[not run: stopped: daemon shutdown (SIGTERM)]");
    assert.deepEqual(loop.kernel.ran.map((c) => c.code), ["sleep()"]);
  });
});

Deno.test("`Session` tells a text-mode model its python block did not run when the block never closed: cut by the token limit (or Mistral's model_length), or left open", async () => {
  await withSessionLoop({ routeFields: '    tool_calls "text"' }, async (loop) => {
    loop.fake.enqueue(
      { text: "Checking.\n```python\nfor i in range(3):\n    pri", finishReason: "length" },
      { text: "Again.\n```python\nprint('all of it')\n", finishReason: "stop" },
      { text: "Once more.\n```python\nprint('it'", finishReason: "model_length" },
      { text: "```python\nsend('done')\nwait()\n```" },
    );
    loop.admit("count to three");
    await loop.settle("the send", () => loop.records("send").length === 1);
    assert.equal(loop.kernel.ran.length, 1, "only the closed block ran");
    const [, second, third, fourth] = loop.chats().map((c) => c.body.messages);
    const cut =
      /\[not run: your reply hit the token limit in the middle of the call; write a shorter cell\]/;
    assert.match(String(second[second.length - 1].content), cut);
    assert.match(
      String(third[third.length - 1].content),
      /\[not run: your ```python block has no closing ``` line; end the cell with one\]/,
    );
    assert.match(String(fourth[fourth.length - 1].content), cut);
  });
});

Deno.test("`Session` runs no cell of a reply the provider's content filter stopped, and tells the model why", async () => {
  // OpenAI's `content_filter`: "content was omitted due to a flag from our content filters";
  // Azure OpenAI stops a stream there, mid-reply (tests/fakes/model_quirks.ts, filteredChunks).
  // The reply is not the model's whole answer: a call cut by it would be refused as bad JSON,
  // one that happens to be whole would run, and the model would not hear why either way.
  const filtered = "[not run: the provider's content filter stopped your reply]";
  await withSessionLoop({}, async (loop) => {
    loop.fake.enqueue(
      { text: "Let me", toolCall: { code: "print('flagged part')" }, filtered: true },
      { toolCall: { code: "print('whole')" }, finishReason: "content_filter" },
      { toolCall: { code: "send('done')\nwait()" } },
    );
    loop.admit("do it");
    await loop.settle("the send", () => loop.records("send").length === 1);
    assert.deepEqual(loop.kernel.ran.map((c) => c.code), ["send('done')\nwait()"]);
    const [, second, third] = loop.chats().map((c) => c.body.messages);
    assert.equal(second.at(-1)?.content, filtered);
    assert.equal(third.at(-1)?.content, filtered);
    // The owner finds the reason in the reply's record.
    const finishes = loop.records("model.reply").map((r) => r.finish_reason);
    assert.deepEqual(finishes, ["content_filter", "content_filter", "tool_calls"]);
  });
  // A text-mode reply the filter stopped runs no python block either, closed or not.
  await withSessionLoop({ routeFields: '    tool_calls "text"' }, async (loop) => {
    loop.fake.enqueue(
      { text: "```python\nprint('closed')\n```\nAnd then", finishReason: "content_filter" },
      { text: "```python\nprint('open'", filtered: true },
      { text: "```python\nsend('done')\nwait()\n```" },
    );
    loop.admit("do it");
    await loop.settle("the send", () => loop.records("send").length === 1);
    assert.deepEqual(loop.kernel.ran.map((c) => c.code), ["send('done')\nwait()"]);
    const [, second, third] = loop.chats().map((c) => c.body.messages);
    assert.match(String(second.at(-1)?.content), /\[not run: the provider's content filter/);
    assert.match(String(third.at(-1)?.content), /\[not run: the provider's content filter/);
  });
});
