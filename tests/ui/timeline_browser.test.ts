/**
 * The timeline in headless Chromium against the real daemon (a real Python workbench, the
 * scripted fake model over real HTTP): a session of sends, cells, a long output, a failed
 * cell, a timer, a job, a reasoning model's turn, an attached file and a stop and resume, and what a person sees of it at
 * 1280×800, 1440×900, 390×844 and 1920×1080 — each owner message with the turn that took it up
 * folded under it, the side panels beside the timeline (behind the menu on a phone), no
 * sideways scroll, and no serious or critical axe-core violation, in light and dark. Screenshots go to
 * `tests/.artifacts/ui/timeline/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "playwright-core";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { tempDir } from "../_helpers/temp.ts";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import {
  assertEachRecordOnce,
  launchChromium,
  openPage,
  screenshot,
  seriousViolations,
  typeAndSend,
} from "./_browser.ts";

const WAIT_CELL = { toolCall: { code: "wait()" } };
const SLOW = 60_000;
const SIZES = [
  { width: 1280, height: 800 },
  { width: 1440, height: 900 },
  { width: 390, height: 844 },
  { width: 1920, height: 1080 },
] as const;

/** Whether the element is laid out inside the viewport, at least partly, and visible. */
function inView(page: Page, selector: string): Promise<boolean> {
  return page.evaluate(`(() => {
    const el = document.querySelector(${JSON.stringify(selector)});
    if (el === null) return false;
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    return style.display !== "none" && style.visibility !== "hidden" && box.width > 0 &&
      box.height > 0 && box.left < innerWidth && box.right > 0 && box.top < innerHeight &&
      box.bottom > 0;
  })()`) as Promise<boolean>;
}

