/**
 * Figure 12 — the page opens a long session: how soon after its socket opens a page in
 * headless Chromium shows the session's newest message, and the page's JavaScript heap then,
 * beside the wire's own time to deliver what the page asked for (a native client's `hello`
 * from the same socket, the same way, until `replayed`).
 *
 * Chromium is Debian's `/usr/bin/chromium`, driven over the DevTools protocol directly (a
 * WebSocket, no browser library): a script added before the page's own marks the moment the
 * newest message's element appears; the page marks `klbr:socket-open` when its socket opens.
 *
 * @module
 */

import { join } from "node:path";
import { KlbrError } from "../runtime/core/mod.ts";
import { openLane } from "./lane_driver.ts";
import { below, type BenchRow, makeRow } from "./row.ts";

/** Debian's Chromium. */
const CHROMIUM = "/usr/bin/chromium";

/** What the page showed, and when. */
export interface PageOpen {
  /** ms from the page's socket opening to the newest message in the DOM. */
  shownMs: number;
  /** The page's used JavaScript heap then, after a garbage collection, in bytes. */
  heapBytes: number;
  /** Elements in the page's DOM then. */
  domNodes: number;
}

/** One DevTools session over a WebSocket: commands answered by id. */
class Devtools {
  #ws: WebSocket;
  #next = 1;
  #waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.onmessage = (event) => this.#receive(String(event.data));
  }

  static open(url: string): Promise<Devtools> {
    const ws = new WebSocket(url);
    return new Promise((resolve, reject) => {
      ws.onopen = () => resolve(new Devtools(ws));
      ws.onerror = () => reject(new KlbrError("internal", `cannot reach DevTools (got ${url})`));
    });
  }

  #receive(text: string): void {
    const message = JSON.parse(text) as { id?: number; result?: unknown; error?: unknown };
    if (message.id === undefined) return;
    const waiter = this.#waiting.get(message.id);
    this.#waiting.delete(message.id);
    if (message.error !== undefined) {
      waiter?.reject(new Error(`DevTools: ${JSON.stringify(message.error)}`));
    } else waiter?.resolve(message.result);
  }

  send<T>(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<T> {
    const id = this.#next++;
    this.#ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
    });
  }

  close(): void {
    this.#ws.close();
  }
}

