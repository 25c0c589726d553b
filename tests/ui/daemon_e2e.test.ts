/**
 * The page in headless Chromium against the real daemon (`main.ts serve` under the serve
 * task's permissions, a real Python workbench, the fake model over real HTTP): a typed
 * message becomes scratchpad, a cell and one send in their lanes; a reload in the middle of
 * a turn shows every record once; a killed and restarted daemon is reconnected to.
 * Screenshots of each step go to `tests/.artifacts/ui/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { startTestDaemon, type TestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import {
  assertEachRecordOnce,
  launchChromium,
  openPage,
  screenshot,
  typeAndSend,
} from "./_browser.ts";

const WAIT_CELL = { toolCall: { code: "wait()" } };
const SLOW = 45_000;

/** A native client that follows the daemon's records, to know what the page must show. */
interface Probe {
  records(): LaneRecord[];
  /** Waits for a record of `type` matching `match`, then for the page to render it. */
  waitFor(page: Page, type: string, match?: (record: LaneRecord) => boolean): Promise<LaneRecord>;
  close(): Promise<void>;
}

async function probe(daemon: TestDaemon): Promise<Probe> {
  const client = await connectLane({ port: daemon.port, token: daemon.token, client: "probe" });
  const records = () => client.messages.filter((m): m is LaneRecord => m.kind === "record");
  return {
    records,
    async waitFor(page, type, match = () => true) {
      const found = await client.waitFor<LaneRecord>(
        (m) => m.kind === "record" && m.type === type && match(m as LaneRecord),
        SLOW,
      ).catch((error) => {
        throw new Error(`${error.message}\n${daemon.logs().slice(-3000)}`);
      });
      await page.waitForSelector(`[data-seq="${found.seq}"]`, { state: "attached", timeout: SLOW });
      return found;
    },
    close: () => client.close(),
  };
}

/** Asserts that the page shows exactly the records the daemon has sent so far, once each. */
async function assertPageMatches(page: Page, p: Probe): Promise<void> {
  const head = p.records().at(-1)!.seq;
  await page.waitForSelector(`[data-seq="${head}"]`, { state: "attached", timeout: SLOW });
  await assertEachRecordOnce(page, head);
}

async function withBrowser(body: (browser: Browser) => Promise<void>): Promise<void> {
  const browser = await launchChromium();
  try {
    await body(browser);
  } finally {
    await browser.close();
  }
}

