/**
 * Every state said where the person looks, in headless Chromium against the real daemon (the
 * real workbench, the scripted model over real HTTP): after a drain the header and the
 * conversation say the session is drained with a Resume button, a message typed meanwhile says
 * why it waits, and Resume gets it answered with no restart. The context view shows the next
 * request's items, budget and what is left out, and searches the history; the operator panel
 * shows status, health, frames and a frame's hook calls as tables. axe-core finds no serious or
 * critical violation. Screenshots go to `tests/.artifacts/ui/states/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { type FakeOpenAIOptions, startFakeOpenAI } from "../fakes/openai_server.ts";
import {
  launchChromium,
  openPage,
  screenshot,
  seriousViolations,
  typeAndSend,
} from "./_browser.ts";

const SLOW = 45_000;

/**
 * What each test here runs against: the scripted model, the daemon on it, a probe lane and
 * Chromium; all closed, in that reverse order, when the test's `await using` ends.
 */
async function startStage(model: FakeOpenAIOptions) {
  const fake = startFakeOpenAI(model);
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const probe = await connectLane({ port: daemon.port, token: daemon.token, client: "probe" });
  const browser = await launchChromium();
  return {
    fake,
    daemon,
    probe,
    browser,
    async [Symbol.asyncDispose]() {
      await browser.close();
      await probe.close();
      await daemon.stop();
      await fake.close();
    },
  };
}

