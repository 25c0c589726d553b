/**
 * The operator commands of the CLI (`status`, `reset`, `compact`, `drain`, `stop`, `resume`,
 * `activate`, `jobs`, `cancel-job`, `cancel-cell`, `rollback`, `maintain`, `candidates`, `trace`,
 * `frames`, `context`, `search`, `budget`): a native client of the daemon's v2 socket,
 * authorised by the token in the state directory. Each prints its result in words (`--json`:
 * the result as JSON, one line).
 *
 * @module
 */

import {
  DEFAULT_HOST,
  DEFAULT_OPERATOR_TIMEOUT_MS,
  HealthReport,
  KlbrError,
  type ServerMessage,
} from "../core/mod.ts";
import {
  actionText,
  candidatesText,
  contextText,
  framesText,
  searchText,
  statusText,
  traceText,
} from "./_text.ts";
import { findDaemon, type ListenAddress, ownOrigin, readOperatorToken } from "../lanes/mod.ts";

/** Options for {@linkcode runOperatorCommand}. */
export interface OperatorCliOptions {
  stateDir: string;
  /** The daemon's port; the one `<state>/daemon.json` names otherwise. */
  port?: number;
  /** Print the reply as JSON. */
  json: boolean;
  /** How long to wait for the reply, in ms. @default {DEFAULT_OPERATOR_TIMEOUT_MS} */
  timeoutMs?: number;
  /** `budget --reset`: start the hourly windows again now. */
  reset?: boolean;
  /** `budget --raise N`, as typed: the hourly request limit for the daemon's run. */
  raise?: string;
}

/**
 * Sends one operator command and prints the reply; resolves with the exit code.
 *
 * @example
 * ```ts
 * await runOperatorCommand("status", [], { stateDir: ".klbr", json: true });
 * ```
 * @throws {KlbrError} `usage` for a malformed epoch; `no_daemon` when no `--port` is given
 * and no daemon runs on the state directory.
 */
export async function runOperatorCommand(
  command: string,
  args: string[],
  options: OperatorCliOptions,
): Promise<number> {
  const message = buildMessage(command, args, options);
  const address = await daemonAddress(options.stateDir, options.port);
  const token = await readOperatorToken(options.stateDir);
  const timeoutMs = options.timeoutMs ?? DEFAULT_OPERATOR_TIMEOUT_MS;
  const reply = await exchange(address, message, { token, timeoutMs });
  if (reply.kind === "error") {
    console.error(options.json ? JSON.stringify(reply) : `klbr ${command}: ${reply.message}`);
    return 1;
  }
  const result = reply.kind === "op.result" ? reply.result : reply;
  if (options.json) console.log(JSON.stringify(result));
  else console.log(await resultText(command, result, address));
  return 0;
}

/** The commands whose result has words of its own; any other's is {@linkcode actionText}. */
const RESULT_TEXT = new Map<string, (result: Record<string, unknown>) => string>([
  ["jobs", formatJobs],
  ["budget", formatBudget],
  ["candidates", candidatesText],
  ["trace", traceText],
  ["frames", framesText],
  ["context", contextText],
  ["search", searchText],
]);

/** A command's result in words; `status` adds `/health`'s verdict and reasons. */
async function resultText(
  command: string,
  result: Record<string, unknown>,
  address: ListenAddress,
): Promise<string> {
  if (command === "status") return statusText(result, await readHealth(address));
  return RESULT_TEXT.get(command)?.(result) ?? actionText(command, result);
}

