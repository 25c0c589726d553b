/**
 * A file attached from the page's composer, end to end: Chromium picks a CSV, the page uploads
 * it (the daemon keeps it before answering) and sends the message naming it; the recorded
 * message shows the file, the real workbench reads it by id and the agent's send says what it
 * held; the file opens in the viewer. A file over the daemon's limit is refused in the
 * composer, with the limit, and the draft is kept. Screenshots in
 * `tests/.artifacts/ui/attachments/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { launchChromium, openPage, screenshot } from "./_browser.ts";
import { tempDir } from "../_helpers/temp.ts";

const SLOW = 60_000;
const CSV = "name,qty\napples,3\npears,5\n";

const CELL = [
  "import hashlib",
  `aid = hashlib.sha256(${JSON.stringify(CSV)}.encode()).hexdigest()`,
  "rows = (await read_artifact(aid)).decode().splitlines()[1:]",
  "await local.send(f'the file has {len(rows)} rows: ' + '; '.join(rows))",
].join("\n");

Deno.test({
  name: "a file attached in the composer is kept, shown on the message and read by the agent",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const files = await tempDir();
    const small = join(files, "fruit.csv");
    const big = join(files, "big.bin");
    await Deno.writeTextFile(small, CSV);
    // Far over the limit: the daemon refuses it by its length and closes the connection, so
    // Chromium, which reads no answer before it sent the whole body, reads the refusal.
    await Deno.writeFile(big, new Uint8Array(8 << 20));
    const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
    const daemon = await startTestDaemon({
      modelUrl: fake.url,
      extraConfig: "lanes {\n    attachment_max_bytes 1024\n}\n",
    });
    const browser = await launchChromium();
    try {
      const { page, errors } = await openPage(browser, 1280);
      page.setDefaultTimeout(SLOW);
      await page.goto(`${daemon.url}/#token=${daemon.token}`);
      await page.waitForSelector("text=connected as operator");
      const picker = page.locator("#composer-files");

      // Over the limit: the composer says so and keeps the draft and the file; nothing is sent.
      await page.locator("#composer-input").fill("too big");
      await picker.setInputFiles(big);
      await page.locator(".composer-files").getByText("big.bin").waitFor();
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator("#composer-status").getByText(/Not sent: .*the limit is 1024 bytes/)
        .waitFor();
      assert.equal(await page.locator("#composer-input").inputValue(), "too big");
      assert.equal(fake.requests.filter((r) => r.method === "POST").length, 0);
      await page.getByRole("button", { name: "Remove big.bin" }).click();

      fake.enqueue({ toolCall: { code: CELL } });
      await page.locator("#composer-input").fill("what is in this file?");
      await picker.setInputFiles(small);
      await page.locator(".composer-files").getByText(`fruit.csv · ${CSV.length} bytes`, {
        exact: false,
      }).waitFor();
      await screenshot(page, "attachments", "01-attached");
      await page.getByRole("button", { name: "Send" }).click();

      // The recorded message names the file with its size, kept by the daemon.
      const message = page.locator("#timeline li.msg-input[data-input-id]", {
        hasText: "what is in this file?",
      });
      await message.locator(".attachments").getByText(`${CSV.length} bytes`).waitFor();
      // The agent's send, from a cell that read the file by its id.
      await page.locator("#timeline").getByText("the file has 2 rows: apples,3; pears,5")
        .waitFor();
      await message.locator(".attachments button", { hasText: "fruit.csv" }).click();
      const viewer = page.getByRole("dialog");
      await viewer.getByText("pears,5").waitFor();
      await screenshot(page, "attachments", "02-read-and-opened");
      assert.equal(await page.locator(".composer-files").count(), 0, "the composer was cleared");
      await page.keyboard.press("Escape");

      // Typed while a file uploads: the next message's start stays in the box, only the sent
      // text leaves it. The upload is held until the typing is done.
      let release!: () => void;
      const held = new Promise<void>((resolve) => release = resolve);
      await page.route("**/attachments", async (route) => {
        await held;
        await route.continue();
      });
      fake.enqueue({ toolCall: { code: "wait()" } });
      await page.locator("#composer-input").fill("and this one?");
      await picker.setInputFiles(small);
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator("#composer-status").getByText("Uploading 1 file…").waitFor();
      await page.locator("#composer-input").press("End");
      await page.keyboard.type(" Then a second question");
      release();
      await page.locator("#timeline li.msg-input[data-input-id]", { hasText: "and this one?" })
        .waitFor();
      assert.equal(await page.locator("#composer-input").inputValue(), " Then a second question");
      assert.deepEqual(errors, [], "the page threw");
    } finally {
      await browser.close();
      await daemon.stop();
      await fake.close();
    }
  },
});

Deno.test({
  name: "a file sent while the daemon is down stays in the composer, which says to send again",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const files = await tempDir();
    const small = join(files, "fruit.csv");
    await Deno.writeTextFile(small, CSV);
    let daemon = await startTestDaemon();
    const browser = await launchChromium();
    try {
      const { page, errors } = await openPage(browser, 1280);
      page.setDefaultTimeout(SLOW);
      await page.goto(`${daemon.url}/#token=${daemon.token}`);
      await page.waitForSelector("text=connected as operator");
      await page.locator("#composer-input").fill("with the daemon down");
      await page.locator("#composer-files").setInputFiles(small);
      await daemon.stop();
      await page.getByRole("button", { name: "Send" }).click();
      // The upload cannot reach the daemon: the page says so and what to do; nothing is lost.
      await page.locator("#composer-status").getByText(
        /Not sent: cannot attach fruit\.csv: the daemon did not answer .*; the message and its files are kept here: send again once the daemon is back/,
      ).waitFor();
      assert.equal(await page.locator("#composer-input").inputValue(), "with the daemon down");
      await page.locator(".composer-files").getByText("fruit.csv").waitFor();

      // Back: one more Send records the message once, with its file.
      daemon = await daemon.restart();
      await page.waitForSelector("text=connected as operator");
      await page.getByRole("button", { name: "Send" }).click();
      const message = page.locator("#timeline li.msg-input[data-input-id]", {
        hasText: "with the daemon down",
      });
      await message.locator(".attachments").getByText("fruit.csv").waitFor();
      assert.equal(await message.count(), 1);
      assert.deepEqual(errors, [], "the page threw");
    } finally {
      await browser.close();
      await daemon.stop();
    }
  },
});
