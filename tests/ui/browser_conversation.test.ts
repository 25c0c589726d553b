/**
 * The page as a conversation, in headless Chromium at 1280×800 and 390×844, served by the
 * daemon's own `createApp` over an in-memory lane host: lanes follow the newest item (a "new
 * below" button once scrolled up) with no blank page scroll and no card overflowing; the
 * model failing inline with the header amber, cleared when it answers; each turn's model and
 * tokens (absent shown as absent); highlighted code; spooled output in the viewer; search;
 * cancelling a running cell; an unsent draft; and axe-core finding no serious or critical
 * violation. Screenshots go to `tests/.artifacts/ui/conversation/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { ensureUiBuilt } from "../../runtime/setup/mod.ts";
import {
  launchChromium,
  openPage,
  openTurns,
  REPO,
  screenshot,
  seriousViolations,
  waitForSeq,
} from "./_browser.ts";
import {
  type LaneServer,
  type LaneServerOptions,
  MemoryLaneHost,
  startLaneServer,
} from "./_memory_lane_host.ts";
import { body as full } from "./_record_data.ts";

const UI_DIR = await ensureUiBuilt({ repoRoot: REPO });
const WIDTHS = [1280, 390] as const;
const FAILED = 'model failed: cannot stream from llm "main": no response from the provider';

interface Scene {
  host: MemoryLaneHost;
  server: LaneServer;
  page: Page;
}

/** Runs `body` with a fresh host, server, browser and page; closes them all afterwards. */
async function scene(
  width: number,
  options: Partial<LaneServerOptions>,
  body: (s: Scene) => Promise<void>,
): Promise<void> {
  const host = new MemoryLaneHost();
  const server = await startLaneServer(host, { uiDir: UI_DIR, ...options });
  const browser = await launchChromium();
  try {
    const { page, errors } = await openPage(browser, width);
    await body({ host, server, page });
    assert.deepEqual(errors, [], "the page threw");
  } finally {
    await browser.close();
    await server.stop();
  }
}

async function open(s: Scene): Promise<void> {
  await s.page.goto(s.server.pageUrl);
  await s.page.waitForSelector("text=connected as operator");
}

/** One answered exchange: an input, its turn (a model reply with usage) and a send. */
function exchange(host: MemoryLaneHost, n: number, text = `message ${n}`): void {
  const frame = { frame_id: `fr_${n}`, number: n, input_ids: [`in_${n}`] };
  host.append("input.admitted", full("input.admitted", { input_id: `in_${n}`, body: text }));
  host.append("frame.accepted", full("frame.accepted", frame));
  host.append("model.reply", full("model.reply", { frame_id: `fr_${n}` }));
  host.append(
    "send",
    full("send", { send_id: `snd_${n}`, frame_id: `fr_${n}`, text: `reply ${n}` }),
  );
  host.append("frame.finished", full("frame.finished", frame));
}

/** The conversation lane's scroll position: distance from the bottom and from the top. */
function scrollOf(
  page: Page,
  lane = "#timeline",
): Promise<{ fromBottom: number; top: number }> {
  return page.$eval(`${lane} .lane-scroll`, (el) => ({
    fromBottom: el.scrollHeight - el.scrollTop - el.clientHeight,
    top: el.scrollTop,
  }));
}

async function waitAtBottom(page: Page, lane = "#timeline"): Promise<void> {
  // Polled through the debugging protocol (a string predicate would need eval, which the
  // page's CSP forbids once it has to be evaluated twice); bounded in count.
  for (let i = 0; i < 150; i++) {
    const gap = await page.$eval(
      `${lane} .lane-scroll`,
      (el) => el.scrollHeight - el.scrollTop - el.clientHeight,
    );
    if (gap <= 2) return;
    await page.waitForTimeout(100);
  }
  throw new Error(`${lane} did not reach its bottom within 15 s`);
}

