/**
 * What the behaviour tests against the real daemon share: a daemon with the fake model,
 * waiting for records, and reading operator results.
 *
 * @module
 */

import { type FakeOpenAI, startFakeOpenAI } from "../../fakes/openai_server.ts";
import { join } from "node:path";
import { REPO_ROOT, startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import type { LaneClient } from "../../_helpers/lane_client.ts";
import type { LaneRecord, ServerMessage } from "../../../runtime/core/mod.ts";

// Records and results are JSON; the tests read their fields directly.
// deno-lint-ignore no-explicit-any
export type Json = any;

/** The records of `type` a client has received so far. */
export const records = (client: LaneClient, type?: string): LaneRecord[] =>
  client.messages.filter((m): m is LaneRecord =>
    m.kind === "record" && (type === undefined || m.type === type)
  );

/** The first record (past or future) of `type` matching `extra`. */
export const waitRecord = (
  client: LaneClient,
  type: string,
  extra: (r: LaneRecord) => boolean = () => true,
): Promise<LaneRecord> =>
  client.waitFor<LaneRecord>((m) => m.kind === "record" && m.type === type && extra(m), 30_000);

/** The `result` of an operator reply; fails on an error reply. */
export function opResult(reply: ServerMessage): Json {
  if (reply.kind !== "op.result") {
    throw new Error(`expected op.result, got ${JSON.stringify(reply)}`);
  }
  return reply.result;
}

/** A cell's stdout from its `cell.finished` record. */
export const stdoutOf = (record: LaneRecord): string =>
  String((record.data.result as { stdout?: string }).stdout ?? "");

/** Runs `fn` against a fresh daemon whose model is a fake that answers `wait()` by default. */
export async function withModelDaemon(
  fn: (parts: { fake: FakeOpenAI; daemon: TestDaemon }) => Promise<void>,
  options: { env?: Record<string, string> } = {},
): Promise<void> {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url, ...options });
  try {
    await fn({ fake, daemon });
  } finally {
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
}

/** Runs the operator CLI (`main.ts <args> --json`) against a daemon, as a user would. */
export async function klbr(
  daemon: TestDaemon,
  args: string[],
): Promise<{ code: number; json: Json; stderr: string }> {
  const config = JSON.parse(await Deno.readTextFile(join(REPO_ROOT, "deno.json")));
  const flags = (config.tasks.klbr as string).split(/\s+/).filter((p) => p.startsWith("--allow-"));
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...flags,
      join(REPO_ROOT, "main.ts"),
      ...args,
      "--json",
      "--state",
      daemon.stateDir,
      "--port",
      String(daemon.port),
    ],
    cwd: REPO_ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  return {
    code: out.code,
    json: stdout.trim() === "" ? null : JSON.parse(stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}