Deno.test({
  name: "the timeline shows a session's messages with each turn folded under them, at four sizes",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
    const daemon = await startTestDaemon({ modelUrl: fake.url });
    const probe = await connectLane({ port: daemon.port, token: daemon.token, client: "probe" });
    const browser = await launchChromium();
    try {
      const finishedTurns = () =>
        probe.messages.filter((m) => m.kind === "record" && m.type === "frame.finished").length;
      const turnEnds = async (n: number, page: Page) => {
        const found = await probe.waitFor<LaneRecord>(
          (m) =>
            m.kind === "record" && m.type === "frame.finished" &&
            probe.messages.filter((x) => x.kind === "record" && x.type === "frame.finished")
                .length >= n,
          SLOW,
        ).catch((error) => {
          throw new Error(`${error.message}\n${daemon.logs().slice(-3000)}`);
        });
        await page.waitForSelector(`[data-seq="${found.seq}"]`, {
          state: "attached",
          timeout: SLOW,
        });
      };
      const { page, errors } = await openPage(browser, 1280);
      page.setDefaultTimeout(SLOW);
      await page.goto(`${daemon.url}/#token=${daemon.token}`);
      await page.waitForSelector("text=connected as operator");

      // 1. A reasoning model's turn that runs a cell and sends.
      fake.enqueue({
        reasoning: "The owner greets me; I should greet back.",
        text: "I will greet them.",
        usage: "openai",
        toolCall: { code: "print('greeting')\nawait local.send('hello **there**')\nwait()" },
      });
      await typeAndSend(page, "hi");
      await turnEnds(1, page);
      // 2. A long output.
      fake.enqueue({ toolCall: { code: "for i in range(400):\n    print('line', i)\nwait()" } });
      await typeAndSend(page, "count for me");
      await turnEnds(2, page);
      // 3. A failed cell; the model then waits.
      fake.enqueue({ toolCall: { code: "raise ValueError('boom')" } });
      await typeAndSend(page, "try something risky");
      await turnEnds(3, page);
      // 4. A timer and a job; the job's end wakes another turn (the model waits).
      fake.enqueue({
        toolCall: {
          code:
            "await timers.after(600, 'check the build')\nawait jobs.start('print(1)', name='tiny')\nwait()",
        },
      });
      await typeAndSend(page, "set a timer and a job");
      await turnEnds(4, page);
      // The job's end is an input that wakes a fifth turn.
      await turnEnds(5, page);
      // 5. A file attached in the composer, which a cell reads by its id.
      const files = await tempDir();
      await Deno.writeTextFile(join(files, "fruit.csv"), "name,qty\napples,3\n");
      fake.enqueue({
        toolCall: {
          code: [
            "import hashlib",
            "aid = hashlib.sha256(b'name,qty\\napples,3\\n').hexdigest()",
            "await local.send('read ' + (await read_artifact(aid)).decode().splitlines()[1])",
          ].join("\n"),
        },
      });
      await page.locator("#composer-files").setInputFiles(join(files, "fruit.csv"));
      await typeAndSend(page, "read this file");
      await turnEnds(6, page);
      const head = () =>
        Math.max(...probe.messages.filter((m) => m.kind === "record").map((m) => m.seq));
      const settled = finishedTurns();
      await page.waitForSelector(`[data-seq="${head()}"]`, { state: "attached" });

      // What a person sees: five messages, two sends, every turn folded to one line.
      await screenshot(page, "timeline", "00-loaded");
      const owner = page.locator('#timeline .msg-input[data-author="owner"]');
      assert.deepEqual(
        await owner.locator(".body").allTextContents(),
        ["hi", "count for me", "try something risky", "set a timer and a job", "read this file"],
      );
      assert.match(
        (await owner.last().locator(".attachments").textContent()) ?? "",
        /fruit\.csv · 18 bytes/,
      );
      await page.locator("#timeline .msg-send").getByText("read apples,3").waitFor();
      assert.equal(
        await page.locator("#timeline .msg-send .markdown strong").textContent(),
        "there",
      );
      await page.waitForFunction(
        `document.querySelectorAll("#timeline details.turn[open]").length === 0`,
      );
      const summaries = await page.locator("#timeline details.turn > summary").allTextContents();
      assert.ok(summaries.length >= 4, `turns: ${summaries.join(" | ")}`);
      assert.match(summaries[0], /^✓ worked \d.* · 1 cell · [\d,]+ tokens$/);
      assert.match(summaries[2], /· 2 cells/);
      assert.match(summaries[3], /set 2 timers or jobs/);
      // Ids only on hover: the turn's frame id is a title, not text.
      const first = page.locator("#timeline details.turn").first();
      assert.match(
        (await first.locator(":scope > summary").getAttribute("title")) ?? "",
        /frame fr_/,
      );
      assert.doesNotMatch(summaries.join(" "), /fr_|in_|cell_/);

      // Opening the first turn shows its reasoning (collapsed), its draft and its cell.
      await first.locator(":scope > summary").click();
      await page.waitForSelector("#timeline details.turn[open] li.cell");
      const reasoning = first.locator("details.reasoning");
      assert.equal(await reasoning.getAttribute("open"), null);
      assert.match(
        (await reasoning.locator(":scope > summary").textContent()) ?? "",
        /reasoning · \d+ characters/,
      );
      assert.match((await first.textContent()) ?? "", /I will greet them\./);
      assert.match((await first.locator("li.cell").textContent()) ?? "", /greeting/);
      // The long output is shown collapsed, with a button for the rest.
      const second = page.locator("#timeline details.turn").nth(1);
      await second.locator(":scope > summary").click();
      const more = second.locator(".output-stdout button");
      assert.match((await more.textContent()) ?? "", /Show all|more|lines/i);
      // The failed cell says its error.
      const third = page.locator("#timeline details.turn").nth(2);
      await third.locator(":scope > summary").click();
      assert.match((await third.textContent()) ?? "", /ValueError: boom/);
      // The timer and the job the fourth turn set.
      const fourth = page.locator("#timeline details.turn").nth(3);
      await fourth.locator(":scope > summary").click();
      const set = ((await fourth.locator(".turn-set").textContent()) ?? "").replace(/\s+/g, " ");
      assert.match(set, /timer: check the build/);
      assert.match(set, /job tiny/);
      await assertEachRecordOnce(page, head());
      // A send's Copy button puts its text (the Markdown as sent) on the clipboard.
      await page.context().grantPermissions(["clipboard-read", "clipboard-write"], {
        origin: daemon.url,
      });
      await page.click('#timeline .msg-send .copy-button:has-text("Copy the message")');
      await page.waitForSelector('#timeline .msg-send .copy-button:has-text("Copied")');
      assert.equal(await page.evaluate("navigator.clipboard.readText()"), "hello **there**");

      // 6. The operator stops the session: said in the timeline, with its fix, at every size.
      await probe.request({ kind: "op.stop", session: "default" });
      const stopped = page.locator('#timeline .state-line[data-state="stopped"]');
      await stopped.waitFor();
      const stoppedShown = async (tag: string) => {
        await stopped.scrollIntoViewIfNeeded();
        assert.ok(await stopped.isVisible(), `${tag}: the stopped line is shown`);
        assert.ok(
          await stopped.locator('button[data-fix="stopped"]').isVisible(),
          `${tag}: its Resume button is shown`,
        );
      };

      for (const size of SIZES) {
        await page.setViewportSize(size);
        const tag = `${size.width}x${size.height}`;
        await page.waitForFunction(`innerWidth === ${size.width}`);
        assert.ok(await inView(page, "#timeline"), `${tag}: the timeline is shown`);
        assert.ok(await inView(page, "#composer-input"), `${tag}: the composer is shown`);
        const sideways = await page.evaluate(
          `document.documentElement.scrollWidth - document.documentElement.clientWidth`,
        );
        assert.equal(sideways, 0, `${tag}: no sideways scroll`);
        if (size.width >= 1100) {
          assert.ok(await inView(page, "#operator"), `${tag}: the operator panel is beside it`);
          assert.ok(await inView(page, ".conversation-list"), `${tag}: the conversation list`);
          assert.equal(await page.locator(".menu-button").isVisible(), false);
        } else {
          assert.equal(await inView(page, "#operator"), false, `${tag}: panels behind the menu`);
          await page.click(".menu-button");
          await page.waitForSelector("#operator", { state: "visible" });
          assert.ok(await inView(page, ".conversation-list"), `${tag}: the list in the menu`);
          await screenshot(page, "timeline", `02-menu-${tag}`);
          assert.deepEqual(await seriousViolations(page), [], `${tag} (menu)`);
          await page.click(".menu-button");
          await page.waitForSelector("#timeline", { state: "visible" });
        }
        await stoppedShown(tag);
        await screenshot(page, "timeline", `01-session-${tag}`);
        assert.deepEqual(await seriousViolations(page), [], tag);
      }
      // Dark, as the system asks, at each size: still no serious or critical violation.
      await page.emulateMedia({ colorScheme: "dark" });
      for (const size of SIZES) {
        await page.setViewportSize(size);
        const tag = `${size.width}x${size.height}`;
        await page.waitForFunction(`innerWidth === ${size.width}`);
        const background = await page.evaluate(`getComputedStyle(document.body).backgroundColor`);
        assert.equal(background, "rgb(18, 22, 27)", `${tag}: dark background`);
        await stoppedShown(`${tag} (dark)`);
        await screenshot(page, "timeline", `03-dark-${tag}`);
        assert.deepEqual(await seriousViolations(page), [], `${tag} (dark)`);
      }
      // The theme button overrides the system: light, then dark, then the system's again.
      await page.click(".theme-button");
      await page.waitForSelector('html[data-theme="light"]');
      assert.equal(
        await page.evaluate(`getComputedStyle(document.body).backgroundColor`),
        "rgb(246, 247, 249)",
      );
      await page.click(".theme-button");
      await page.waitForSelector('html[data-theme="dark"]');
      await page.click(".theme-button");
      await page.waitForSelector("html:not([data-theme])");
      // Resume, from the line: the session takes work again without a restart.
      await stopped.locator('button[data-fix="stopped"]').click();
      await stopped.waitFor({ state: "detached" });
      assert.equal(finishedTurns(), settled, "no turn ran meanwhile");
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
      await probe.close();
      await daemon.stop();
      await fake.close();
    }
  },
});