/** The daemon's `/health`, or undefined when it cannot be read as the schema says. */
async function readHealth(address: ListenAddress): Promise<HealthReport | undefined> {
  try {
    const response = await fetch(`${ownOrigin(address)}/health`);
    const parsed = HealthReport.safeParse(await response.json());
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** `klbr jobs` for a person: one line per job and per timer, then the counts and budgets. */
function formatJobs(result: Record<string, unknown>): string {
  const jobs = (result.jobs ?? []) as Record<string, unknown>[];
  const timers = (result.timers ?? []) as Record<string, unknown>[];
  const budget = (result.budget ?? {}) as { over_budget?: Record<string, unknown>[] };
  const lines = [
    `jobs of ${result.session}: ${result.running_jobs} running, ${result.pending_jobs} pending`,
    ...jobs.map((j) =>
      `  ${j.job_id}  ${String(j.state).padEnd(11)} ${j.kind} "${j.name}"  ${j.cause}  ` +
      `(${j.requests_used} requests, ${j.tokens_used} tokens)`
    ),
    `timers: ${result.pending_timers} pending, ${result.due_timers} due`,
    ...timers.map((t) => `  ${t.timer_id}  ${String(t.state).padEnd(9)} due ${t.due}  ${t.note}`),
    ...(budget.over_budget ?? []).map((e) =>
      `over budget: ${e.what} ${e.used} of ${e.limit}, frees at ${e.until}`
    ),
  ];
  return lines.join("\n");
}

/** `klbr budget` for a person: what was lifted, the hour's use of each limit, what is spent. */
function formatBudget(result: Record<string, unknown>): string {
  const b = result.budget as Record<string, Record<string, number> & Record<string, unknown>>;
  const spent = (b.over_budget ?? []) as unknown as Record<string, unknown>[];
  const share = `children may use ${b.child_share_percent}%`;
  return [
    `budget: ${result.message ?? "the daemon's hourly limits"}`,
    `  model requests: ${b.model_requests_hour.used} of ${b.model_requests_hour.limit} this hour` +
    ` (configured ${b.model_requests_hour.configured}; children ${b.child_requests_hour.used} of ` +
    `${b.child_requests_hour.limit}, ${share})`,
    `  tokens: ${b.tokens_hour.used} of ${b.tokens_hour.limit} this hour (children ` +
    `${b.child_tokens_hour.used} of ${b.child_tokens_hour.limit})`,
    ...spent.map((e) =>
      `  spent: ${e.what} ${e.used} of ${e.limit}; ${e.effect} until ${e.until} (in ${e.frees_in_s} s)`
    ),
  ].join("\n");
}

/**
 * Reads `budget --raise N`: a whole number of requests above 0.
 *
 * @throws {KlbrError} `usage` for anything else.
 */
function raiseOf(value: string): number {
  const n = /^\d{1,9}$/.test(value) ? Number(value) : NaN;
  if (n > 0) return n;
  throw new KlbrError(
    "usage",
    `cannot run budget: --raise needs a whole number of requests above 0 (got ${
      JSON.stringify(value)
    })`,
  );
}

/**
 * The message of an operator command; `main.ts` has checked how many arguments it got.
 *
 * @throws {KlbrError} `usage` for an epoch that is not a whole number, or a bad `--raise`.
 */
function buildMessage(
  command: string,
  args: string[],
  options: Pick<OperatorCliOptions, "reset" | "raise">,
): Record<string, unknown> {
  switch (command) {
    case "jobs":
      return { kind: "op.jobs", session: args[0] ?? "default" };
    case "cancel-job":
      return { kind: "op.cancel_job", job: args[0] };
    case "cancel-cell":
      return { kind: "op.cancel_cell", cell: args[0], session: args[1] ?? "default" };
    case "activate": {
      const epoch = Number(args[1]);
      if (!/^\d+$/.test(args[1] ?? "") || !Number.isSafeInteger(epoch)) {
        throw new KlbrError(
          "usage",
          `cannot run activate: epoch must be a whole number (got ${args[1]})`,
        );
      }
      return { kind: "op.activate", session: args[0], epoch, release: args[2] };
    }
    case "maintain":
      return {
        kind: "op.maintain",
        session: args[0],
        ...(args.length > 1 ? { reason: args.slice(1).join(" ") } : {}),
      };
    case "trace":
      return { kind: "op.trace", session: args[0], target: args[1] };
    case "search":
      return { kind: "op.history_search", session: args[0], query: args.slice(1).join(" ") };
    case "budget":
      return {
        kind: "op.budget",
        session: args[0] ?? "default",
        ...(options.reset ? { reset: true } : {}),
        ...(options.raise === undefined ? {} : { raise: raiseOf(options.raise) }),
      };
    default:
      return { kind: `op.${command}`, session: args[0] };
  }
}

/**
 * Where the daemon of `stateDir` listens: `--port` on the default host when given, else what
 * its address file says.
 *
 * @throws {KlbrError} `no_daemon` when no daemon runs on `stateDir`.
 * @example
 * ```ts
 * const { host, port } = await daemonAddress(".klbr", undefined);
 * ```
 */
export async function daemonAddress(
  stateDir: string,
  port: number | undefined,
): Promise<ListenAddress> {
  if (port !== undefined) return { host: DEFAULT_HOST, port };
  const found = await findDaemon(stateDir);
  return { host: found.host, port: found.port };
}

/**
 * Says hello with the token (asking for no catch-up), sends one message and resolves with
 * its `op.result` or the first `error`.
 *
 * @throws {KlbrError} `no_daemon` when nothing answers at the address ("an operator command
 * given a --port nothing listens on…" in `tests/runtime/setup/first_hour.test.ts`); `not_found`
 * when the daemon closes the connection (or dies, dropping it) before it answers (proven by "an
 * operator command whose daemon closes the connection before answering fails at once, naming the
 * close" and "… whose daemon dies after reading it says the command may have taken effect…" in
 * `tests/runtime/operator/cli.test.ts`); `worker_timeout` after `timeoutMs` without a reply
 * (once sent, saying the command may still run: "an operator command the daemon is still
 * running when the reply timeout ends says so…").
 */
export async function exchange(
  address: ListenAddress,
  message: Record<string, unknown>,
  options: { token: string; timeoutMs: number },
): Promise<ServerMessage> {
  const { token, timeoutMs } = options;
  const url = `${ownOrigin(address).replace(/^http/, "ws")}/v2`;
  const ws = new WebSocket(url);
  const request = `cli-${crypto.randomUUID()}`;
  try {
    return await new Promise<ServerMessage>((resolve, reject) => {
      let opened = false;
      // Once sent, a command may still be running (a drain waits for the turn): say so.
      const timedOut = () =>
        opened
          ? `cannot run ${message.kind}: the daemon gave no answer within ${timeoutMs} ms; it may still be running it: deno task klbr status says what took effect`
          : `cannot reach the daemon: no reply within ${timeoutMs} ms`;
      const timer = setTimeout(
        () => reject(new KlbrError("worker_timeout", timedOut())),
        timeoutMs,
      );
      ws.onopen = () => {
        opened = true;
        ws.send(JSON.stringify({ kind: "hello", since: "head", token, client: "cli" }));
        ws.send(JSON.stringify({ ...message, request }));
      };
      ws.onerror = () => {
        // Once the command is sent, a daemon that died drops the connection: an error, then the
        // close that says so. The command may have taken effect; it did reach a daemon.
        if (opened) return;
        clearTimeout(timer);
        // Nothing listens there: no daemon runs, a mistake of the command line as the docs say.
        reject(
          new KlbrError(
            "no_daemon",
            `cannot reach the daemon: nothing answers at ${url}; start it with deno task serve, or give the --port it listens on`,
          ),
        );
      };
      // A daemon that drains or dies mid-command closes the socket without a reply: say so
      // now, not when the reply timeout ends. (After a reply this settles nothing.)
      ws.onclose = (event) => {
        clearTimeout(timer);
        // A connection dropped without a close frame has no code of its own (1006, or 0).
        const how = event.code === 0 || event.code === 1006
          ? "the connection dropped"
          : `close ${event.code}${event.reason ? `: ${event.reason}` : ""}`;
        reject(
          new KlbrError(
            "not_found",
            `cannot run ${message.kind}: the daemon closed the connection before it answered (${how}); deno task klbr status says whether it still runs and what took effect`,
          ),
        );
      };
      ws.onmessage = (event) => {
        const reply = JSON.parse(String(event.data)) as ServerMessage;
        if (
          (reply.kind === "op.result" && reply.request === request) ||
          (reply.kind === "error")
        ) {
          clearTimeout(timer);
          resolve(reply);
        }
      };
    });
  } finally {
    ws.close();
  }
}
