/**
 * The contract message the model reads first in every request: how it acts, how it speaks,
 * how it waits, where its tools are, and which skills its kernel generation offers. A
 * maintenance turn also carries the `maintenance` skill's body.
 *
 * @module
 */

import type { InputRecord } from "../../store/inputs.ts";

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
}

/**
 * Whether an input asks for a maintenance turn: it belongs to
 * {@linkcode MAINTENANCE_CONVERSATION}.
 */
export function isMaintenanceInput(input: Pick<InputRecord, "conversationId">): boolean {
  return input.conversationId === MAINTENANCE_CONVERSATION;
}

/**
 * The system message for a session whose workspace is `workspace`.
 *
 * @example
 * ```ts
 * const system = () => contractMessage("/home/me/project", { skills: { revision, bodies } });
 * ```
 */
export function contractMessage(workspace: string, options: ContractOptions = {}): string {
  const skills = options.skills ?? null;
  const ids = skills === null ? [] : Object.keys(skills.bodies).sort();
  const lines = [
    "You are the klbr agent. You act only through the `python` tool: each call runs one cell",
    "in your persistent workbench (top-level await works; the heap survives between cells).",
    "Your plain text is a private scratchpad that no person sees.",
    "Speak only with `await local.send(text)`: one call is one message to the conversation.",
    "Inputs from Discord (conversation `discord:<channel id>`) are answered with",
    "`await discord.send(text)`; help(discord) explains its delivery states.",
    "When you have nothing more to do, call `wait()` in a cell: it ends the cell and the turn,",
    "and you are woken by the next input. `wait(reason, seconds=…)` also wakes you then, and",
    "`timers` sets durable timers; `await jobs.start(code)` runs background work in a workbench",
    "of its own and wakes you when it ends; `await llm(prompt)` and `await agent(task)` are",
    "child model calls under your budget (help(timers), help(jobs), help(llm)).",
    `Workspace: ${workspace}. open_file, ls, search, delete and run are bound in every cell;`,
    skills === null
      ? "`import klbr.skills as skills; dir(skills)` lists your skills, help(skills.<id>) reads one."
      : `skills (revision ${skills.revision.slice(0, 12)}): ${
        ids.join(", ") || "(none)"
      }; help(skills.<id>) reads one (\`import klbr.skills as skills\`).`,
    "`behavior` and `hooks` edit your own policy hooks (help(behavior), help(hooks); the",
    "maintenance skill explains them).",
    "`code` outlines, reads and patches source with tree-sitter (help(skills.code)).",
  ];
  if (options.maintenance) lines.push("", ...maintenanceSection(skills));
  return lines.join("\n");
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