Deno.test("after a drain the page says so with a Resume button; a message waits with its reason and Resume answers it", async () => {
  await using stage = await startStage({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const { fake, daemon, probe, browser } = stage;
  const sends = () =>
    probe.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === "send");
  const { page, errors } = await openPage(browser, 1280);
  await page.goto(`${daemon.url}/#token=${daemon.token}`);
  await page.waitForSelector("text=connected as operator");
  fake.enqueue({ toolCall: { code: "await local.send('the word is zebra')\nwait()" } });
  await typeAndSend(page, "remember zebra");
  await probe.waitFor((m) => m.kind === "record" && m.type === "send", SLOW);
  assert.equal(await page.locator(".state-line").count(), 0, "nothing holds the agent yet");

  const drained = await probe.request({ kind: "op.drain", session: "default" });
  assert.equal(drained.kind, "op.result");
  const header = page.locator('header .state-header-item[data-state="drained"]');
  await header.waitFor({ timeout: SLOW });
  assert.match((await header.textContent()) ?? "", /drained\s*Resume/);
  const line = page.locator('#timeline .state-line[data-state="drained"]');
  assert.match(
    (await line.textContent()) ?? "",
    /drained The operator drained the session: new messages are kept and wait\. Resume takes them up/,
  );

  await typeAndSend(page, "are you there");
  const waiting = page.locator("#timeline .msg-input .wait-reason");
  await waiting.waitFor({ timeout: SLOW });
  assert.match((await waiting.textContent()) ?? "", /^waits: drained — Resume takes them up/);
  assert.deepEqual(await seriousViolations(page), []);
  await screenshot(page, "states", "01-drained");
  // On a phone and in dark mode the line and its fix are where the person looks.
  for (
    const look of [
      { width: 390, height: 844, scheme: "light" },
      { width: 390, height: 844, scheme: "dark" },
      { width: 1280, height: 800, scheme: "dark" },
    ] as const
  ) {
    await page.setViewportSize(look);
    await page.emulateMedia({ colorScheme: look.scheme });
    const tag = `${look.width}px ${look.scheme}`;
    await line.scrollIntoViewIfNeeded();
    assert.ok(await line.isVisible(), `${tag}: the state line is shown`);
    assert.ok(
      await line.locator('button[data-fix="drained"]').isVisible(),
      `${tag}: its Resume button is shown`,
    );
    assert.ok(await waiting.isVisible(), `${tag}: the waiting message says why`);
    assert.deepEqual(await seriousViolations(page), [], tag);
    await screenshot(page, "states", `01-drained-${look.scheme}`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.emulateMedia({ colorScheme: "light" });

  fake.enqueue({ toolCall: { code: "await local.send('yes, back')\nwait()" } });
  await line.locator('button[data-fix="drained"]').click();
  await probe.waitFor(
    (m) => m.kind === "record" && m.type === "send" && (m as LaneRecord).data.text === "yes, back",
    SLOW,
  );
  assert.equal(sends().length, 2);
  await page.locator(".state-line").waitFor({ state: "detached", timeout: SLOW });
  await page.locator(".wait-reason").waitFor({ state: "detached", timeout: SLOW });
  await screenshot(page, "states", "02-resumed");
  assert.deepEqual(errors, []);
});

Deno.test("the context view and the operator tables show what the agent remembers and did", async () => {
  await using stage = await startStage({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const { fake, daemon, probe, browser } = stage;
  const { page, errors } = await openPage(browser, 1280);
  await page.goto(`${daemon.url}/#token=${daemon.token}`);
  await page.waitForSelector("text=connected as operator");
  fake.enqueue({ toolCall: { code: "await local.send('the word is zebra')\nwait()" } });
  await typeAndSend(page, "remember zebra");
  const finished = await probe.waitFor<LaneRecord>(
    (m) => m.kind === "record" && m.type === "frame.finished",
    SLOW,
  );

  await page.click('#context button:has-text("Show the next request")');
  const items = page.locator('#context table[data-table="context-items"] tbody tr');
  await items.first().waitFor();
  assert.ok((await items.count()) >= 2);
  assert.match((await items.allTextContents()).join("\n"), /the word is zebra/);
  assert.match(
    (await page.locator('[data-field="context-used"]').textContent()) ?? "",
    /^[\d,]+ of [\d,]+ tokens \(\d+%\)$/,
  );
  assert.equal(await page.locator("#context-meter").count(), 1);
  assert.match((await page.locator('[data-field="summary"]').textContent()) ?? "", /None yet/);
  assert.equal(await page.locator('[data-field="left-out"]').textContent(), "Nothing.");
  await page.fill("#history-query", "zebra");
  await page.click('#context button:has-text("Search history")');
  const hits = page.locator('#context table[data-table="history-hits"] tbody tr');
  await hits.first().waitFor();
  assert.ok((await hits.count()) >= 1);

  const status = page.locator('#operator table[data-table="status"] tbody tr');
  await status.first().waitFor();
  assert.match((await status.first().textContent()) ?? "", /^defaultrunningidle/);
  const parts = page.locator('#operator table[data-table="health-parts"]');
  await parts.waitFor();
  assert.match((await parts.textContent()) ?? "", /sessionrunning/);
  await page.click('#operator button:has-text("Recent frames")');
  const frames = page.locator('#operator table[data-table="frames"] tbody tr');
  await frames.first().waitFor();
  assert.match(
    (await frames.first().textContent()) ?? "",
    new RegExp(String(finished.data.frame_id)),
  );
  await page.click('#operator button[aria-label="Hook calls of frame 1"]');
  const traces = page.locator('#operator table[data-table="traces"] tbody tr');
  await traces.first().waitFor();
  assert.match((await traces.allTextContents()).join("\n"), /attention\.plan/);
  // No raw JSON is left in the operator panel.
  assert.equal(await page.locator("#operator pre").count(), 0);
  assert.deepEqual(await seriousViolations(page), []);
  await screenshot(page, "states", "03-context-and-tables");
  assert.deepEqual(errors, []);
});

Deno.test("what a route learned of its server is a row of the operator's health table, with the fix", async () => {
  // llama-server without --jinja refuses `tools`: the `auto` route moves to text-mode cells.
  await using stage = await startStage({
    profile: "llama.cpp-no-jinja",
    // The cell's result comes back as the last user message: then the turn waits.
    fallback: (request) =>
      JSON.stringify(request.body.messages.at(-1)).includes("result of your python cell")
        ? { text: "```python\nwait()\n```" }
        : { text: "```python\nawait local.send('heard')\nwait()\n```" },
  });
  const { daemon, probe, browser } = stage;
  await probe.request({ kind: "input", client_msg_id: "learn", text: "hello" });
  await probe.waitFor<LaneRecord>((m) => m.kind === "record" && m.type === "send", SLOW);
  const { page, errors } = await openPage(browser, 1280);
  await page.goto(`${daemon.url}/#token=${daemon.token}`);
  await page.waitForSelector("text=connected as operator");
  const row = page.locator(
    '#operator table[data-table="health-parts"] tbody tr:has-text("route main")',
  );
  await row.waitFor();
  assert.match(
    (await row.textContent()) ?? "",
    /^route mainadaptedroute main learned its server: text-mode cells \(tool_calls "text"\); set it in the route's configuration/,
  );
  assert.deepEqual(errors, []);
});
