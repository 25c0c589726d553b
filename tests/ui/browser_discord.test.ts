/**
 * Discord in real headless Chromium over the in-memory lane host: a Discord input shown as the
 * Discord user's message, outbox sends whose delivery state moves in place, and a cell whose
 * output was spooled to an artifact, at 1280 and 390 pixels. Screenshots go to
 * `tests/.artifacts/ui/discord/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { ensureUiBuilt } from "../../runtime/setup/mod.ts";
import {
  assertEachRecordOnce,
  launchChromium,
  openPage,
  pickConversation,
  REPO,
  screenshot,
  waitForSeq,
} from "./_browser.ts";
import { MemoryLaneHost, startLaneServer } from "./_memory_lane_host.ts";
import { body as full } from "./_record_data.ts";

const UI_DIR = await ensureUiBuilt({ repoRoot: REPO });

/** Text of the element matching `selector`, whitespace collapsed. */
async function textOf(page: Page, selector: string): Promise<string> {
  const text = await page.locator(selector).first().textContent();
  return (text ?? "").replace(/\s+/g, " ").trim();
}

for (const width of [1280, 390]) {
  Deno.test(`the page shows a Discord input, outbox sends moving in place and a spooled cell at ${width} px`, async () => {
    const host = new MemoryLaneHost();
    const server = await startLaneServer(host, { uiDir: UI_DIR });
    const browser = await launchChromium();
    try {
      const { page, errors } = await openPage(browser, width);
      await page.goto(server.pageUrl);
      await page.waitForSelector("text=connected as operator");

      host.append("input.admitted", {
        input_id: "in_discord",
        source_kind: "discord",
        dedupe_key: "discord:555:9001",
        conversation_id: "discord:555",
        author: "discord:4417:alice",
        received_at: 1_736_933_400_000,
        body: "Is the build green?",
      });
      // The Discord channel has a timeline of its own, picked in the conversation list.
      await pickConversation(page, "Discord channel 555");
      await waitForSeq(page, 1);
      const input = '#timeline [data-seq="1"]';
      assert.equal(await textOf(page, `${input} .who`), "alice");
      assert.equal(await textOf(page, `${input} .where`), "on Discord · Discord channel 555");
      assert.ok(
        await page.locator(`${input}.msg-discord`).count() === 1,
        "a Discord input is marked as Discord, not as the owner's",
      );

      host.append("outbox.pending", {
        outbox_id: "ob_1",
        state: "pending",
        conversation: "discord:555",
        destination: { channel_id: "555" },
        body: "The build is **green**.",
        frame_id: "fr_1",
        cell_id: "cell_1",
      });
      const first = '#timeline [data-send-id="ob_1"]';
      await page.waitForSelector(`${first} .badge:has-text("pending · not posted yet")`);
      assert.equal(await textOf(page, `${first} .where`), "to Discord · Discord channel 555");
      assert.equal(await page.locator(`${first} .body strong`).textContent(), "green");
      host.append("outbox.attempting", full("outbox.attempting", { outbox_id: "ob_1" }));
      await page.waitForSelector(`${first} .badge:has-text("posting to Discord · attempt 1")`);
      await screenshot(page, "discord", "01-attempting");
      host.append("outbox.confirmed", {
        outbox_id: "ob_1",
        state: "confirmed",
        attempts: 1,
        remote_id: "1234567",
        error: null,
      });
      await page.waitForSelector(
        `${first} .badge:has-text("confirmed · posted as message 1234567")`,
      );
      assert.deepEqual(
        await page.$$eval(
          `${first} .delivery-steps li`,
          (nodes) => nodes.map((n) => [n.getAttribute("data-step"), n.getAttribute("data-seq")]),
        ),
        // The pending step is the message itself (seq 2); each later step is its own record.
        [["pending", null], ["attempting", "3"], ["confirmed", "4"]],
      );

      host.append("outbox.pending", {
        outbox_id: "ob_2",
        state: "pending",
        conversation: "discord:555",
        destination: { channel_id: "555" },
        body: "Deploying now.",
        frame_id: "fr_1",
        cell_id: "cell_2",
      });
      host.append("outbox.attempting", full("outbox.attempting", { outbox_id: "ob_2" }));
      host.append("outbox.unknown", {
        outbox_id: "ob_2",
        state: "unknown",
        attempts: 1,
        remote_id: null,
        error: "no answer within 15000 ms",
      });
      const second = '#timeline [data-send-id="ob_2"]';
      await page.waitForSelector(
        `${second} .badge:has-text("unknown · may or may not have been posted; not retried")`,
      );
      assert.equal(await textOf(page, `${second} .note`), "reason: no answer within 15000 ms");
      // Symbol and words, and a tone of its own: unknown is a warning, not a confirmed send.
      assert.equal(await page.locator(`${second} .badge.badge-warning`).count(), 1);
      assert.equal(await page.locator(`${first} .badge.badge-ok`).count(), 1);

      host.append(
        "cell.started",
        full("cell.started", { cell_id: "cell_big", code: "print('line\\n' * 20000)" }),
      );
      host.append("cell.finished", {
        ...full("cell.finished"),
        cell_id: "cell_big",
        outcome: "ok",
        result: {
          stdout: "line\nline\n[… 94000 characters not shown; the whole output is 100000 bytes " +
            "in artifact art_01JHMMRR878CS2QQ58HYY0RD73 …]\nline\n",
          stderr: "",
          value: null,
          error: null,
          duration_ms: 88,
          stdout_artifact: { id: "art_01JHMMRR878CS2QQ58HYY0RD73", bytes: 100000 },
        },
      });
      const head = host.headSeq("default");
      await waitForSeq(page, head);
      assert.equal(
        await textOf(page, '#timeline [data-cell-id="cell_big"] .spooled'),
        "stdout spooled: 97.7 KiB in artifact art_01JHMMRR878CS2QQ58HYY0RD73; an excerpt is shown",
      );
      assert.match(
        await textOf(page, '#timeline [data-cell-id="cell_big"] .output-stdout pre'),
        /characters not shown/,
      );

      // Outbox steps are shown in their message, never also as runtime events.
      assert.equal(await page.locator('#lane-events [data-type^="outbox."]').count(), 0);
      await assertEachRecordOnce(page, head);
      const overflow = await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth",
      );
      assert.equal(overflow, 0, "the page scrolls sideways");
      await screenshot(page, "discord", "02-confirmed-unknown-spooled");
      assert.deepEqual(errors, [], "the page threw");
    } finally {
      await browser.close();
      await server.stop();
    }
  });
}
