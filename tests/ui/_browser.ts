/**
 * Headless Chromium for the UI tests: Debian's `/usr/bin/chromium` driven by `playwright-core`
 * (never a downloaded browser), screenshots under `tests/.artifacts/ui/` (git-ignored), and
 * the check that a page shows each durable record exactly once.
 *
 * @module
 */

import assert from "node:assert/strict";
import fs from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";

/** The repository root. */
export const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Where screenshots go. */
export const ARTIFACTS = join(REPO, "tests", ".artifacts", "ui");

/** Debian's Chromium. */
export const CHROMIUM = "/usr/bin/chromium";

const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
];

let shimmed = false;

/**
 * Launches headless Chromium.
 *
 * @throws {Error} naming the missing browser when `/usr/bin/chromium` does not exist
 *   (`.ci/run` installs Debian's `chromium`).
 */
export async function launchChromium(): Promise<Browser> {
  try {
    await Deno.stat(CHROMIUM);
  } catch {
    throw new Error(
      `cannot run the browser tests: ${CHROMIUM} does not exist (install Debian's chromium)`,
    );
  }
  if (!shimmed) {
    // playwright-core probes WSL paths under /proc/sys at load; Deno refuses those reads
    // without --allow-all, and the probe only ever wants a boolean.
    const existsSync = fs.existsSync;
    (fs as { existsSync: typeof fs.existsSync }).existsSync = (path) => {
      try {
        return existsSync(path);
      } catch {
        return false;
      }
    };
    shimmed = true;
  }
  const { chromium } = await import("playwright-core");
  return await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}

/** Opens a page of the given width that fails the test on any uncaught page error. */
export async function openPage(
  browser: Browser,
  width: number,
): Promise<{ page: Page; errors: string[] }> {
  const context = await browser.newContext({
    viewport: { width, height: width < 600 ? 844 : 800 },
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.setDefaultTimeout(15_000);
  return { page, errors };
}

/** Writes `tests/.artifacts/ui/<scenario>/<step>.png`. */
export async function screenshot(page: Page, scenario: string, step: string): Promise<void> {
  const dir = join(ARTIFACTS, scenario);
  await Deno.mkdir(dir, { recursive: true });
  const width = page.viewportSize()?.width ?? 0;
  await page.screenshot({ path: join(dir, `${step}-${width}.png`), fullPage: true });
}

/** Every `data-seq` the page renders, in document order. */
export function renderedSeqs(page: Page): Promise<number[]> {
  return page.$$eval("[data-seq]", (nodes) => nodes.map((n) => Number(n.getAttribute("data-seq"))));
}

/** Waits until the page has rendered record `seq`. */
export async function waitForSeq(page: Page, seq: number): Promise<void> {
  await page.waitForSelector(`[data-seq="${seq}"]`, { state: "attached" });
}

/** Asserts that the page shows records 1…`head`, each exactly once, and nothing else. */
export async function assertEachRecordOnce(page: Page, head: number): Promise<void> {
  const seqs = await renderedSeqs(page);
  const counts = new Map<number, number>();
  for (const seq of seqs) counts.set(seq, (counts.get(seq) ?? 0) + 1);
  const twice = [...counts].filter(([, n]) => n > 1).map(([seq]) => seq);
  assert.deepEqual(twice, [], `records shown more than once: ${twice.join(", ")}`);
  assert.deepEqual(
    [...counts.keys()].sort((a, b) => a - b),
    Array.from({ length: head }, (_, i) => i + 1),
  );
}

/** Opens every turn folded in the timeline, so its drafts and cells can be clicked. */
export async function openTurns(page: Page): Promise<void> {
  await page.$$eval("#timeline details.turn", (nodes) => {
    for (const node of nodes) (node as unknown as { open: boolean }).open = true;
  });
}

/** Shows the timeline of the conversation named `label`, through the menu on a phone. */
export async function pickConversation(page: Page, label: string): Promise<void> {
  if (await page.locator(".menu-button").isVisible()) await page.click(".menu-button");
  await page.click(`.conversation-pick:has-text(${JSON.stringify(label)})`);
  await page.waitForSelector(`#h-timeline:has-text(${JSON.stringify(label)})`);
}

const AXE = await Deno.readTextFile(join(REPO, "node_modules", "axe-core", "axe.min.js"));

/**
 * Runs axe-core (from the local package, no CDN) and returns serious and critical violations.
 * Evaluated over the debugging protocol, so the page's CSP does not apply to the checker.
 */
export async function seriousViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE);
  const found = await page.evaluate(`
    axe.run(document, { resultTypes: ["violations"] }).then((result) => result.violations)
  `) as { id: string; impact: string; nodes: { target: string[] }[] }[];
  return found
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.impact} ${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}

/** Types `text` into the composer and sends it with Enter, as a person does. */
export async function typeAndSend(page: Page, text: string): Promise<void> {
  await page.focus("#composer-input");
  await page.keyboard.type(text);
  await page.keyboard.press("Enter");
}
