// Compaction against real SQLite: what a summary covers, what it keeps apart, that a new one
// replaces the old (hierarchical, bounded), that every send of the newest step is named, and
// how the model's summary is used or refused.

import { providerItems, withStore } from "../../_helpers/store.ts";
import assert from "node:assert/strict";
import {
  AMBIENT_HEADING,
  buildRequest,
  compactContext,
  type ContextBudget,
  messagesTokens,
} from "../../../runtime/context/mod.ts";
import { isKlbrError, SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { createProvider, type Provider } from "../../../runtime/model/mod.ts";
import { parseConfig } from "../../../runtime/config/mod.ts";
import { latestSummary } from "../../../store/tables/context_summaries.ts";
import { readEvents } from "../../../store/tables/events.ts";
import { acceptFrame } from "../../../store/tables/frames.ts";
import { admitInput } from "../../../store/tables/inputs.ts";
import { moveOutbox } from "../../../store/tables/outbox.ts";
import { appendProviderItems, estimateTokens } from "../../../store/tables/provider_items.ts";
import { requireSession } from "../../../store/tables/sessions.ts";
import { type Store } from "../../../store/store.ts";
import { writeTurn, type WrittenTurn } from "../../_helpers/history_fixture.ts";
import { faithfulSummary, type FakeOpenAI, startFakeOpenAI } from "../../fakes/openai_server.ts";

const BUDGET: ContextBudget = { contextTokens: 32_768, compactAt: 0.75, summaryShare: 0.1 };

function deps(store: Store, options: { budget?: ContextBudget; provider?: Provider } = {}) {
  return {
    store,
    log: SILENT_LOGGER,
    contextBudget: () => options.budget ?? BUDGET,
    provider: options.provider === undefined ? undefined : () => options.provider!,
  };
}

/** The `long` route of a fake model server. */
function longProvider(fake: FakeOpenAI): Provider {
  const { config } = parseConfig(
    `llm "long" { url "${fake.url}"; model "fake"; timeout_ms 5000 }`,
    {
      file: "test.kdl",
    },
  );
  return createProvider(config.routes.long, { apiKey: undefined });
}

Deno.test("`compactContext()` covers old items, keeps sent and scratchpad apart, and moves the epoch", async () => {
  await withStore(async (store) => {
    const turns: WrittenTurn[] = [];
    for (let n = 1; n <= 4; n++) turns.push(writeTurn(store, "default", n));
    const d = deps(store);
    assert.equal(
      await compactContext(d, "default", { keep: { items: 20 }, model: false }),
      undefined,
    );

    // 12 items; keeping 3 puts the cut just before turn 4's user message (#10).
    const done = await compactContext(d, "default", { keep: { items: 3 }, model: false });
    assert.deepEqual(done, { epoch: 1, coversToIdx: 9, summarizedItems: 9, source: "extractive" });
    assert.equal(requireSession(store, "default").contextEpoch, 1);
    const summary = latestSummary(store, "default")!;
    const lines = summary.text.split("\n");
    assert.equal(lines[0], "[summary of 9 earlier items, #1–#9; epoch 1, extractive]");
    assert.match(
      lines[1],
      /`await history\.search\("words"\)`.*`await history\.read\(id\)`/,
    );
    const first3 = turns.slice(0, 3);
    assert.deepEqual(lines.slice(2), [
      "Inputs you received:",
      ...first3.map((t, i) => `- question ${i + 1} [input:${t.inputId}] (owner in local:default)`),
      "Messages you sent (these reached the conversation):",
      ...first3.map((t, i) => `- to local:default: answer ${i + 1} (delivered) [${t.sends[0]}]`),
      "Your scratchpad notes (never delivered to anyone):",
      ...first3.map((_, i) => `- thinking about ${i + 1} [item:${3 * i + 2}]`),
      "Cells you ran:",
      ...first3.map((t, i) =>
        `- await local.send('answer ${i + 1}') → ok: stdout: printed ${i + 1} [cell:${t.cellId}]`
      ),
    ]);
    // Nothing is deleted: every item is still there.
    assert.equal(providerItems(store, "default").length, 12);
    const event = readEvents(store, "default", { limit: 10_000 }).at(-1)!;
    assert.deepEqual([event.kind, event.body], ["context.compacted", {
      epoch: 1,
      covers_to_idx: 9,
      summarized_items: 9,
      summary_chars: summary.text.length,
      summary_tokens: estimateTokens(summary.text),
      source: "extractive",
      fallback_reason: null,
    }]);

    // The next summary covers the old one's items and the newer ones, and replaces it.
    for (let n = 5; n <= 6; n++) turns.push(writeTurn(store, "default", n));
    const next = await compactContext(d, "default", { keep: { items: 3 }, model: false });
    assert.deepEqual(next, { epoch: 2, coversToIdx: 15, summarizedItems: 6, source: "extractive" });
    const text = latestSummary(store, "default")!.text;
    assert.ok(text.startsWith("[summary of 15 earlier items, #1–#15; epoch 2, extractive]"));
    assert.ok(!text.includes("[summary of 9"), "the old summary is replaced, not appended");
    for (let n = 1; n <= 5; n++) {
      assert.equal(
        text.split(`- to local:default: answer ${n} (delivered)`).length,
        2,
        `send ${n}`,
      );
      assert.equal(text.split(`- question ${n} [`).length, 2, `input ${n}`);
    }
  });
});

Deno.test("`compactContext()` refuses a bad keep and an unknown session", async () => {
  await withStore(async (store) => {
    for (const items of [0, 1.5, 100_001]) {
      await assert.rejects(
        () => compactContext(deps(store), "default", { keep: { items }, model: false }),
        (e) =>
          isKlbrError(e, "invalid_input") &&
          e.message ===
            `cannot compact context: keep items must be an integer in 1-100000 (got ${items})`,
      );
    }
    await assert.rejects(
      () => compactContext(deps(store), "default", { keep: { tokens: 0 }, model: false }),
      (e) => isKlbrError(e, "invalid_input"),
    );
    await assert.rejects(
      () => compactContext(deps(store), "nobody", { keep: { items: 5 }, model: false }),
      (e) => isKlbrError(e, "not_found"),
    );
  });
});

Deno.test("`compactContext()` cuts only before a user message, keeping at least keep items", async () => {
  await withStore(async (store) => {
    for (let n = 1; n <= 4; n++) writeTurn(store, "default", n);
    // Keeping 4 of 12 cannot cut before #10 (that keeps 3), so it cuts before #7: a turn is
    // never split.
    const done = await compactContext(deps(store), "default", { keep: { items: 4 }, model: false });
    assert.equal(done?.coversToIdx, 6);
  });
});

Deno.test("`compactContext()` by tokens never leaves a tool result first, whatever the sizes", async () => {
  await withStore(async (store) => {
    for (let n = 1; n <= 40; n++) writeTurn(store, "default", n, { padding: (n * 37) % 23 });
    const items = providerItems(store, "default");
    // Every keep size from one item's worth to the whole history.
    for (let keep = 5; keep < 3_000; keep += 97) {
      const done = await compactContext(deps(store), "default", {
        keep: { tokens: keep },
        model: false,
      });
      if (done === undefined) continue;
      const next = items.find((item) => item.idx === done.coversToIdx + 1);
      assert.notEqual(next?.role, "tool", `cut after #${done.coversToIdx} (keep ${keep})`);
    }
  });
});

/**
 * Runs `turns` turns, compacting whenever the next request would pass the threshold (checked
 * after every `batch` turns, which are written in one transaction to spare fsyncs).
 */
async function runLikeTheDaemon(
  store: Store,
  run: { budget: ContextBudget; turns: number; batch: number },
  onStep: (step: { coversFrom: number; coversTo: number; sends: string[] }) => void,
): Promise<void> {
  const { budget, turns, batch } = run;
  const d = deps(store, { budget });
  const parts = { route: "main", budget, system: "contract", opening: [] };
  const sendsByItem = new Map<number, string[]>();
  for (let n = 1; n <= turns; n += batch) {
    store.transaction(() => {
      for (let k = n; k < n + batch && k <= turns; k++) {
        const turn = writeTurn(store, "default", k, {
          sends: k % 7 === 0 ? 3 : 1,
          discord: k % 11 === 0,
        });
        sendsByItem.set(3 * k - 1, turn.sends);
      }
    });
    const built = buildRequest(store, "default", parts);
    assert.ok(built.rawTokens <= built.limits.request, `turn ${n}: request within budget`);
    assert.equal(built.rawTokens, messagesTokens(built.messages));
    if (!built.overCompact) continue;
    const before = latestSummary(store, "default")?.coversToIdx ?? 0;
    const done = await compactContext(d, "default", {
      keep: { tokens: built.limits.keep },
      model: false,
    });
    if (done === undefined) continue;
    const stepSends = [...sendsByItem].filter(([idx]) => idx > before && idx <= done.coversToIdx)
      .flatMap(([, refs]) => refs);
    for (const [idx] of sendsByItem) if (idx <= done.coversToIdx) sendsByItem.delete(idx);
    onStep({ coversFrom: before + 1, coversTo: done.coversToIdx, sends: stepSends });
  }
}

Deno.test("summaries stay within their share over 1,500 turns, and every send is accounted for", async () => {
  await withStore(async (store) => {
    const budget = { contextTokens: 4096, compactAt: 0.75, summaryShare: 0.15 };
    const limit = Math.floor((budget.contextTokens * budget.summaryShare) / 1.25);
    let steps = 0;
    let covered = 0;
    await runLikeTheDaemon(store, { budget, turns: 1_500, batch: 5 }, (step) => {
      steps++;
      covered += step.sends.length;
      const summary = latestSummary(store, "default")!;
      assert.ok(summary.tokens <= limit, `epoch ${summary.epoch}: ${summary.tokens} > ${limit}`);
      assert.equal(summary.tokens, estimateTokens(summary.text));
      // Every send of the newest step is named as sent, with its state.
      const sent = summary.text.split("Messages you sent (these reached the conversation):\n")[1]
        .split("\nYour scratchpad notes")[0];
      for (const ref of step.sends) assert.ok(sent.includes(`[${ref}]`), `${ref} named as sent`);
      // Older sends are counted, never dropped: listed plus counted is every covered send.
      const digest = summary.digest as {
        delivered: { earlier: { count: number } | null; entries: unknown[] };
      };
      assert.equal(
        (digest.delivered.earlier?.count ?? 0) + digest.delivered.entries.length,
        covered,
      );
    });
    assert.ok(steps >= 20, `compacted ${steps} times`);
  });
});

Deno.test("the 12k-turn case: the newest step names every one of its sends", async () => {
  await withStore(async (store) => {
    let last: { sends: string[]; coversTo: number } | undefined;
    await runLikeTheDaemon(store, { budget: BUDGET, turns: 12_000, batch: 20 }, (step) => {
      last = step;
    });
    assert.ok(last !== undefined && last.coversTo > 30_000, "compacted up to the 12k-th turns");
    const summary = latestSummary(store, "default")!;
    assert.ok(last.sends.length > 0);
    for (const ref of last.sends) {
      assert.match(summary.text, new RegExp(`\\((delivered|pending)\\) \\[${ref}\\]`), ref);
    }
  });
});

Deno.test("`compactContext()` uses the long model's summary when it passes its check, from a server without tool calling too", async () => {
  // Ollama's model without tools refuses any request that carries them: the summarizer sends none.
  const fake = startFakeOpenAI({ profile: "ollama-no-tools", summarizer: "faithful" });
  try {
    await withStore(async (store) => {
      for (let n = 1; n <= 6; n++) writeTurn(store, "default", n, { discord: n === 2 });
      const d = deps(store, { provider: longProvider(fake) });
      const done = await compactContext(d, "default", { keep: { items: 3 }, model: true });
      assert.equal(done?.source, "model");
      const summary = latestSummary(store, "default")!;
      assert.match(
        summary.text,
        /^\[summary of 15 earlier items, #1–#15; epoch 1, written by the long model\]/,
      );
      assert.match(summary.text, /- to discord:42: discord answer 2 \(pending\) \[outbox:/);
      const event = readEvents(store, "default", { limit: 10_000 }).at(-1)!;
      assert.equal((event.body as { source: string }).source, "model");
      // The prompt carried the step's sends and the rules.
      const request = fake.requests.at(-1)!;
      const material = JSON.parse(request.body.messages[1].content);
      assert.equal(material.must_name_as_sent.length, 6);
      assert.deepEqual(["tools" in request.body, "tool_choice" in request.body], [false, false]);
    });
  } finally {
    await fake.close();
  }
});

/** A fake whose summarizer writes the faithful summary, then edits it with `edit`. */
function rewriting(edit: (text: string) => string): FakeOpenAI {
  return startFakeOpenAI({
    summarizer: (request) => ({
      text: edit(faithfulSummary(JSON.parse(request.body.messages[1].content))),
    }),
  });
}

Deno.test("`compactContext()` falls back to the extractive summary and records why", async () => {
  const cases: [string, () => FakeOpenAI, RegExp][] = [
    [
      "a draft named as sent",
      () =>
        startFakeOpenAI({
          summarizer: () => ({
            text: [
              "Inputs you received:",
              "- (none)",
              "Messages you sent (these reached the conversation):",
              "- thinking about 1 (delivered) [item:2]",
              "Your scratchpad notes (never delivered to anyone):",
              "Cells you ran:",
            ].join("\n"),
          }),
        }),
      /item:2 is not a sent message but appears under "Messages you sent/,
    ],
    [
      "a send left out",
      () =>
        startFakeOpenAI({
          summarizer: () => ({
            text: "Inputs you received:\nMessages you sent (these reached the conversation):\n" +
              "Your scratchpad notes (never delivered to anyone):\nCells you ran:",
          }),
        }),
      /send:\d+ is not named under "Messages you sent \(these reached the conversation\):" with its state \(delivered\)/,
    ],
    [
      "an unreachable model",
      () => startFakeOpenAI({ summarizer: () => ({ status: 503, message: "down" }) }),
      /the long model failed: cannot stream from llm "long": provider answered HTTP 503/,
    ],
    [
      "a sent message among the notes",
      () =>
        rewriting((text) =>
          text.replace(
            /\nYour scratchpad notes[^\n]*\n/,
            (h) => `${h}- again (delivered) [send:5]\n`,
          )
        ),
      /send:5 is a sent message but appears under "Your scratchpad notes/,
    ],
    [
      "an id that does not exist",
      () => rewriting((text) => `${text}\n- another cell → ok [cell:cell_made_up]`),
      /it names cell:cell_made_up, which is neither in the previous summary nor in the new items/,
    ],
    [
      "a wrong state",
      () => rewriting((text) => text.replace("(delivered) [send:5]", "(failed) [send:5]")),
      /send:5 is not named under "Messages you sent \(these reached the conversation\):" with its state \(delivered\)/,
    ],
    [
      "a failed send among the sent ones",
      () =>
        startFakeOpenAI({
          summarizer: () => ({
            text: [
              "Inputs you received:",
              "Messages you sent (these reached the conversation):",
              "- to discord:42: lost (failed) [send:5]",
              "Your scratchpad notes (never delivered to anyone):",
              "Cells you ran:",
            ].join("\n"),
          }),
        }),
      /send:\d+ is not named under "Messages you sent \(these reached the conversation\):" with its state \(delivered\)/,
    ],
    [
      "headings out of order",
      () => rewriting((text) => `Cells you ran:\n${text.replace("Cells you ran:", "")}`),
      /the headings must be "Inputs you received:", .* in this order/,
    ],
    [
      "too long",
      () => rewriting((text) => `${text}\nNotes:\n- ${"blah ".repeat(4000)}`),
      /it is \d+ tokens, over the bound of \d+/,
    ],
    [
      "a tool call instead of text",
      () => startFakeOpenAI({ summarizer: () => ({ toolCall: { code: "print(1)" } }) }),
      /the long model called a tool/,
    ],
  ];
  for (const [label, start, reason] of cases) {
    const fake = start();
    try {
      await withStore(async (store) => {
        for (let n = 1; n <= 4; n++) writeTurn(store, "default", n);
        const d = deps(store, { provider: longProvider(fake) });
        const done = await compactContext(d, "default", { keep: { items: 3 }, model: true });
        assert.equal(done?.source, "extractive", label);
        const summary = latestSummary(store, "default")!;
        assert.match(summary.fallbackReason ?? "", reason, label);
        assert.match(summary.text, /^\[summary of 9 earlier items, #1–#9; epoch 1, extractive\]/);
        const event = readEvents(store, "default", { limit: 10_000 }).at(-1)!;
        assert.match(String((event.body as { fallback_reason: string }).fallback_reason), reason);
      });
    } finally {
      await fake.close();
    }
  }
});

/** Four turns, each with a local send and a Discord row: confirmed, failed, unknown, pending; the
 * first cell printed a long output and raised. A fifth turn stays uncovered. */
function sendsInEveryState(store: Store): { local: string[]; outbox: string[]; cells: string[] } {
  const long = `${"x".repeat(5_000)} the last line`;
  const turns = [writeTurn(store, "default", 1, {
    discord: true,
    cell: {
      outcome: "error",
      result: {
        stdout: long,
        stderr: "",
        value: null,
        error: { type: "RuntimeError", message: "boom", traceback: "Traceback …" },
      },
    },
  })];
  for (let n = 2; n <= 4; n++) turns.push(writeTurn(store, "default", n, { discord: true }));
  writeTurn(store, "default", 5);
  const outbox = turns.map((t) => t.sends[1].slice("outbox:".length));
  for (const id of outbox.slice(0, 3)) moveOutbox(store, id, "attempting");
  moveOutbox(store, outbox[0], "confirmed", { remoteId: "900" });
  moveOutbox(store, outbox[1], "failed", { error: "HTTP 403" });
  moveOutbox(store, outbox[2], "unknown", { error: "timed out" });
  return { local: turns.map((t) => t.sends[0]), outbox, cells: turns.map((t) => t.cellId) };
}

Deno.test("the summarizer reads each cell's output excerpt and the sends grouped by their real state", async () => {
  const fake = startFakeOpenAI({ summarizer: "faithful" });
  try {
    await withStore(async (store) => {
      const { local, outbox, cells } = sendsInEveryState(store);
      const d = deps(store, { provider: longProvider(fake) });
      const done = await compactContext(d, "default", { keep: { items: 3 }, model: true });
      assert.deepEqual([done?.coversToIdx, done?.source], [12, "model"]);
      const material = JSON.parse(fake.requests.at(-1)!.body.messages[1].content);
      // Each cell comes with what it showed, bounded.
      const [failing, printing] = material.new_items.cells;
      assert.equal(failing.id, `cell:${cells[0]}`);
      assert.equal(failing.outcome, "error");
      assert.ok(failing.output.startsWith(`RuntimeError: boom | stdout: ${"x".repeat(300)} … x`));
      assert.ok(failing.output.length <= 401, `bounded (got ${failing.output.length})`);
      assert.equal(printing.output, "stdout: printed 2");
      // The sends by state: only delivered (and confirmed) ones reached the conversation.
      const ids = (group: string) =>
        (material.new_items.sent[group] ?? []).map((e: { id: string }) => e.id);
      assert.deepEqual(ids("delivered"), [local[0], `outbox:${outbox[0]}`, ...local.slice(1)]);
      assert.deepEqual(ids("failed"), [`outbox:${outbox[1]}`]);
      assert.deepEqual(ids("unknown"), [`outbox:${outbox[2]}`]);
      assert.deepEqual(ids("pending"), [`outbox:${outbox[3]}`]);
      const reached = "Messages you sent (these reached the conversation):";
      assert.deepEqual(
        material.must_name_as_sent.map((m: { state: string; heading: string }) => [
          m.state,
          m.heading === reached,
        ]),
        [
          ["delivered", true],
          ["confirmed", true],
          ["delivered", true],
          ["failed", false],
          ["delivered", true],
          ["unknown", false],
          ["delivered", true],
          ["pending", false],
        ],
      );
      // The summary the model wrote passed the check with the failed send apart.
      const text = latestSummary(store, "default")!.text;
      const sent = text.split(`${reached}\n`)[1].split("\nMessages that did not reach")[0];
      assert.ok(!sent.includes(outbox[1]), "the failed send is not among those that reached");
    });
  } finally {
    await fake.close();
  }
});

Deno.test("an extractive summary lists only delivered sends as reaching the conversation, the rest by state", async () => {
  await withStore(async (store) => {
    const { local, outbox, cells } = sendsInEveryState(store);
    await compactContext(deps(store), "default", { keep: { items: 3 }, model: false });
    const lines = latestSummary(store, "default")!.text.split("\n");
    const from = lines.indexOf("Messages you sent (these reached the conversation):");
    const to = lines.indexOf("Your scratchpad notes (never delivered to anyone):");
    assert.deepEqual(lines.slice(from + 1, to), [
      `- to local:default: answer 1 (delivered) [${local[0]}]`,
      `- to discord:42: discord answer 1 (confirmed) [outbox:${outbox[0]}]`,
      ...local.slice(1).map((ref, i) => `- to local:default: answer ${i + 2} (delivered) [${ref}]`),
      "Messages that did not reach the conversation (failed), may not have (unknown) or not yet (pending):",
      `- to discord:42: discord answer 2 (failed) [outbox:${outbox[1]}]`,
      `- to discord:42: discord answer 3 (unknown) [outbox:${outbox[2]}]`,
      `- to discord:42: discord answer 4 (pending) [outbox:${outbox[3]}]`,
    ]);
    const cellLine = lines.find((line) => line.endsWith(`[cell:${cells[0]}]`))!;
    assert.match(
      cellLine,
      /^- await local\.send\('answer 1'\) → error: RuntimeError: boom \| stdout: x+/,
    );
  });
});

Deno.test("`compactContext()` accepts a model summary that names an item of the step the extractive one had to count instead", async () => {
  // The model is given every entry of the step; the extractive summary, bounded by the same
  // share, turns the step's oldest inputs into an "earlier" count. A summary that names the
  // first input the model was given is no invented id.
  const budget: ContextBudget = { contextTokens: 4_000, compactAt: 0.75, summaryShare: 0.1 };
  let given: { id: string } | undefined;
  const fake = startFakeOpenAI({
    summarizer: (request) => {
      const material = JSON.parse(request.body.messages[1].content);
      given = material.new_items.inputs[0];
      const sent = material.must_name_as_sent.map((m: { id: string; state: string }) =>
        `- (${m.state}) [${m.id}]`
      );
      const text = [
        material.headings[0],
        `- the first question [${given!.id}]`,
        "- earlier: the other questions",
        material.headings[1],
        ...sent,
        material.headings[2],
        "- (none)",
        material.headings[3],
        "- (none)",
      ].join("\n");
      return { text };
    },
  });
  try {
    await withStore(async (store) => {
      for (let n = 1; n <= 10; n++) writeTurn(store, "default", n);
      const d = deps(store, { budget, provider: longProvider(fake) });
      // The extractive summary of the same items leaves the first input out of its entries.
      let extractive = "";
      await withStore(async (other) => {
        for (let n = 1; n <= 10; n++) writeTurn(other, "default", n);
        await compactContext(deps(other, { budget }), "default", {
          keep: { items: 3 },
          model: false,
        });
        extractive = latestSummary(other, "default")!.text;
      });
      assert.match(extractive, /- earlier: \d+ inputs/);
      const done = await compactContext(d, "default", { keep: { items: 3 }, model: true });
      const summary = latestSummary(store, "default")!;
      assert.equal(summary.fallbackReason, null);
      assert.equal(done?.source, "model");
      assert.ok(given !== undefined && summary.text.includes(`[${given.id}]`));
    });
  } finally {
    await fake.close();
  }
});

Deno.test("`compactContext()` never cuts a character in half in a summary's excerpts", async () => {
  // Inputs whose 400th UTF-16 unit is the first half of an emoji. Cut there, the long model's
  // material carries a lone surrogate (JSON `\ud83d`, which servers refuse: "lone leading
  // surrogate"), and the stored summary a U+FFFD in its place, which every later request shows.
  const fake = startFakeOpenAI({ summarizer: "faithful" });
  try {
    for (const model of [false, true]) {
      await withStore(async (store) => {
        for (let n = 1; n <= 6; n++) {
          writeTurn(store, "default", n, { question: `${"q".repeat(n)}${"😀".repeat(400)}` });
        }
        const d = deps(store, { provider: longProvider(fake) });
        const done = await compactContext(d, "default", { keep: { items: 3 }, model });
        assert.equal(done?.source, model ? "model" : "extractive");
        const summary = latestSummary(store, "default")!;
        assert.ok(!summary.text.includes("\uFFFD"), `a broken character in:\n${summary.text}`);
      });
    }
    const material = String(fake.requests.at(-1)!.body.messages[1].content);
    assert.ok(material.isWellFormed(), "half a character in the long model's material");
  } finally {
    await fake.close();
  }
});

Deno.test("`compactContext()` lists the inputs of a turn whose opening starts with the talk read meanwhile or a note, not only with its inputs", async () => {
  await withStore(async (store) => {
    const openings = [
      () => `${AMBIENT_HEADING}\n\n[input in_amb from friend in local:default]\nhi`,
      () =>
        "[runtime] your previous turn stopped at its limit of 8 model steps before it finished.",
    ].map((before, n) => {
      const { inputId } = admitInput(store, {
        session: "default",
        sourceKind: "local",
        dedupeKey: `local:opening:${n}`,
        conversationId: "local:default",
        author: "owner",
        body: `plant the beans ${n}`,
      });
      const { frameId } = acceptFrame(store, {
        session: "default",
        inputIds: [inputId],
        contextEpoch: requireSession(store, "default").contextEpoch,
        policyRevision: "test",
      });
      const inputs = `[input ${inputId} from owner in local:default]\nplant the beans ${n}`;
      appendProviderItems(store, "default", frameId, [
        { role: "user", content: `${before()}\n\n${inputs}` },
        { role: "assistant", content: `noted ${n}` },
      ]);
      return inputId;
    });
    writeTurn(store, "default", 3);
    const done = await compactContext(deps(store), "default", { keep: { items: 3 }, model: false });
    assert.equal(done?.coversToIdx, 4);
    const text = latestSummary(store, "default")!.text;
    for (const [n, inputId] of openings.entries()) {
      assert.ok(
        text.includes(`- plant the beans ${n} [input:${inputId}] (owner in local:default)`),
        `input ${n} is missing from the summary:\n${text}`,
      );
    }
  });
});
