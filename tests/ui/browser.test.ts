/**
 * The page in real headless Chromium, served by the daemon's own `createApp` and
 * `LaneConnection` over an in-memory lane host, so each test decides exactly which records
 * exist and when: the composer, the four lanes, safe Markdown, a reload and an outage, the
 * operator panel, and the layout at 1280 and 390 pixels. Screenshots of each step go to
 * `tests/.artifacts/ui/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { ensureUiBuilt } from "../../runtime/setup/mod.ts";
import {
  assertEachRecordOnce,
  launchChromium,
  openPage,
  openTurns,
  REPO,
  screenshot,
  typeAndSend,
  waitForSeq,
} from "./_browser.ts";
import {
  type LaneServer,
  MemoryLaneHost,
  startLaneServer,
  TEST_TOKEN,
} from "./_memory_lane_host.ts";
import { body as full } from "./_record_data.ts";

const UI_DIR = await ensureUiBuilt({ repoRoot: REPO });

interface Scene {
  host: MemoryLaneHost;
  server: LaneServer;
  page: Page;
  errors: string[];
}

/** Runs `body` with a fresh host, server, browser and page; closes them all afterwards. */
async function scene(width: number, body: (s: Scene) => Promise<void>): Promise<void> {
  const host = new MemoryLaneHost();
  const s = { host, server: await startLaneServer(host, { uiDir: UI_DIR }) } as Scene;
  const browser = await launchChromium();
  try {
    const opened = await openPage(browser, width);
    s.page = opened.page;
    s.errors = opened.errors;
    await body(s);
    assert.deepEqual(s.errors, [], "the page threw");
  } finally {
    await browser.close();
    await s.server.stop();
  }
}

/** Text of the element matching `selector`, whitespace collapsed. */
async function textOf(page: Page, selector: string): Promise<string> {
  const text = await page.locator(selector).first().textContent();
  return (text ?? "").replace(/\s+/g, " ").trim();
}

/** Appends the records of one turn that consumed `inputId`; returns the head seq. */
function playTurn(host: MemoryLaneHost, inputId: string): number {
  host.append("frame.accepted", full("frame.accepted", { input_ids: [inputId] }));
  host.append("turn.started", full("turn.started"));
  host.append("scratchpad", full("scratchpad", { text: "I will check the build." }));
  host.append(
    "cell.started",
    full("cell.started", {
      cell_id: "cell_1",
      code: "r = await run(('deno', 'check', 'main.ts'))\nprint(r.exit_code)",
    }),
  );
  host.append(
    "cell.finished",
    full("cell.finished", {
      cell_id: "cell_1",
      outcome: "ok",
      result: {
        stdout: Array.from({ length: 40 }, (_, i) => `checked file ${i}`).join("\n"),
        stderr: "warning: slow\n",
        value: null,
        error: null,
        wait: null,
        duration_ms: 1234,
      },
    }),
  );
  host.append("send", full("send", { send_id: "snd_1", text: "The build is **green**." }));
  host.append("scratchpad", full("scratchpad", { text: "Half a tho", partial: true }));
  host.append("frame.finished", {
    frame_id: "fr_1",
    number: 1,
    state: "done",
    reason: "wait",
    input_ids: [inputId],
  });
  return host.headSeq("default");
}

Deno.test("the page sends a typed message on Enter and shows its acknowledgement and disposition", async () => {
  await scene(1280, async ({ host, server, page }) => {
    await page.goto(server.pageUrl);
    await page.waitForSelector("text=connected as operator");
    await page.focus("#composer-input");
    await page.keyboard.type("Is the build green?");
    await page.keyboard.press("Shift+Enter");
    await page.keyboard.type("Check all of it.");
    assert.equal(host.admits.length, 0, "Shift+Enter must not send");
    await page.keyboard.press("Enter");
    await waitForSeq(page, 1);
    assert.deepEqual(host.admits.map((a) => a.input.text), [
      "Is the build green?\nCheck all of it.",
    ]);
    assert.equal(await page.inputValue("#composer-input"), "");
    const inputId = String(host.sessions.get("default")![0].data.input_id);
    await page.waitForSelector(`#composer-status:has-text("acknowledged as ${inputId} · pending")`);
    assert.equal(await textOf(page, '[data-seq="1"] .badge'), "◷ pending");
    await screenshot(page, "composer", "01-admitted");
    host.append("frame.accepted", full("frame.accepted", { input_ids: [inputId] }));
    await page.waitForSelector('[data-seq="1"] .badge:has-text("taken up by turn 1")');
    await page.waitForSelector('#composer-status:has-text("taken up by turn 1")');
    host.append("frame.finished", full("frame.finished", { state: "done", input_ids: [inputId] }));
    await page.waitForSelector('[data-seq="1"] .badge:has-text("taken up by turn 1 · done")');
    await screenshot(page, "composer", "02-consumed");
  });
});

