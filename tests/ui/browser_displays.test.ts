/**
 * Rich cell output end to end: a cell of the real workbench calls `display()` with a PNG and with
 * HTML that carries a script and an event handler; the daemon keeps each as an artifact, the
 * model's next request names them (type, size, artifact id) without their bytes, and the page
 * shows the image inline and the HTML sanitised. Screenshot in `tests/.artifacts/ui/displays/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { launchChromium, openPage, screenshot } from "./_browser.ts";

const SLOW = 60_000;
/** A 1×1 PNG. */
const PNG_B64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const HTML = '<p id="shown">rich <b>html</b></p><script>window.owned = 1</script>' +
  '<img src="x" onerror="window.owned = 2">';
const CELL = [
  "import base64",
  `display(base64.b64decode(${JSON.stringify(PNG_B64)}))`,
  `display(${JSON.stringify(HTML)}, mime="text/html")`,
].join("\n");

Deno.test({
  name:
    "a cell's display() of a PNG and of HTML is kept, named to the model, and shown in the page",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
    const daemon = await startTestDaemon({ modelUrl: fake.url });
    const probe = await connectLane({ port: daemon.port, token: daemon.token, client: "probe" });
    const browser = await launchChromium();
    try {
      fake.enqueue({ toolCall: { code: CELL } });
      await probe.request({
        kind: "input",
        client_msg_id: "show-1",
        text: "show me a picture",
      });
      const finished = await probe.waitFor<LaneRecord>(
        (m) => m.kind === "record" && m.type === "cell.finished",
        SLOW,
      ).catch((error) => {
        throw new Error(`${error.message}\n${daemon.logs().slice(-3000)}`);
      });
      const result = finished.data.result as {
        displays?: { mime: string; bytes: number; artifact?: { id: string } }[];
      };
      assert.equal(finished.data.outcome, "ok", JSON.stringify(finished.data));
      assert.deepEqual(result.displays?.map((d) => [d.mime, d.bytes]), [
        ["image/png", atob(PNG_B64).length],
        ["text/html", new TextEncoder().encode(HTML).length],
      ]);
      const [png, html] = result.displays!.map((d) => d.artifact!.id);
      // The model reads what was shown, by artifact, never the bytes.
      await probe.waitFor((m) => m.kind === "record" && m.type === "frame.finished", SLOW);
      // The cell did not wait: the model's next request carries its result.
      const told = JSON.stringify(fake.requests.map((r) => r.body.messages));
      assert.match(told, new RegExp(`image/png, \\d+ bytes, artifact ${png}`));
      assert.match(told, new RegExp(`text/html, \\d+ bytes, artifact ${html}`));
      const results = fake.requests.flatMap((r) =>
        (r.body.messages as { role: string; content: unknown }[]).filter((m) => m.role === "tool")
      );
      assert.ok(results.length > 0, "the cell's result reached the model");
      for (const result of results) {
        assert.ok(!JSON.stringify(result).includes("iVBORw0KGgo"), "no image bytes in a result");
      }

      const { page, errors } = await openPage(browser, 1280);
      page.setDefaultTimeout(SLOW);
      await page.goto(`${daemon.url}/#token=${daemon.token}`);
      await page.waitForSelector("text=connected as operator");
      await page.locator("#timeline details.turn > summary").first().click();
      const image = page.locator("#timeline .cell-displays img.cell-display-image");
      await image.waitFor();
      assert.match((await image.getAttribute("src")) ?? "", /^data:image\/png;base64,/);
      assert.equal(
        await image.evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth),
        1,
      );
      const shown = page.locator("#timeline .cell-display-html");
      await shown.locator("b").waitFor();
      assert.equal(await shown.locator("b").textContent(), "html");
      assert.equal(await shown.locator("script").count(), 0);
      assert.equal(await shown.locator("[onerror]").count(), 0);
      assert.equal(await page.evaluate("window.owned === undefined"), true);
      await screenshot(page, "displays", "01-shown");
      assert.deepEqual(errors, [], "the page threw");
    } finally {
      await browser.close();
      await probe.close();
      await daemon.stop();
      await fake.close();
    }
  },
});