for (const width of WIDTHS) {
  Deno.test(`at ${width} px the conversation follows the newest item, and once scrolled up offers "new below"`, async () => {
    await scene(width, {}, async (s) => {
      for (let n = 1; n <= 30; n++) exchange(s.host, n);
      await open(s);
      await waitForSeq(s.page, s.host.headSeq("default"));
      await waitAtBottom(s.page);
      // A new reply arrives: the lane shows it without the person doing anything.
      exchange(s.host, 31, "the newest message");
      await waitForSeq(s.page, s.host.headSeq("default"));
      await waitAtBottom(s.page);
      await s.page.waitForSelector('#timeline [data-send-id="snd_31"]');
      assert.ok(
        await s.page.$eval('[data-send-id="snd_31"]', (el) => {
          const lane = el.closest(".lane-scroll")!.getBoundingClientRect();
          const box = el.getBoundingClientRect();
          return box.top >= lane.top - 1 && box.bottom <= lane.bottom + 1;
        }),
        "the newest reply is in view",
      );
      await screenshot(s.page, "conversation", "01-following");

      // Scrolled up (to the middle: near the top, earlier rows would be shown), the timeline
      // stays put and says there is more below.
      // The `scroll` event is dispatched at once, as the browser does for a person's scroll
      // before the next frame: a render landing between a scripted scroll and its event would
      // otherwise pull the lane back down before the page knew it had moved.
      const middle = await s.page.$eval("#timeline .lane-scroll", (el) => {
        el.scrollTop = Math.floor((el.scrollHeight - el.clientHeight) / 2);
        el.dispatchEvent(new Event("scroll"));
        return el.scrollTop;
      });
      exchange(s.host, 32);
      await waitForSeq(s.page, s.host.headSeq("default"));
      const pill = s.page.locator("#timeline button.new-below");
      await pill.waitFor();
      assert.equal((await scrollOf(s.page)).top, middle, "the timeline did not jump");
      assert.equal(await pill.textContent(), "↓ New messages below");
      await screenshot(s.page, "conversation", "02-new-below");
      await pill.click();
      await waitAtBottom(s.page);
      assert.equal(await pill.count(), 0);
    });
  });

  Deno.test(`at ${width} px the page has no blank scroll space and long ids stay inside their cards`, async () => {
    await scene(width, {}, async (s) => {
      const long = "x".repeat(120);
      for (let n = 1; n <= 25; n++) exchange(s.host, n);
      s.host.append(
        "input.admitted",
        full("input.admitted", {
          input_id: `in_${long}`,
          body: `id_${long}`,
          author: `author_${long}`,
          conversation_id: `discord:${"9".repeat(90)}`,
          source_kind: "discord",
        }),
      );
      s.host.append(
        "cell.started",
        full("cell.started", { frame_id: `fr_${long}`, cell_id: `cell_${long}`, code: long }),
      );
      await open(s);
      await waitForSeq(s.page, s.host.headSeq("default"));
      const page = await s.page.evaluate(`(() => {
        const doc = document.documentElement;
        const app = document.querySelector(".app").getBoundingClientRect();
        return {
          scrollHeight: doc.scrollHeight,
          innerHeight,
          appBottom: app.bottom + scrollY,
          overflowX: doc.scrollWidth - doc.clientWidth,
        };
      })()`) as {
        scrollHeight: number;
        innerHeight: number;
        appBottom: number;
        overflowX: number;
      };
      // At 1280 the lanes scroll inside one screen; at 390 they stack, with nothing after them.
      if (width === 1280) assert.ok(page.scrollHeight <= page.innerHeight, JSON.stringify(page));
      assert.ok(page.scrollHeight - page.appBottom <= 1, `blank space: ${JSON.stringify(page)}`);
      assert.equal(page.overflowX, 0, "the page scrolls sideways");
      const overflowing = await s.page.$$eval(".items > li", (cards) =>
        cards.flatMap((card) => {
          const edge = card.getBoundingClientRect().right + 1;
          return [...card.querySelectorAll("*")]
            .filter((el) => el.getBoundingClientRect().right > edge)
            .map((el) => `${el.tagName}.${el.className}`);
        }));
      assert.deepEqual(overflowing, [], "elements wider than their card");
      await screenshot(s.page, "conversation", "03-long-ids");
    });
  });

  Deno.test(`at ${width} px a failing model shows under the message and the header turns amber until it answers`, async () => {
    let health: Record<string, unknown> = {
      status: "degraded",
      reasons: ["the model is failing: main: no response from the provider"],
      model: { state: "failing", route: "main", error: "main: no response from the provider" },
    };
    await scene(width, { health: () => health }, async (s) => {
      await open(s);
      s.host.append("input.admitted", full("input.admitted", { input_id: "in_1", body: "hello?" }));
      const frame = { frame_id: "fr_1", number: 1, input_ids: ["in_1"] };
      s.host.append("frame.accepted", full("frame.accepted", frame));
      s.host.append("turn.started", full("turn.started", { frame_id: "fr_1", frame: 1 }));
      s.host.append("turn.ended", { frame_id: "fr_1", reason: FAILED, attempt: 3, of: 6 });
      s.host.append("frame.abandoned", full("frame.abandoned", { ...frame, reason: FAILED }));
      const trouble = s.page.locator('[data-input-id="in_1"] .trouble');
      await trouble.waitFor();
      assert.match(
        (await trouble.textContent()) ?? "",
        /The model is not answering \(attempt 3 of 6\).*no response from the provider/,
      );
      await s.page.waitForSelector('header[data-trouble="amber"]');
      await s.page.waitForSelector('header .health:has-text("model not answering")');
      await screenshot(s.page, "conversation", "04-model-failing");
      // The model answers: the line and the amber go.
      health = { status: "ok", reasons: [], model: { state: "ok", error: null } };
      const next = { frame_id: "fr_2", number: 2, input_ids: ["in_1"] };
      s.host.append("frame.accepted", full("frame.accepted", next));
      s.host.append("model.reply", full("model.reply", { frame_id: "fr_2" }));
      s.host.append("send", full("send", { frame_id: "fr_2", text: "hello!" }));
      s.host.append("frame.finished", full("frame.finished", next));
      await trouble.waitFor({ state: "detached" });
      await s.page.waitForSelector('header[data-trouble="none"]');
      assert.equal(await s.page.locator("header .health").count(), 0);
    });
  });

  Deno.test(`at ${width} px each turn shows its model, route and tokens, with absent counts said so`, async () => {
    await scene(width, {}, async (s) => {
      exchange(s.host, 1);
      await open(s);
      // The turn's details: its folded line opens to them.
      const line = s.page.locator('[data-input-id="in_1"] .turn-line');
      await line.waitFor({ state: "attached" });
      await s.page.click('[data-input-id="in_1"] details.turn > summary');
      await line.waitFor();
      assert.equal(
        (await line.locator('[data-field="model"]').textContent())?.trim(),
        "qwen2.5-coder via main",
      );
      assert.equal(await line.locator('[data-field="tokens"]').textContent(), "1,204 in · 88 out");
      assert.equal(
        await line.locator('[data-field="cache"]').textContent(),
        "read not reported · write not reported",
      );
      // The turn's plain number, with the frame's id on hover.
      assert.equal(await line.locator("dd[title]").first().getAttribute("title"), "frame fr_1");
      assert.match(
        (await s.page.locator('[data-input-id="in_1"] > .badge').textContent()) ?? "",
        /taken up by turn 1 · done/,
      );
      await screenshot(s.page, "conversation", "05-usage");
    });
  });

  Deno.test(`at ${width} px code in replies and cells is highlighted and reply headings read as content`, async () => {
    await scene(width, {}, async (s) => {
      s.host.append(
        "send",
        full("send", {
          text: "## Result\n\n```python\ndef f(x):\n    return 'ok'  # done\n```",
        }),
      );
      s.host.append(
        "cell.started",
        full("cell.started", {
          code: "import json\nfor i in range(3):\n    print(json.dumps({'i': i}))",
        }),
      );
      await open(s);
      await waitForSeq(s.page, 2);
      const reply = s.page.locator("#timeline .markdown");
      assert.ok(await reply.locator("code.hljs.language-python .hljs-keyword").count() >= 2);
      assert.ok(await reply.locator(".hljs-string").count() >= 1);
      assert.ok(await s.page.locator("#timeline pre.code .hljs-keyword").count() >= 3);
      // A heading inside a reply is not styled like a panel's own heading.
      const styles = await s.page.evaluate(`({
        reply: getComputedStyle(document.querySelector("#timeline .markdown h2"))
          .textTransform,
        lane: getComputedStyle(document.querySelector("#h-events")).textTransform,
      })`);
      assert.deepEqual(styles, { reply: "none", lane: "uppercase" });
      await screenshot(s.page, "conversation", "06-highlight");
    });
  });

  Deno.test(`at ${width} px a spooled output opens whole in the viewer through the authenticated route`, async () => {
    const id = "c0ffee".padEnd(64, "0");
    const text = Array.from({ length: 3000 }, (_, i) => `line ${i}`).join("\n") + "\n";
    const artifacts = new Map([[id, text]]);
    await scene(width, { artifacts }, async (s) => {
      s.host.append(
        "cell.started",
        full("cell.started", { code: "for i in range(3000): print('line', i)" }),
      );
      s.host.append(
        "cell.finished",
        full("cell.finished", {
          result: {
            value: null,
            stdout: "line 0\n…\nline 2999\n",
            stderr: "",
            stdout_artifact: { id, bytes: text.length },
            error: null,
            wait: null,
            duration_ms: 40,
          },
        }),
      );
      // Without the page's cookie or the token the route refuses.
      const bare = await fetch(`${s.server.url}/artifacts/${id}`);
      assert.equal(bare.status, 401);
      assert.equal((await bare.json()).code, "token_missing");
      await open(s);
      await s.page.click('button:has-text("Open the whole stdout")');
      const viewer = s.page.locator('[role="dialog"].viewer');
      await viewer.waitFor();
      await viewer.locator("pre.viewer-text").waitFor();
      const shown = (await viewer.locator("pre.viewer-text").textContent()) ?? "";
      assert.equal(shown, text);
      assert.match((await viewer.textContent()) ?? "", /All 28\.\d KiB/);
      await screenshot(s.page, "conversation", "07-artifact-viewer");
      await s.page.keyboard.press("Escape");
      await viewer.waitFor({ state: "detached" });
    });
  });

  Deno.test(`at ${width} px the search narrows the conversation and cells to what matches`, async () => {
    await scene(width, {}, async (s) => {
      for (let n = 1; n <= 6; n++) {
        exchange(s.host, n, n === 4 ? "where is the needle" : `hay ${n}`);
      }
      s.host.append(
        "cell.started",
        full("cell.started", { cell_id: "cell_a", code: "find('needle')" }),
      );
      s.host.append("cell.started", full("cell.started", { cell_id: "cell_b", code: "print(1)" }));
      await open(s);
      await waitForSeq(s.page, s.host.headSeq("default"));
      await s.page.fill("#lane-search", "NEEDLE");
      await s.page.waitForSelector(".search-count:has-text('items match')");
      assert.deepEqual(
        await s.page.$$eval(
          "#timeline .msg-input",
          (n) => n.map((m) => m.getAttribute("data-input-id")),
        ),
        ["in_4"],
      );
      assert.deepEqual(
        await s.page.$$eval(
          "#timeline .cell",
          (n) => n.map((m) => m.getAttribute("data-cell-id")),
        ),
        ["cell_a"],
      );
      assert.match((await s.page.textContent(".search-count")) ?? "", /^2 of \d+ items match$/);
      await screenshot(s.page, "conversation", "08-search");
      await s.page.click('button:has-text("Clear the search")');
      await s.page.waitForFunction(`document.querySelectorAll("#timeline .cell").length === 2`);
      assert.equal(await s.page.locator("#timeline .msg-input").count(), 6);
    });
  });

  Deno.test(`at ${width} px the operator cancels a running cell with its button`, async () => {
    await scene(width, {}, async (s) => {
      s.host.append(
        "cell.started",
        full("cell.started", { cell_id: "cell_run", code: "await forever()" }),
      );
      await open(s);
      const button = s.page.locator('[data-cell-id="cell_run"] button:has-text("Cancel")');
      await button.waitFor();
      assert.equal(await button.getAttribute("aria-label"), "Cancel cell cell_run");
      await screenshot(s.page, "conversation", "09-cancel");
      await button.click();
      await s.page.waitForFunction(`document.body.textContent.includes("Cancelling…")`);
      const sent = await s.host.operationsOf("op.cancel_cell");
      assert.equal(sent.length, 1);
      assert.deepEqual({ ...sent[0], request: "" }, {
        kind: "op.cancel_cell",
        request: "",
        session: "default",
        cell: "cell_run",
      });
      s.host.append(
        "cell.finished",
        full("cell.finished", { cell_id: "cell_run", outcome: "cancelled" }),
      );
      await s.page.waitForSelector('[data-cell-id="cell_run"] .badge:has-text("cancelled")');
      assert.equal(await s.page.locator('[data-cell-id="cell_run"] .cell-cancel').count(), 0);
    });
  });

  Deno.test(`at ${width} px a reasoning model's thinking streams live, folded, until its record arrives`, async () => {
    await scene(width, {}, async (s) => {
      const frame = { frame_id: "fr_1", number: 1, input_ids: ["in_1"] };
      s.host.append("input.admitted", full("input.admitted", { input_id: "in_1", body: "think" }));
      s.host.append("frame.accepted", full("frame.accepted", frame));
      await open(s);
      const thought = (text: string) => ({
        kind: "token" as const,
        session: "default",
        turn: "fr_1",
        text,
        reasoning: true as const,
      });
      s.host.emit(thought("Weighing "));
      s.host.emit(thought("the options"));
      s.host.emit({ kind: "token", session: "default", turn: "fr_1", text: "Here is" });
      const live = s.page.locator('[data-live-reasoning="fr_1"]');
      await live.waitFor();
      await s.page.waitForFunction(
        `document.querySelector('[data-live-reasoning="fr_1"] summary')?.textContent === "reasoning · 20 characters so far"`,
      );
      assert.equal(await live.locator("details").getAttribute("open"), null, "folded");
      assert.equal(await live.locator("pre").textContent(), "Weighing the options");
      assert.equal(await s.page.locator('[data-live-turn="fr_1"] pre').textContent(), "Here is");
      await screenshot(s.page, "conversation", "10-live-reasoning");
      // The reply's records replace the animation: the reasoning kept, folded, as any other.
      s.host.append(
        "reasoning",
        full("reasoning", { frame_id: "fr_1", text: "Weighing the options" }),
      );
      await live.waitFor({ state: "detached" });
      const kept = s.page.locator(
        'li.draft details.reasoning summary:has-text("reasoning · 20 characters")',
      );
      await kept.waitFor();
      assert.equal(await s.page.locator('[data-live-turn="fr_1"] pre').textContent(), "Here is");
    });
  });

  Deno.test(`at ${width} px "?" lists the keyboard shortcuts, Escape closes them, "/" moves to the search and Ctrl+. cancels the running cell`, async () => {
    await scene(width, {}, async (s) => {
      s.host.append(
        "cell.started",
        full("cell.started", { cell_id: "cell_run", code: "await forever()" }),
      );
      await open(s);
      await s.page.locator('[data-cell-id="cell_run"] button:has-text("Cancel")').waitFor();
      await s.page.evaluate("document.activeElement && document.activeElement.blur()");
      await s.page.keyboard.press("?");
      const dialog = s.page.getByRole("dialog", { name: "Keyboard shortcuts" });
      await dialog.waitFor();
      assert.equal(await dialog.locator("tbody tr").count(), 6);
      assert.match((await dialog.textContent()) ?? "", /\/moves to the search box/);
      await screenshot(s.page, "conversation", "10-shortcuts");
      assert.deepEqual(await seriousViolations(s.page), []);
      await s.page.keyboard.press("Escape");
      await dialog.waitFor({ state: "hidden" });
      await s.page.keyboard.press("/");
      const search = s.page.locator("#lane-search");
      assert.equal(await s.page.evaluate("document.activeElement.id"), "lane-search");
      // In a text field "/" is typed, not a shortcut.
      await s.page.keyboard.press("/");
      assert.equal(await search.inputValue(), "/");
      await search.fill("");
      await s.page.keyboard.press("Control+Period");
      await s.page.locator('[data-cell-id="cell_run"] button:has-text("Cancelling…")').waitFor();
      const sent = await s.host.operationsOf("op.cancel_cell");
      assert.deepEqual(sent.map((o) => (o as { cell?: string }).cell), ["cell_run"]);
    });
  });

  Deno.test(`at ${width} px a turn that ended with text and no send shows an unsent draft`, async () => {
    await scene(width, {}, async (s) => {
      const frame = { frame_id: "fr_1", number: 1, input_ids: ["in_1"] };
      s.host.append("input.admitted", full("input.admitted", { input_id: "in_1", body: "hi" }));
      s.host.append("frame.accepted", full("frame.accepted", frame));
      s.host.append("scratchpad", full("scratchpad", { text: "Hello! How can I help?" }));
      s.host.append("turn.ended", full("turn.ended", { reason: "turn.next: stop" }));
      s.host.append("frame.finished", full("frame.finished", frame));
      await open(s);
      const draft = s.page.locator("#timeline .msg-draft");
      await draft.waitFor();
      assert.match(
        (await draft.textContent()) ?? "",
        /unsent draft · not delivered.*Hello! How can I help\?/,
      );
      // The scratchpad record is still shown once, in the turn's work.
      assert.equal(await s.page.locator('[data-seq="3"]').count(), 1);
      await screenshot(s.page, "conversation", "10-unsent-draft");
    });
  });

  Deno.test(`at ${width} px axe-core finds no serious or critical violation on the main views`, async () => {
    const id = "feed".padEnd(64, "0");
    await scene(width, {
      artifacts: new Map([[id, "whole output\n"]]),
      health: () => ({
        status: "degraded",
        reasons: ["x"],
        model: { state: "failing", error: "x" },
      }),
    }, async (s) => {
      // The token screen first: a page without the token.
      await s.page.goto(s.server.url);
      await s.page.waitForSelector("text=needs the token");
      assert.deepEqual(await seriousViolations(s.page), [], "token screen");
      for (let n = 1; n <= 3; n++) exchange(s.host, n);
      s.host.append("input.admitted", full("input.admitted", { input_id: "in_9", body: "and?" }));
      s.host.append(
        "frame.accepted",
        full("frame.accepted", { frame_id: "fr_9", number: 9, input_ids: ["in_9"] }),
      );
      s.host.append("turn.ended", { frame_id: "fr_9", reason: FAILED });
      s.host.append(
        "scratchpad",
        full("scratchpad", { frame_id: "fr_9", text: "# Draft\nnot sent" }),
      );
      s.host.append(
        "cell.started",
        full("cell.started", { cell_id: "cell_r", code: "import time" }),
      );
      s.host.append("cell.started", full("cell.started", { cell_id: "cell_s" }));
      s.host.append(
        "cell.finished",
        full("cell.finished", {
          cell_id: "cell_s",
          result: {
            value: null,
            stdout: "…",
            stderr: "",
            stdout_artifact: { id, bytes: 13 },
            error: null,
            wait: null,
            duration_ms: 1,
          },
        }),
      );
      await open(s);
      await waitForSeq(s.page, s.host.headSeq("default"));
      await s.page.waitForSelector('header[data-trouble="amber"]');
      assert.deepEqual(await seriousViolations(s.page), [], "lanes");
      await s.page.fill("#lane-search", "message");
      assert.deepEqual(await seriousViolations(s.page), [], "search");
      await s.page.fill("#lane-search", "");
      await openTurns(s.page);
      assert.deepEqual(await seriousViolations(s.page), [], "turns open");
      await s.page.click('button:has-text("Open the whole stdout")');
      await s.page.locator("pre.viewer-text").waitFor();
      assert.deepEqual(await seriousViolations(s.page), [], "viewer");
      await screenshot(s.page, "conversation", "11-axe-viewer");
    });
  });
}