Deno.test("the page does not send on the Enter that confirms an input method's composition, as Safari reports it", async () => {
  await scene(1280, async ({ host, server, page }) => {
    await page.goto(server.pageUrl);
    await page.waitForSelector("text=connected as operator");
    await page.focus("#composer-input");
    await page.keyboard.type("nihon");
    // Safari ends the composition before the Enter that confirms it: that keydown says
    // `isComposing: false`, and only its keyCode 229 tells that the input method took it.
    const sent = await page.evaluate(`(() => {
      const event = new KeyboardEvent("keydown", {
        key: "Enter",
        keyCode: 229,
        isComposing: false,
        bubbles: true,
        cancelable: true,
      });
      document.getElementById("composer-input").dispatchEvent(event);
      return event.defaultPrevented;
    })()`);
    assert.equal(sent, false, "the confirming Enter must not send");
    assert.equal(await page.inputValue("#composer-input"), "nihon");
    await page.keyboard.press("Enter");
    await waitForSeq(page, 1);
    assert.deepEqual(host.admits.map((a) => a.input.text), ["nihon"]);
    assert.equal(await page.inputValue("#composer-input"), "");
  });
});

Deno.test("the page refuses to send an empty message and says why", async () => {
  await scene(1280, async ({ host, server, page }) => {
    await page.goto(server.pageUrl);
    await page.waitForSelector("text=connected as operator");
    await page.focus("#composer-input");
    await page.keyboard.type("   ");
    await page.keyboard.press("Enter");
    await page.waitForSelector(
      '#composer-status:has-text("Write something or attach a file first.")',
    );
    assert.equal(await page.getAttribute("#composer-input", "aria-invalid"), "true");
    assert.equal(host.admits.length, 0);
  });
});

Deno.test("the page shows messages, drafts and cells in the timeline and runtime events in their panel", async () => {
  await scene(1280, async ({ host, server, page }) => {
    await page.goto(server.pageUrl);
    await typeAndSend(page, "Is the build green?");
    await waitForSeq(page, 1);
    host.append(
      "cell.started",
      full("cell.started", { cell_id: "cell_0", code: "await wait_for_it()" }),
    );
    await waitForSeq(page, 2);
    await page.waitForSelector('#timeline [data-seq="2"] .badge:has-text("running ·")');
    await screenshot(page, "lanes", "01-running-cell");
    host.append("kernel.reset", full("kernel.reset", { generation: 2, reason: "operator" }));
    const head = playTurn(host, String(host.sessions.get("default")![0].data.input_id));
    await waitForSeq(page, head);
    // Each record sits in its place: the conversation's work in the timeline, the rest in
    // the runtime-events panel.
    const lanes = await page.$$eval(
      "[data-seq]",
      (nodes) => nodes.map((n) => [Number(n.getAttribute("data-seq")), n.closest("section")?.id]),
    );
    const laneOf = new Map(lanes as [number, string][]);
    const types = host.sessions.get("default")!.map((r) => [r.seq, r.type] as const);
    for (const [seq, type] of types) {
      const expected = type === "input.admitted" || type === "send" || type === "scratchpad" ||
          type.startsWith("cell.")
        ? "timeline"
        : "lane-events";
      assert.equal(laneOf.get(seq), expected, `record ${seq} (${type})`);
    }
    await assertEachRecordOnce(page, head);
    assert.equal(await textOf(page, '[data-seq="2"] .badge'), "! interrupted by a kernel reset");
    assert.match(
      await textOf(page, '#timeline li.draft:has-text("Half a tho") .badge'),
      /partial/,
    );
    assert.match(
      await textOf(page, '#timeline li.draft:has-text("I will check") .badge'),
      /complete/,
    );
    await openTurns(page);
    const cell = '#timeline [data-cell-id="cell_1"]';
    assert.match(await textOf(page, `${cell} .meta`), /✓ ok.*1\.2 s/);
    assert.match(await textOf(page, `${cell} .output-stderr`), /warning: slow/);
    // Long output is collapsed behind a button that opens it.
    const more = page.locator(`${cell} .output-stdout button`);
    assert.equal(await more.getAttribute("aria-expanded"), "false");
    assert.doesNotMatch(await textOf(page, `${cell} .output-stdout pre`), /checked file 39/);
    await more.click();
    assert.equal(await more.getAttribute("aria-expanded"), "true");
    assert.match(await textOf(page, `${cell} .output-stdout pre`), /checked file 39/);
    assert.equal(await page.locator("#timeline .msg-send strong").textContent(), "green");
    assert.match(await textOf(page, "#timeline .msg-send .badge"), /delivered/);
    assert.match(
      await textOf(page, "#lane-events"),
      /Kernel reset \(generation 2\).*Turn 1 accepted.*Turn 1 finished/,
    );
    await screenshot(page, "lanes", "02-turn-done");
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, "lanes", "03-turn-done");
  });
});

