/**
 * The table of host RPCs in `docs/protocol.md`, written from {@linkcode hostRpcCatalog}: each
 * RPC's name, who may call it, its arguments and reply (from their zod schemas) and its summary.
 * `deno task rpc:docs` rewrites the table between its markers; a test fails when the file and
 * the catalog differ.
 *
 * @module
 */

import { z } from "zod";
import { KlbrError } from "../core/mod.ts";
import type { ProcessRole, RpcDefinition } from "../kernel/mod.ts";
import { hostRpcCatalog } from "./_session_rpc.ts";

/** The line before the generated table in `docs/protocol.md`. */
const RPC_TABLE_BEGIN = "<!-- rpc-table:begin (deno task rpc:docs writes this) -->";
/** The line after it. */
const RPC_TABLE_END = "<!-- rpc-table:end -->";

const CALLERS: Record<ProcessRole, string> = { workbench: "cell", hooks: "hook", job: "job" };

type JsonSchema = {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
};

/** A schema in one short line: `{a, b?}`, `[{a}]`, `{ok, …} or {…}`, or its type. */
function shape(schema: JsonSchema): string {
  const options = schema.anyOf ?? schema.oneOf;
  if (options !== undefined) return options.map(shape).join(" or ");
  if (schema.type === "array" && schema.items !== undefined) return `[${shape(schema.items)}]`;
  if (schema.type === "object" || schema.properties !== undefined) {
    const required = new Set(schema.required ?? []);
    const fields = Object.keys(schema.properties ?? {}).map((key) =>
      required.has(key) ? key : `${key}?`
    );
    return `{${fields.join(", ")}}`;
  }
  return schema.type ?? "any";
}

function describe(schema: z.ZodType, io: "input" | "output"): string {
  const json = z.toJSONSchema(schema, { io, unrepresentable: "any" }) as JsonSchema;
  return `\`${shape(json)}\``;
}

/**
 * The Markdown table of `definitions` (by default every host RPC), one row each.
 *
 * @example
 * ```ts
 * rpcDocsTable().split("\n")[0]; // "| method | callers | arguments | reply | what it does |"
 * ```
 */
export function rpcDocsTable(definitions: RpcDefinition<never>[] = hostRpcCatalog()): string {
  const rows = definitions.map((rpc) => [
    `\`${rpc.name}\``,
    rpc.roles.map((role) => CALLERS[role]).join(", "),
    describe(rpc.args, "input"),
    describe(rpc.reply, "output"),
    rpc.summary.replaceAll("|", "\\|"),
  ]);
  const head = ["method", "callers", "arguments", "reply", "what it does"];
  // Padded as `deno fmt` pads a table, so formatting the document leaves it as written.
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  return [line(head), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

/**
 * `text` (the protocol document) with the table between its markers replaced by `table`.
 *
 * @throws {KlbrError} `invalid_input` when the markers are missing or out of order.
 */
export function withRpcTable(text: string, table: string): string {
  const begin = text.indexOf(RPC_TABLE_BEGIN);
  const end = text.indexOf(RPC_TABLE_END);
  if (begin < 0 || end < begin) {
    throw new KlbrError(
      "invalid_input",
      `cannot write the rpc table: its markers are missing or out of order (got begin ${begin}, end ${end})`,
    );
  }
  return `${text.slice(0, begin + RPC_TABLE_BEGIN.length)}\n\n${table}\n\n${text.slice(end)}`;
}

async function main(): Promise<void> {
  const path = new URL("../../docs/protocol.md", import.meta.url);
  const before = await Deno.readTextFile(path);
  const after = withRpcTable(before, rpcDocsTable());
  if (after === before) {
    console.log("docs/protocol.md: the rpc table is up to date");
    return;
  }
  await Deno.writeTextFile(path, after);
  console.log("docs/protocol.md: the rpc table was rewritten from the registry");
}

if (import.meta.main) await main();
