/**
 * The README path in the browser, on a fresh state directory with no model: after `init` and
 * `serve`, the first message typed in the page shows, in the conversation under it, which
 * model address is not answering and which file configures it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { initWithoutModel } from "../_helpers/cli.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { tempDir } from "../_helpers/temp.ts";
import { launchChromium, openPage, screenshot } from "./_browser.ts";

Deno.test("README path in the page: with no model the first message says, under it, which address is not answering and where to configure it", async () => {
  const { state, config, nowhere } = await initWithoutModel(await tempDir());

  const daemon = await startTestDaemon({ stateDir: state, stateConfig: true });
  const browser = await launchChromium();
  try {
    const { page, errors } = await openPage(browser, 1280);
    await page.goto(`${daemon.url}/#token=${daemon.token}`);
    await page.waitForSelector("text=connected as operator");
    await page.focus("#composer-input");
    await page.keyboard.type("hello?");
    await page.keyboard.press("Enter");
    const trouble = page.locator("#timeline .msg-input .trouble");
    await trouble.waitFor({ timeout: 45_000 });
    // The first line may come from turn.ended alone; the session's model.failing adds the URL.
    await page.locator("#timeline .trouble-text", { hasText: nowhere })
      .waitFor({ timeout: 45_000 });
    const said = ((await trouble.textContent()) ?? "").replace(/\s+/g, " ");
    assert.match(
      said,
      new RegExp(`The model at ${nowhere.replaceAll(".", "\\.")} is not answering`),
    );
    assert.match(said, /attempt \d+ of \d+/);
    assert.ok(said.includes(`see ${config}`), said);
    await screenshot(page, "first-hour", "01-no-model");
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, "first-hour", "02-no-model");
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    await daemon.stop();
  }
});
