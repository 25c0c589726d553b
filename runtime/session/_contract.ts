/**
 * The contract message the model reads first in every request: how it acts, how it speaks,
 * how it waits, where its tools are, and which skills its kernel generation offers. A
 * maintenance turn also carries the `maintenance` skill's body.
 *
 * @module
 */

import type { InputRecord } from "../../store/tables/inputs.ts";
import { SPOOL_ABOVE_CHARS } from "./_cell_output.ts";

/** The conversation of maintenance inputs (`klbr maintain`, and a schedule's). */
export const MAINTENANCE_CONVERSATION = "system:maintenance";

/** The skill a maintenance turn loads by default. */
export const MAINTENANCE_SKILL = "maintenance";

/** The skill set the contract names: the generation's revision, ids and bodies. */
export interface OfferedSkills {
  revision: string;
  bodies: Record<string, string>;
}

/** What the contract message says besides the workspace. */
export interface ContractOptions {
  /** The skills the session's kernel generation offers; unknown before the first load. */
  skills?: OfferedSkills | null;
  /** True for a maintenance turn: the `maintenance` skill's body is loaded into the message. */
  maintenance?: boolean;
  /** The limits the model works within. */
  limits?: ContractLimits;
}

/** The limits the contract states, as configured. */
export interface ContractLimits {
  /** Model requests one turn may make (the route's `max_steps`). */
  maxSteps: number;
  /** How long one cell may run, in ms. */
  cellTimeoutMs: number;
}

/** The limits a contract states when the caller names none. */
const DEFAULT_LIMITS: ContractLimits = { maxSteps: 50, cellTimeoutMs: 300_000 };

/**
 * {@linkcode SPOOL_ABOVE_CHARS} as the contract writes it ("8,192"), grouped by hand: the first
 * `toLocaleString` of a process loads ICU's data, about 18 ms of the daemon's start.
 */
const RESULT_CHARS_TEXT = String(SPOOL_ABOVE_CHARS).replace(/\B(?=(\d{3})+$)/g, ",");

/**
 * Whether an input asks for a maintenance turn: it belongs to
 * {@linkcode MAINTENANCE_CONVERSATION}.
 */
export function isMaintenanceInput(input: Pick<InputRecord, "conversationId">): boolean {
  return input.conversationId === MAINTENANCE_CONVERSATION;
}

/**
 * The system message for a session whose workspace is `workspace`: what the model needs to act,
 * and nothing it cannot use. It depends only on the workspace, the generation's skills and the
 * configured limits, so it is byte-stable from turn to turn and a provider's prefix cache holds;
 * a maintenance turn adds the skill's body for that turn only.
 *
 * @example
 * ```ts
 * const system = () => contractMessage("/home/me/project", { skills: { revision, bodies } });
 * ```
 */
export function contractMessage(workspace: string, options: ContractOptions = {}): string {
  const skills = options.skills ?? null;
  const limits = options.limits ?? DEFAULT_LIMITS;
  const lines = [
    "You are the klbr agent. You act only through the `python` tool: each call runs one cell",
    "in your persistent workbench. Top-level await works; variables last until the workbench",
    "restarts, and a result tells you when it did.",
    "Your plain text is a private scratchpad that no person sees. Speak only with",
    "`await local.send(text)`: one call is one message to the conversation. Inputs from Discord",
    "(conversation `discord:<channel id>`) are answered with `await discord.send(text)`.",
    "A send repeated with the same text in one turn is delivered once (the repeat returns the",
    'first receipt, marked duplicate); `key="…"` makes a send unique across turns too.',
    "klbr's functions below are coroutines: await every one (an un-awaited call does nothing",
    "and fails the cell). Each result lists what its cell did (sends, timers, jobs): read it",
    "before you run a cell again.",
    "When you have nothing more to do, call `wait()` in a cell: it ends the cell and the turn.",
    "The next input wakes you, or `wait(reason, seconds=…)`, a timer (help(timers)), or a job",
    "you started with `await jobs.start(code)` (help(jobs)). `await llm(prompt)` and",
    "`await agent(task)` are child model calls under your budget (help(llm)).",
    `Workspace ${workspace}, in every cell: \`await open_file(path)\` (.read(), .write(text)),`,
    "`await ls(path)`, `await search(pattern)`, `await delete(path)`,",
    "`await run(argv, timeout=60)` (a program and its arguments, not a shell).",
    'Older items leave your context as it grows: `await history.search("words")` finds them',
    "and `await history.read(id)` reads one. Output past its excerpt is kept whole:",
    "`await read_artifact(id)` reads it. `display(png_bytes)` or",
    '`display(html, mime="text/html")` shows an image or a table to the owner in the page.',
    `Limits: ${limits.maxSteps} model steps a turn (a result says when the turn ends), a cell`,
    `runs at most ${
      Math.round(limits.cellTimeoutMs / 1000)
    } s, a result shows about ${RESULT_CHARS_TEXT} characters of each output.`,
    ...skillLines(skills),
  ];
  if (options.maintenance) lines.push("", ...maintenanceSection(skills));
  return lines.join("\n");
}

/** What the contract says of skills: only those the generation offers, and only when known. */
function skillLines(skills: OfferedSkills | null): string[] {
  if (skills === null) {
    return ["`import klbr.skills as skills; dir(skills)` lists your skills; help(skills.<id>)."];
  }
  const ids = Object.keys(skills.bodies).sort();
  if (ids.length === 0) return ["No skills are installed (`import klbr.skills as skills`)."];
  const has = (id: string) => ids.includes(id);
  return [
    `Skills (revision ${skills.revision.slice(0, 12)}): ${ids.join(", ")}; help(skills.<id>)`,
    "reads one (`import klbr.skills as skills`).",
    ...(has(MAINTENANCE_SKILL)
      ? ["`behavior` and `hooks` edit your own policy hooks (help(skills.maintenance))."]
      : []),
    ...(has("code") ? ["`code` outlines, reads and patches source (help(skills.code))."] : []),
  ];
}

function maintenanceSection(skills: OfferedSkills | null): string[] {
  const body = skills?.bodies[MAINTENANCE_SKILL];
  if (body === undefined) {
    return [
      "This is a maintenance turn, but this kernel generation does not offer the",
      "`maintenance` skill: check skills.refused and skills.roots before changing anything.",
    ];
  }
  return [
    `This is a maintenance turn. The \`${MAINTENANCE_SKILL}\` skill is loaded (skills revision ${
      skills!.revision.slice(0, 12)
    }):`,
    "",
    body.trim(),
  ];
}