Deno.test("the page renders a send's Markdown without running script or fetching anything", async () => {
  await scene(1280, async ({ host, server, page }) => {
    const requests: string[] = [];
    page.on("request", (request) => requests.push(request.url()));
    await page.goto(server.pageUrl);
    await page.waitForSelector("text=connected as operator");
    host.append(
      "send",
      full("send", {
        send_id: "snd_x",
        conversation: "local:default",
        text: [
          '**ok** <img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>',
          "[click](javascript:window.__xss=3) [docs](https://example.invalid/a)",
          '<iframe src="https://example.invalid/"></iframe><a href="#" onclick="window.__xss=4">x</a>',
          "![remote](https://example.invalid/pixel.png)",
        ].join("\n\n"),
      }),
    );
    await waitForSeq(page, 1);
    const body = page.locator('[data-seq="1"] .markdown');
    await body.locator("a").last().click();
    assert.equal(await page.evaluate(() => (globalThis as { __xss?: number }).__xss), undefined);
    assert.equal(await body.locator("strong").textContent(), "ok");
    assert.equal(await body.locator("img, script, iframe, [onerror], [onclick]").count(), 0);
    assert.equal(await body.locator('a[href^="javascript"]').count(), 0);
    const docs = body.locator('a:has-text("docs")');
    assert.equal(await docs.getAttribute("href"), "https://example.invalid/a");
    assert.equal(await docs.getAttribute("rel"), "noopener noreferrer nofollow");
    assert.deepEqual(requests.filter((url) => !url.startsWith(server.url)), []);
  });
});

Deno.test("a reload in the middle of a turn shows every record once and resumes from its last seq", async () => {
  await scene(1280, async ({ host, server, page }) => {
    await page.goto(server.pageUrl);
    await typeAndSend(page, "Is the build green?");
    await waitForSeq(page, 1);
    const inputId = String(host.sessions.get("default")![0].data.input_id);
    host.append("frame.accepted", full("frame.accepted", { input_ids: [inputId] }));
    host.append("scratchpad", full("scratchpad", { text: "first draft" }));
    host.append("cell.started", full("cell.started", { cell_id: "cell_1", code: "print(1)" }));
    await waitForSeq(page, 4);
    // Let the page store its log, as it does on pagehide.
    await page.evaluate(() => dispatchEvent(new Event("pagehide")));
    const readsBefore = host.reads.length;
    await page.reload();
    // Records that commit while the page is away arrive once it is back.
    host.append(
      "cell.finished",
      full("cell.finished", {
        cell_id: "cell_1",
        outcome: "ok",
        result: { value: null, stdout: "1\n", stderr: "", error: null, wait: null, duration_ms: 5 },
      }),
    );
    host.append("send", full("send", { send_id: "snd_1", text: "Green." }));
    await waitForSeq(page, 6);
    await assertEachRecordOnce(page, 6);
    assert.equal(host.reads[readsBefore], 4, "the reloaded page resumed after seq 4");
    await screenshot(page, "reload", "01-after-reload");
    // A second reload with nothing new still shows the same records once.
    await page.reload();
    await waitForSeq(page, 6);
    await page.waitForSelector("text=connected as operator");
    await assertEachRecordOnce(page, 6);
  });
});

