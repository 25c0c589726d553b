/**
 * Paging per conversation, in Chromium against the real daemon: the local conversation's
 * messages lie behind 400 newer inputs of a busier one, so the page's first page of the
 * session holds none of them; the page asks for the local conversation's own page and shows
 * its messages, its turns and its sends, each once, down to its start. The busy conversation's
 * "Load earlier messages" brings its older messages back to its first one. Screenshots in
 * `tests/.artifacts/ui/paging/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { launchChromium, openPage, pickConversation, screenshot } from "./_browser.ts";

const SLOW = 60_000;
const BUSY = 400;

Deno.test({
  name:
    "a conversation behind a busier one opens with its own messages, and Load earlier reaches the start",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
    const daemon = await startTestDaemon({ modelUrl: fake.url });
    const probe = await connectLane({ port: daemon.port, token: daemon.token, client: "probe" });
    const browser = await launchChromium();
    try {
      const turnsDone = (n: number) =>
        probe.waitFor(
          () =>
            probe.messages.filter((m) => m.kind === "record" && m.type === "frame.finished")
              .length >= n,
          SLOW,
        );
      for (let i = 1; i <= 3; i++) {
        fake.enqueue({ toolCall: { code: `await local.send('answer ${i}')\nwait()` } });
        await probe.request({ kind: "input", client_msg_id: `local-${i}`, text: `question ${i}` });
        await turnsDone(i);
      }
      for (let i = 1; i <= BUSY; i++) {
        probe.send({
          kind: "input",
          request: `busy-${i}`,
          client_msg_id: `busy-${i}`,
          text: `busy ${i}`,
          conversation: "local:busy",
        });
      }
      await probe.waitFor((m) => m.kind === "ack" && m.request === `busy-${BUSY}`, SLOW);
      await probe.waitFor(
        (m) =>
          m.kind === "record" && m.type === "input.admitted" &&
          (m.data as { client_msg_id?: string }).client_msg_id === `busy-${BUSY}`,
        SLOW,
      );

      const { page, errors } = await openPage(browser, 1280);
      page.setDefaultTimeout(SLOW);
      await page.goto(`${daemon.url}/#token=${daemon.token}`);
      await page.waitForSelector("text=connected as operator");
      await page.waitForFunction(
        `[...document.querySelectorAll(".conversation-pick")].some((b) => b.textContent.includes("local:busy"))`,
      );
      // The local conversation is selected; its own page brings its messages and answers.
      const timeline = page.locator("#timeline");
      await timeline.getByText("The start of the conversation.").waitFor().catch(async (e) => {
        await screenshot(page, "paging", "00-failed");
        throw e;
      });
      assert.deepEqual(
        await timeline.locator('.msg-input[data-author="owner"] .body').allTextContents(),
        ["question 1", "question 2", "question 3"],
      );
      assert.deepEqual(
        (await timeline.locator(".msg-send .markdown").allTextContents()).map((t) => t.trim()),
        ["answer 1", "answer 2", "answer 3"],
      );
      // Each of its turns once, and none of the busy conversation's (one whose start the first
      // page did not hold used to show here as a turn no message woke).
      const frames = await timeline.locator("details.turn").evaluateAll((nodes) =>
        nodes.map((n) => n.getAttribute("data-frame-id"))
      );
      assert.equal(new Set(frames).size, 3, `turns: ${frames.join(", ")}`);
      assert.equal(frames.length, 3, `turns: ${frames.join(", ")}`);
      await screenshot(page, "paging", "01-local-behind-busy");

      // The busy conversation: its newest rows first, then Load earlier back to its start.
      await pickConversation(page, "local:busy");
      await timeline.locator(".msg-input .body", { hasText: `busy ${BUSY}` }).waitFor();
      const start = timeline.getByText("The start of the conversation.");
      const more = timeline.locator("button.load-earlier:not([disabled])");
      // Each step waits for the page to settle: the button enabled again, or the start shown.
      const settled = timeline.locator(
        "button.load-earlier:not([disabled]), p.note:has-text('The start of the conversation.')",
      );
      for (let i = 0; i < 40 && !(await start.isVisible()); i++) {
        await settled.first().waitFor();
        if (await start.isVisible()) break;
        await more.click({ timeout: 5_000 }).catch(() => {});
      }
      await start.waitFor();
      await timeline.locator(".msg-input .body", { hasText: /^busy 1$/ }).waitFor();
      await screenshot(page, "paging", "02-busy-start");
      assert.deepEqual(errors, [], "the page threw");
    } finally {
      await browser.close();
      await probe.close();
      await daemon.stop();
      await fake.close();
    }
  },
});
