/**
 * Cookie tossing in headless Chromium against the real daemon: a page served from another
 * loopback port shares the daemon's cookie jar (browsers do not separate cookies by port) and
 * sets junk under the daemon's cookie names, old and new, on `/` and on `/v2` (where a longer
 * path is sent first and a login's cookie cannot replace it). The daemon's page must still get
 * a working lane with `#token=`, and keep it across a reload.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { BrowserContext, Page } from "playwright-core";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { launchChromium, screenshot } from "./_browser.ts";

/** The other port's page: any content; what matters is its origin's cookie jar. */
function startOtherPort(): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () =>
      new Response("<!doctype html><title>another port</title><p>another port</p>", {
        headers: { "content-type": "text/html; charset=utf-8" },
      }),
  );
}

/** From a page on `other`, sets junk under each name, on `/` and on `/v2`. */
async function tossCookies(page: Page, other: string, names: string[]): Promise<void> {
  await page.goto(other);
  const sets = names.flatMap((name) =>
    ["/", "/v2"].map((path) => `document.cookie = ${JSON.stringify(`${name}=junk; path=${path}`)};`)
  );
  await page.evaluate(sets.join("\n"));
}

/** The cookie names the daemon set in `context`. */
async function daemonCookieNames(context: BrowserContext): Promise<string[]> {
  return (await context.cookies()).filter((c) => c.httpOnly && c.name.startsWith("klbr_"))
    .map((c) => c.name);
}

Deno.test("a junk cookie set by a page on another loopback port does not lock the daemon's page out", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const other = startOtherPort();
  const otherUrl = `http://127.0.0.1:${other.addr.port}/`;
  const browser = await launchChromium();
  const probe = await connectLane({ port: daemon.port, token: daemon.token, client: "probe" });
  try {
    // The name the daemon gives its cookie, learnt the way a page that once held it could.
    const first = await browser.newContext();
    const firstPage = await first.newPage();
    await firstPage.goto(`${daemon.url}/#token=${daemon.token}`);
    await firstPage.waitForSelector("text=connected as operator");
    const names = [
      ...new Set([...await daemonCookieNames(first), `klbr_session_${daemon.port}`]),
    ];
    await first.close();

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    await tossCookies(page, otherUrl, names);
    const tossed = (await context.cookies()).filter((c) => c.value === "junk");
    assert.equal(tossed.length, names.length * 2, "the other port's junk is in the jar");

    // Logging in with the token gives a working lane, junk or not.
    await page.goto(`${daemon.url}/#token=${daemon.token}`);
    await page.waitForSelector("text=connected as operator");
    await page.focus("#composer-input");
    await page.keyboard.type("past the junk");
    await page.keyboard.press("Enter");
    const admitted = await probe.waitFor<LaneRecord>(
      (m) => m.kind === "record" && m.type === "input.admitted" && m.data.body === "past the junk",
      30_000,
    );
    await page.waitForSelector(`[data-seq="${admitted.seq}"]`, { state: "attached" });
    await screenshot(page, "cookie-tossing", "01-sent-past-junk");

    // Junk tossed again while the page holds its cookie: a reload keeps the lane.
    await tossCookies(page, otherUrl, names);
    await page.goto(daemon.url);
    await page.waitForSelector("text=connected as operator");
    await page.waitForSelector(`[data-seq="${admitted.seq}"]`, { state: "attached" });
    assert.deepEqual(errors, []);
  } finally {
    await probe.close();
    await browser.close();
    await other.shutdown();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
});