/** Starts headless Chromium with a DevTools port; resolves with its browser endpoint. */
async function startChromium(
  profile: string,
): Promise<{ child: Deno.ChildProcess; endpoint: string }> {
  const child = new Deno.Command(CHROMIUM, {
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--remote-debugging-port=0",
      `--user-data-dir=${profile}`,
      "--window-size=1280,800",
      "about:blank",
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const reader = child.stderr.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    seen += decoder.decode(value, { stream: true });
    const match = seen.match(/DevTools listening on (ws:\/\/\S+)/);
    if (match !== null) {
      // Keep draining stderr so Chromium never blocks on a full pipe.
      (async () => {
        while (!(await reader.read()).done) { /* drain */ }
      })().catch(() => {});
      return { child, endpoint: match[1] };
    }
  }
  child.kill("SIGKILL");
  throw new KlbrError("internal", `cannot start chromium: no DevTools endpoint (got ${seen})`);
}

/**
 * The script run before the page's: notes when the element of `seq` first appears (for seq 0,
 * an empty session: when the page says it is connected and caught up).
 */
function watcher(seq: number): string {
  return `(() => {
    const ready = ${seq} === 0
      ? () => {
        const text = document.querySelector(".topbar")?.textContent ?? "";
        return text.includes("connected as operator") && !text.includes("catching up");
      }
      : () => document.querySelector('[data-seq="${seq}"]') !== null;
    const note = () => {
      if (window.__klbrShown === undefined && ready()) window.__klbrShown = performance.now();
    };
    new MutationObserver(note).observe(document, {
      childList: true,
      subtree: true,
      characterData: true,
    });
  })();`;
}

/**
 * Opens `url` in headless Chromium at 1280×800, waits (at most `timeoutMs`) until the element
 * of record `head` is in the timeline, and reads the time since the page's socket opened and
 * the page's heap.
 *
 * @throws {KlbrError} `internal` when Chromium cannot start; `worker_timeout` when the record
 *   is not shown in time.
 */
export async function measurePageOpen(
  url: string,
  options: { head: number; scratch: string; timeoutMs?: number },
): Promise<PageOpen> {
  const profile = join(options.scratch, "chromium-profile");
  await Deno.mkdir(profile, { recursive: true });
  const { child, endpoint } = await startChromium(profile);
  let devtools: Devtools | undefined;
  try {
    devtools = await Devtools.open(endpoint);
    const { targetId } = await devtools.send<{ targetId: string }>("Target.createTarget", {
      url: "about:blank",
    });
    const { sessionId } = await devtools.send<{ sessionId: string }>("Target.attachToTarget", {
      targetId,
      flatten: true,
    });
    await devtools.send("Page.enable", {}, sessionId);
    await devtools.send("Runtime.enable", {}, sessionId);
    await devtools.send(
      "Page.addScriptToEvaluateOnNewDocument",
      { source: watcher(options.head) },
      sessionId,
    );
    await devtools.send("Page.navigate", { url }, sessionId);
    const timeoutMs = options.timeoutMs ?? 300_000;
    const deadline = Date.now() + timeoutMs;
    const expression = `(() => {
      const open = performance.getEntriesByName("klbr:socket-open")[0];
      return window.__klbrShown === undefined || open === undefined
        ? null
        : window.__klbrShown - open.startTime;
    })()`;
    let shownMs: number | null = null;
    while (shownMs === null) {
      if (Date.now() > deadline) {
        throw new KlbrError(
          "worker_timeout",
          `cannot measure the page: record ${options.head} not shown within ${timeoutMs} ms (got none)`,
        );
      }
      const answer = await devtools.send<{ result: { value: number | null } }>(
        "Runtime.evaluate",
        { expression, returnByValue: true },
        sessionId,
      );
      shownMs = answer.result.value;
      if (shownMs === null) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await devtools.send("HeapProfiler.collectGarbage", {}, sessionId);
    const heap = await devtools.send<{ usedSize: number }>("Runtime.getHeapUsage", {}, sessionId);
    const nodes = await devtools.send<{ result: { value: number } }>(
      "Runtime.evaluate",
      { expression: "document.getElementsByTagName('*').length", returnByValue: true },
      sessionId,
    );
    return { shownMs, heapBytes: heap.usedSize, domNodes: nodes.result.value };
  } finally {
    await stopChromium(child, devtools);
  }
}

/**
 * Stops Chromium with the DevTools `Browser.close`, which lets it remove its singleton folder
 * from the temp directory (a signal leaves `org.chromium.Chromium.*` behind); SIGKILL when it
 * has not exited after 5 s, or when there is no DevTools connection.
 */
async function stopChromium(child: Deno.ChildProcess, devtools?: Devtools): Promise<void> {
  const kill = () => {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  };
  // Chromium may exit before it answers: the answer is not waited for.
  if (devtools === undefined) kill();
  else void devtools.send("Browser.close", {}).catch(() => {});
  const timer = setTimeout(kill, 5_000);
  await child.status;
  clearTimeout(timer);
  devtools?.close();
}

/** What the page asks for at open, measured on the wire alone. */
export async function measureWireOpen(
  options: { port: number; token: string; page: number },
): Promise<number> {
  const { lane, replay } = await openLane({
    port: options.port,
    token: options.token,
    client: "bench-page-wire",
    page: options.page,
    batch: true,
  });
  lane.close();
  return replay.elapsedMs;
}

/**
 * Rows 12a (time to the newest message) and 12b (page heap, against the same page on an
 * empty session) of a page open.
 */
export function pageOpenRows(
  open: PageOpen,
  wireMs: number,
  options: { records: number; page: number; emptyHeapBytes: number },
): BenchRow[] {
  const count = options.records.toLocaleString("en");
  return [
    makeRow({
      id: "12a",
      figure: `page shows the newest message of a ${count}-record session`,
      unit: "ms",
      value: open.shownMs,
      peer: { label: `the wire's delivery of the newest ${options.page} records`, value: wireMs },
      goal: below(1000, "< 1,000 ms"),
      note: `from the page's socket opening; ${open.domNodes} DOM elements then`,
    }),
    makeRow({
      id: "12b",
      figure: `page heap with a ${count}-record session open`,
      unit: "MB",
      value: open.heapBytes / 1e6,
      peer: { label: "the same page on an empty session", value: options.emptyHeapBytes / 1e6 },
      goal: below(150, "< 150 MB"),
      note: "Chromium Runtime.getHeapUsage after a garbage collection",
    }),
  ];
}
