/**
 * Profiles the daemon's one-step turns (figure 10's `await local.send('done')` then `wait()`,
 * instant model): the daemon runs under `--inspect`, V8's sampling profiler records `turns`
 * turns through the Chrome DevTools protocol, and the self time is summed by file and by
 * function. Prints the table `docs/performance.md` quotes. Not part of `deno task bench`; run:
 * `deno run --lock=tests/deno.lock -A bench/peers/profile_turn.ts [turns]`.
 *
 * @module
 */

import { startBenchDaemon } from "../daemon.ts";
import { startInstantModel } from "../instant_model.ts";
import { openLane } from "../lane_driver.ts";
import { SEND } from "../agent_loop_rows.ts";

type ProfileNode = {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
};

/** Sends one CDP command on `ws` and resolves with its result. */
function command(ws: WebSocket, id: number, method: string): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const listener = (event: MessageEvent) => {
      const message = JSON.parse(String(event.data));
      if (message.id !== id) return;
      ws.removeEventListener("message", listener);
      resolve(message.result ?? {});
    };
    ws.addEventListener("message", listener);
    ws.send(JSON.stringify({ id, method }));
  });
}

async function main(turns: number): Promise<void> {
  const port = 9_300 + Math.floor(Math.random() * 500);
  const model = startInstantModel(() => ({ code: SEND }));
  const stateDir = await Deno.makeTempDir({ prefix: "klbr-prof-state-" });
  const workspace = await Deno.makeTempDir({ prefix: "klbr-prof-ws-" });
  const daemon = await startBenchDaemon({
    stateDir,
    workspace,
    modelUrl: model.url,
    denoFlags: [`--inspect=127.0.0.1:${port}`],
    extraConfig: "budget {\n    model_requests_per_hour 100000\n}\n",
  });
  try {
    const { lane } = await openLane({ port: daemon.port, token: daemon.token, client: "prof" });
    const ended = () =>
      new Promise<void>((resolve) => lane.onRecord((r) => r.type === "turn.ended" && resolve()));
    for (let i = 0; i < 10; i++) {
      const done = ended();
      await lane.admit(`warm-${i}`, `turn ${i}`);
      await done;
    }
    const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
    const ws = new WebSocket(targets[0].webSocketDebuggerUrl);
    await new Promise((resolve) => (ws.onopen = resolve));
    await command(ws, 1, "Profiler.enable");
    await command(ws, 2, "Profiler.start");
    for (let i = 0; i < turns; i++) {
      const done = ended();
      await lane.admit(`prof-${i}`, `turn ${i}`);
      await done;
    }
    const { profile } = await command(ws, 3, "Profiler.stop") as {
      profile: { nodes: ProfileNode[]; startTime: number; endTime: number };
    };
    ws.close();
    await lane.close();
    report(profile, turns);
  } finally {
    await daemon.stop();
    await model.close();
    await Deno.remove(stateDir, { recursive: true });
    await Deno.remove(workspace, { recursive: true });
  }
}

function report(profile: { nodes: ProfileNode[]; startTime: number; endTime: number }, n: number) {
  const total = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
  const msPerHit = (profile.endTime - profile.startTime) / 1000 / Math.max(1, total);
  const byFile = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    const url = node.callFrame.url.replace(/^.*\/(runtime|store|node_modules)\//, "$1/") ||
      "(native)";
    const fn = `${node.callFrame.functionName || "(anonymous)"} ${url}:${
      node.callFrame.lineNumber + 1
    }`;
    if (node.callFrame.functionName === "(idle)") continue;
    byFile.set(url, (byFile.get(url) ?? 0) + hits);
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + hits);
  }
  const idle = profile.nodes.filter((node) => node.callFrame.functionName === "(idle)")
    .reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
  console.log(
    `${n} one-step turns; ${(total * msPerHit / n).toFixed(2)} ms sampled a turn, ` +
      `${((total - idle) * msPerHit / n).toFixed(2)} ms of it busy`,
  );
  const bySqlCaller = sqliteTimeByCaller(profile.nodes);
  for (
    const [title, map] of [
      ["file", byFile],
      ["function", byFunction],
      ["SQLite call's caller", bySqlCaller],
    ] as const
  ) {
    console.log(`\n| self time by ${title} | ms a turn | share of busy |\n| --- | --- | --- |`);
    const top = [...map].filter(([key]) => !key.startsWith("(idle) ")).sort((a, b) => b[1] - a[1]);
    for (const [key, hits] of top.slice(0, 20)) {
      console.log(
        `| ${key} | ${(hits * msPerHit / n).toFixed(3)} | ${
          (100 * hits / (total - idle)).toFixed(1)
        }% |`,
      );
    }
  }
}

/**
 * Sums the self time of SQLite's native statement calls (`run`, `all`, `get`, `exec`) by the
 * nearest calling function outside `store/store.ts`, so a commit's fsync is charged to what
 * committed and a read to what read.
 */
function sqliteTimeByCaller(nodes: ProfileNode[]): Map<string, number> {
  const parent = new Map<number, ProfileNode>();
  for (const node of nodes) for (const child of node.children ?? []) parent.set(child, node);
  const byCaller = new Map<string, number>();
  for (const node of nodes) {
    const frame = node.callFrame;
    if (frame.url !== "" || !["run", "all", "get", "exec"].includes(frame.functionName)) continue;
    let caller = parent.get(node.id);
    while (
      caller && (caller.callFrame.url === "" || caller.callFrame.url.endsWith("store/store.ts"))
    ) {
      caller = parent.get(caller.id);
    }
    const where = caller
      ? `${caller.callFrame.functionName || "(anonymous)"} ${
        caller.callFrame.url.replace(/^.*\/(runtime|store|node_modules)\//, "$1/")
      }:${caller.callFrame.lineNumber + 1}`
      : "(unknown)";
    const key = `${frame.functionName} ← ${where}`;
    byCaller.set(key, (byCaller.get(key) ?? 0) + (node.hitCount ?? 0));
  }
  return byCaller;
}

if (import.meta.main) {
  await main(Number(Deno.args[0] ?? 100));
  Deno.exit(0);
}