Deno.test("the page says when the daemon is unreachable and when it is back, losing nothing", async () => {
  await scene(1280, async (s) => {
    const { host, page } = s;
    await page.goto(s.server.pageUrl);
    host.append("scratchpad", full("scratchpad", { text: "before the outage" }));
    await waitForSeq(page, 1);
    const port = s.server.port;
    await s.server.stop();
    await page.waitForSelector('[data-banner="unreachable"]');
    assert.match(
      await textOf(page, '[data-banner="unreachable"]'),
      /The daemon is unreachable since/,
    );
    assert.match(await textOf(page, ".topbar"), /offline/);
    await typeAndSend(page, "written while offline");
    await page.waitForSelector('.msg-unrecorded .badge:has-text("not sent yet")');
    await screenshot(page, "outage", "01-unreachable");
    host.append("scratchpad", full("scratchpad", { text: "during the outage" }));
    s.server = await startLaneServer(host, { uiDir: UI_DIR, port });
    await page.waitForSelector('[data-banner="back"]');
    assert.match(await textOf(page, '[data-banner="back"]'), /The daemon is back/);
    await waitForSeq(page, 3);
    assert.equal(await page.locator(".msg-unrecorded").count(), 0);
    assert.deepEqual(host.admits.map((a) => a.input.text), ["written while offline"]);
    await assertEachRecordOnce(page, 3);
    await screenshot(page, "outage", "02-back");
    await page.click('[data-banner="back"] button');
    assert.equal(await page.locator("[data-banner]").count(), 0);
  });
});

Deno.test("the operator panel takes the token from the URL and stops the session after confirmation", async () => {
  await scene(1280, async ({ host, server, page }) => {
    await page.goto(`${server.url}/#token=${TEST_TOKEN}`);
    await page.waitForSelector("text=operator role granted");
    assert.equal(await page.evaluate(() => location.hash), "");
    // The page traded the token for an HttpOnly cookie; its scripts keep no token at all.
    assert.equal(await page.evaluate(() => localStorage.getItem("klbr:token")), null);
    assert.equal(await page.evaluate("document.cookie"), "");
    const cookie = (await page.context().cookies()).find((c) =>
      new RegExp(`^klbr_${server.port}_[0-9a-f]{12}$`).test(c.name)
    );
    assert.deepEqual([cookie?.httpOnly, cookie?.sameSite, cookie?.path], [true, "Strict", "/"]);
    await page.waitForSelector('[data-field="epoch"]:has-text("3")');
    assert.equal(await textOf(page, '[data-field="release"]'), "rel_a1b2c3d4e5f6a7b8c9d0");
    // The skills revision comes from the records (none here), never guessed from the status.
    assert.equal(await textOf(page, '[data-field="skills"]'), "unknown");
    // Escape closes the confirmation without running anything.
    await page.click('#operator button:has-text("Stop")');
    await page.waitForSelector("text=Stop the current turn and take no new frames?");
    await page.keyboard.press("Escape");
    await page.waitForSelector(".confirm", { state: "detached" });
    await page.click('#operator button:has-text("Stop")');
    await page.waitForSelector("text=Stop the current turn and take no new frames?");
    assert.equal(host.operations.filter((o) => o.kind === "op.stop").length, 0);
    await screenshot(page, "operator", "01-confirm-stop");
    await page.click('#operator button:has-text("Confirm")');
    await page.waitForSelector('.op-result:has-text("Stop: done")');
    assert.deepEqual(host.operations.map((o) => o.kind).filter((k) => k !== "op.status"), [
      "op.stop",
    ]);
    await waitForSeq(page, 1);
    assert.match(await textOf(page, '[data-seq="1"]'), /Operator: op\.stop/);
    // An event's data toggle is not in the tab order; one button shows every record's data.
    assert.equal(await page.getAttribute('[data-seq="1"] .event-data summary', "tabindex"), "-1");
    await page.click('button:has-text("Show each record\'s data")');
    await page.waitForSelector('[data-seq="1"] .event-data[open]');
    // A reload keeps the session without the URL.
    await page.reload();
    await page.waitForSelector("text=operator role granted");
  });
});