Deno.test("a message typed in the page yields scratchpad, a cell and one send in their lanes", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    fake.enqueue({
      text: "thinking about a greeting",
      toolCall: { code: "x = 41\nawait local.send('hello **there**')\nprint(x + 1)\nwait()" },
    });
    const p = await probe(daemon);
    await withBrowser(async (browser) => {
      const { page, errors } = await openPage(browser, 1280);
      await page.goto(`${daemon.url}/#token=${daemon.token}`);
      await page.waitForSelector("text=connected as operator");
      await typeAndSend(page, "hi");
      await screenshot(page, "daemon-turn", "01-typed");
      const finished = await p.waitFor(page, "frame.finished");
      await assertPageMatches(page, p);

      const scratch = page.locator("#timeline .draft[data-seq]");
      assert.equal(await scratch.count(), 1);
      assert.match((await scratch.textContent()) ?? "", /thinking about a greeting/);
      assert.match((await scratch.textContent()) ?? "", /complete/);
      const cells = page.locator("#timeline li.cell");
      assert.equal(await cells.count(), 1);
      const cellText = ((await cells.textContent()) ?? "").replace(/\s+/g, " ");
      assert.match(cellText, /✓ ok/);
      assert.match(cellText, /await local\.send/);
      assert.equal(await cells.locator(".output-stdout pre").textContent(), "42\n");
      assert.match(cellText, /called wait\(\)/);
      const sends = page.locator("#timeline .msg-send");
      assert.equal(await sends.count(), 1);
      assert.equal(await sends.locator(".markdown strong").textContent(), "there");
      assert.match((await sends.textContent()) ?? "", /delivered/);
      const input = page.locator("#timeline .msg-input");
      assert.equal(await input.count(), 1);
      const frame = Number(finished.data.number);
      await page.waitForSelector(
        `#timeline .msg-input .badge:has-text("taken up by turn ${frame} · done")`,
      );
      await page.waitForSelector(`#composer-status:has-text("taken up by turn ${frame} · done")`);
      await screenshot(page, "daemon-turn", "02-done");
      await page.setViewportSize({ width: 390, height: 844 });
      await screenshot(page, "daemon-turn", "03-done");
      assert.deepEqual(errors, []);
    });
    await p.close();
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("a reload in the middle of a turn shows every record once, before and after it ends", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    const flag = join(daemon.workspace, "go.flag");
    // The cell runs until the test creates the flag (bounded: 30 s at most).
    fake.enqueue({
      text: "waiting for the flag",
      toolCall: {
        code: [
          "import asyncio, os",
          "for _ in range(600):",
          `    if os.path.exists(${JSON.stringify(flag)}): break`,
          "    await asyncio.sleep(0.05)",
          "print('flag seen')",
          "await local.send('after the reload')",
          "wait()",
        ].join("\n"),
      },
    });
    const p = await probe(daemon);
    await withBrowser(async (browser) => {
      const { page, errors } = await openPage(browser, 1280);
      await page.goto(`${daemon.url}/#token=${daemon.token}`);
      await page.waitForSelector("text=connected as operator");
      await typeAndSend(page, "start a long cell");
      const started = await p.waitFor(page, "cell.started");
      await page.waitForSelector(`[data-seq="${started.seq}"] .badge:has-text("running ·")`);
      await screenshot(page, "daemon-reload", "01-running");
      await page.reload();
      await page.waitForSelector(`[data-seq="${started.seq}"] .badge:has-text("running ·")`);
      await assertPageMatches(page, p);
      await screenshot(page, "daemon-reload", "02-reloaded-mid-turn");
      await Deno.writeTextFile(flag, "go\n");
      await p.waitFor(page, "frame.finished");
      await assertPageMatches(page, p);
      assert.equal(await page.locator("#timeline .msg-send").count(), 1);
      assert.match(
        (await page.locator(`[data-seq="${started.seq}"]`).textContent()) ?? "",
        /flag seen/,
      );
      await screenshot(page, "daemon-reload", "03-finished");
      assert.deepEqual(errors, []);
    });
    await p.close();
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("a daemon killed and restarted is reconnected to, and input typed meanwhile is sent once", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const first = await startTestDaemon({ modelUrl: fake.url });
  let daemon: TestDaemon = first;
  try {
    fake.enqueue({ toolCall: { code: "await local.send('one')\nwait()" } });
    await withBrowser(async (browser) => {
      const { page, errors } = await openPage(browser, 1280);
      // The restarted daemon listens on the same port: the page's own origin.
      await page.goto(`${first.url}/#token=${first.token}`);
      await page.waitForSelector("text=connected as operator");
      await typeAndSend(page, "first");
      const before = await probe(first);
      await before.waitFor(page, "frame.finished");
      await before.close();
      await first.kill();
      await page.waitForSelector('[data-banner="unreachable"]', { timeout: SLOW });
      await typeAndSend(page, "while it was down");
      await page.waitForSelector('.msg-unrecorded .badge:has-text("not sent yet")');
      await screenshot(page, "daemon-restart", "01-killed");

      fake.enqueue({ toolCall: { code: "await local.send('two')\nwait()" } });
      daemon = await first.restart();
      const after = await probe(daemon);
      await page.waitForSelector('[data-banner="back"]', { timeout: SLOW });
      await after.waitFor(page, "send", (r) => r.data.text === "two");
      const frames = after.records().filter((r) => r.type === "frame.accepted").length;
      await after.waitFor(page, "frame.finished", (r) => Number(r.data.number) === frames);
      await assertPageMatches(page, after);
      const records = after.records();
      await after.close();
      const admitted = records.filter((r) => r.type === "input.admitted");
      assert.deepEqual(admitted.map((r) => r.data.body), ["first", "while it was down"]);
      assert.equal(await page.locator(".msg-unrecorded").count(), 0);
      await screenshot(page, "daemon-restart", "02-reconnected");
      assert.deepEqual(errors, []);
    });
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("the operator panel shows the real daemon's epoch and release, stops the session and resumes it", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    const p = await probe(daemon);
    const activation = p.records().find((r) => r.type === "activation");
    assert.ok(activation, "the daemon activates its startup release");
    await withBrowser(async (browser) => {
      const { page, errors } = await openPage(browser, 1280);
      await page.goto(`${daemon.url}/#token=${daemon.token}`);
      await page.waitForSelector("text=operator role granted");
      assert.equal(await page.evaluate("location.hash"), "");
      await page.waitForSelector(`[data-field="epoch"]:has-text("${activation.data.epoch}")`);
      assert.equal(
        await page.locator('[data-field="release"]').textContent(),
        String(activation.data.release_id),
      );
      assert.equal(await page.locator('[data-field="state"]').textContent(), "running");
      await page.click('#operator button:has-text("Stop")');
      await page.click('#operator button:has-text("Confirm")');
      await page.waitForSelector('.op-result:has-text("Stop: done")');
      await p.waitFor(page, "operator", (r) => r.data.op === "op.stop");
      await page.waitForSelector('[data-field="state"]:has-text("stopped")');
      // Said where the person looks, with its fix: Resume takes work again, no restart.
      const line = page.locator('#timeline .state-line[data-state="stopped"]');
      await line.waitFor();
      await page.locator('header .state-header-item[data-state="stopped"]').waitFor();
      await screenshot(page, "daemon-operator", "01-stopped");
      await line.locator('button[data-fix="stopped"]').click();
      await p.waitFor(page, "operator", (r) => r.data.op === "op.resume");
      await page.waitForSelector('[data-field="state"]:has-text("running")');
      await line.waitFor({ state: "detached" });
      await screenshot(page, "daemon-operator", "02-resumed");
      assert.deepEqual(errors, []);
    });
    await p.close();
  } finally {
    await daemon.stop();
    await fake.close();
  }
});