Deno.test("the operator panel activates with the current epoch and shows an `epoch_moved` refusal", async () => {
  await scene(1280, async ({ host, server, page }) => {
    await page.goto(`${server.url}/#token=${TEST_TOKEN}`);
    await page.waitForSelector('[data-field="epoch"]:has-text("3")');
    await page.fill("#activate-release", "rel_next");
    await page.click('button:has-text("Activate at behaviour version 3")');
    await page.click('#operator button:has-text("Confirm")');
    await page.waitForSelector('.op-result:has-text("Activate: done")');
    assert.deepEqual([host.epoch, host.activeRelease], [4, "rel_next"]);
    await page.waitForSelector('[data-field="epoch"]:has-text("4")');
    // Someone else moves the epoch; the page still shows 4.
    host.epoch = 9;
    await page.fill("#activate-release", "rel_other");
    await page.click('button:has-text("Activate at behaviour version 4")');
    await page.click('#operator button:has-text("Confirm")');
    await page.waitForSelector('.op-result:has-text("refused (epoch_moved)")');
    assert.match(await textOf(page, ".op-result"), /epoch moved \(expected 4, found 9\)/);
    assert.equal(host.activeRelease, "rel_next");
    await screenshot(page, "operator", "02-epoch-moved");
  });
});

Deno.test("the page without a token shows how to get one; a refused token is named, the right one lets it in", async () => {
  await scene(1280, async ({ host, server, page }) => {
    host.append("scratchpad", full("scratchpad", { text: "not for strangers" }));
    await page.goto(`${server.url}/#token=${"cd".repeat(32)}`);
    await page.waitForSelector("text=This page needs the operator token");
    await page.waitForSelector("text=Token refused: cannot authorise: the operator token is wrong");
    assert.match(await textOf(page, ".token-screen"), /deno task klbr url/);
    assert.match(await textOf(page, ".topbar"), /needs the token/);
    // No lanes, no records, no composer: nothing to see or send without the token.
    assert.equal(await page.locator("[data-seq]").count(), 0);
    assert.equal(await page.locator("#composer-input").count(), 0);
    assert.equal(await page.evaluate(() => localStorage.getItem("klbr:token")), null);
    assert.equal(host.admits.length, 0);
    await screenshot(page, "operator", "03-token-screen");
    // Pasting the right token lets the page in.
    await page.fill("#operator-token", TEST_TOKEN);
    await page.click('button:has-text("Use token")');
    await page.waitForSelector("text=operator role granted");
    await waitForSeq(page, 1);
    await typeAndSend(page, "now I may");
    await waitForSeq(page, 2);
    assert.equal(host.admits.length, 1);
    await screenshot(page, "operator", "04-token-entered");
  });
});

Deno.test("a #token= address pasted into an open tab is read on hash change", async () => {
  await scene(1280, async ({ server, page }) => {
    await page.goto(server.url);
    await page.waitForSelector("text=This page needs the operator token");
    assert.match(await textOf(page, '[data-field="auth-reason"]'), /run `deno task klbr url`/);
    await page.evaluate((token) => location.hash = `#token=${token}`, TEST_TOKEN);
    await page.waitForSelector("text=operator role granted");
    assert.equal(await page.evaluate(() => location.hash), "");
    // Signing out drops the cookie: the page is back to the token screen.
    await page.click('#operator button:has-text("Sign out")');
    await page.waitForSelector("text=This page needs the operator token");
  });
});

Deno.test("with view_without_token the page watches read-only; the header says whether the workbench is confined", async () => {
  const host = new MemoryLaneHost();
  host.append("scratchpad", full("scratchpad", { text: "visible to a viewer" }));
  const server = await startLaneServer(host, {
    uiDir: UI_DIR,
    viewWithoutToken: true,
    sandbox: { sandbox: "none", sandbox_reason: "bwrap is missing", sandbox_network: true },
  });
  const browser = await launchChromium();
  try {
    const { page, errors } = await openPage(browser, 1280);
    await page.goto(server.url);
    await page.waitForSelector("text=read-only view");
    await waitForSeq(page, 1);
    await page.waitForSelector('[data-sandbox="none"]:has-text("workbench unconfined")');
    assert.equal(
      await page.getAttribute('[data-sandbox="none"] .badge', "title"),
      "bwrap is missing",
    );
    await typeAndSend(page, "a viewer may not send");
    await page.waitForSelector("text=this connection is read-only");
    assert.equal(host.admits.length, 0);
    await screenshot(page, "operator", "05-read-only-unconfined");
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    await server.stop();
  }
  await scene(1280, async ({ server, page }) => {
    await page.goto(server.pageUrl);
    await page.waitForSelector('[data-sandbox="bwrap"]:has-text("sandboxed · no network")');
  });
});

/** Controls without an accessible name: no label, no `aria-label`, no text. */
async function unlabelledControls(page: Page): Promise<string[]> {
  return await page.evaluate(`
    [...document.querySelectorAll("button, input, textarea, select, a[href], summary")]
      .filter((el) => {
        const label = el.id ? document.querySelector('label[for="' + el.id + '"]') : null;
        const name = el.getAttribute("aria-label") ?? label?.textContent ?? el.textContent ?? "";
        return name.trim() === "";
      })
      .map((el) => el.outerHTML.slice(0, 80))
  `) as string[];
}

for (const width of [1280, 390]) {
  Deno.test(`the page at ${width} px has labelled, keyboard-reachable controls and no sideways scroll`, async () => {
    await scene(width, async ({ host, server, page }) => {
      await page.goto(`${server.url}/#token=${TEST_TOKEN}`);
      // On a phone the operator panel sits behind the menu.
      await page.waitForSelector("text=operator role granted", { state: "attached" });
      await page.waitForSelector("text=connected as operator");
      // The first Tab reaches the skip link, and following it lands in the composer.
      await page.keyboard.press("Tab");
      assert.equal(
        await page.evaluate("document.activeElement?.textContent"),
        "Skip to the message box",
      );
      await page.keyboard.press("Enter");
      await page.keyboard.type("typed via keyboard only");
      await page.keyboard.press("Enter");
      await waitForSeq(page, 1);
      assert.equal(host.admits[0].input.text, "typed via keyboard only");
      playTurn(host, String(host.sessions.get("default")![0].data.input_id));
      await waitForSeq(page, host.headSeq("default"));
      assert.deepEqual(await unlabelledControls(page), []);
      const overflow = await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth",
      );
      assert.equal(overflow, 0, "the page scrolls sideways");
      // Every state badge carries words, not colour alone.
      const bare = await page.$$eval(
        ".badge",
        (nodes) =>
          nodes.filter((n) => (n.textContent ?? "").replace(/[◷▶✓✕!◐•\s]/g, "") === "").length,
      );
      assert.equal(bare, 0);
      await screenshot(page, "layout", "01-full-turn");
    });
  });
}

Deno.test("the page serves only local files and a strict content security policy", async () => {
  const html = await Deno.readTextFile(join(UI_DIR, "index.html"));
  assert.match(html, /script-src 'self'/);
  assert.match(html, /connect-src 'self'/);
  await scene(1280, async ({ server, page }) => {
    const requests: string[] = [];
    page.on("request", (request) => requests.push(request.url()));
    await page.goto(server.pageUrl);
    await page.waitForSelector("text=connected as operator");
    assert.ok(requests.length >= 3);
    assert.deepEqual(requests.filter((url) => !url.startsWith(server.url)), []);
  });
});
