/**
 * Reads the KDL text of the model configuration into raw route fields with their lines.
 *
 * `_config.ts` validates what this returns. Only the shape of the
 * document is checked here (node names, value counts, duplicates, `extra_options`); every
 * value rule and default lives in the zod schema of `_config.ts`.
 *
 * @module
 */

import { type Node, parse } from "@bgotink/kdl";
import { failAt, lineOf, onlyNode, type RawBlock, readFields, show } from "./_fields.ts";
import { readSettingsNodes, SETTINGS_NODES, type SettingsNode } from "./_settings.ts";

/** The route roles, in the order errors are reported. */
export const ROUTE_NAMES = ["main", "fast", "long"] as const;

/** One route role: `main` (turns), `fast` (hooks, cheap calls) or `long` (compaction). */
export type RouteName = typeof ROUTE_NAMES[number];

/** Request fields only a cache profile may set; `extra_options` naming them loses them. */
export const CACHE_FIELDS = [
  "cache_prompt",
  "cache_control",
  "prompt_cache_key",
  "prompt_cache_retention",
  "prompt_cache_options",
] as const;

/** Request fields the provider owns; `extra_options` naming them is a configuration error. */
const RUNTIME_FIELDS = ["model", "messages", "n"];

/** Request fields a route switch sets, and the switch to use instead of `extra_options`. */
const SWITCH_FIELDS: Record<string, string> = {
  stream: "stream",
  stream_options: "stream_usage",
  tools: "tool_calls",
  tool_choice: "tool_choice",
  max_tokens: "max_tokens",
};

/** What the KDL text declares: the routes by role and the warnings about removed fields. */
export interface RawConfig {
  routes: Partial<Record<RouteName, RawBlock>>;
  /** The `discord` node, when the text declares one. */
  discord?: RawBlock;
  /** The `budget` and `cleanup` nodes the text declares. */
  settings: Partial<Record<SettingsNode, RawBlock>>;
  /** The `sandbox` node; its one optional argument (the mode) is field `mode`. */
  sandbox?: RawBlock;
  /** The `workspace` node: `self_edit`. */
  workspace?: RawBlock;
  /** The `lanes` node: bounds and the read-only view. */
  lanes?: RawBlock;
  warnings: string[];
}

/** The sandbox, workspace and lanes nodes (each at most once), read by `Reader.block`. */
const BLOCK_NODES = ["sandbox", "workspace", "lanes"] as const;

/** The top-level nodes besides `llm`. */
const OTHER_NODES: readonly string[] = ["discord", ...SETTINGS_NODES, ...BLOCK_NODES];

/**
 * Parses KDL text into raw routes.
 *
 * @throws {KlbrError} `invalid_config` for invalid KDL, an unknown node or route name, a
 * route or field given twice, a field with other than one value, or a runtime-owned option.
 */
export function readKdlRoutes(text: string, file: string): RawConfig {
  let nodes: Node[];
  try {
    nodes = parse(text, { storeLocations: true }).nodes;
  } catch (error) {
    const first = error instanceof Error && "flat" in error
      ? [...(error as { flat(): Iterable<Error & { start?: { line: number } }> }).flat()][0]
      : undefined;
    const message = (first ?? error as Error).message;
    return failAt(file, first?.start?.line ?? 1, `invalid KDL (got ${show(message)})`, error);
  }
  const reader = new Reader(file);
  const discordNode = onlyNode(nodes, "discord", file);
  const [sandboxNode, workspaceNode, lanesNode] = BLOCK_NODES.map((name) =>
    onlyNode(nodes, name, file)
  );
  const routes = reader.routes(nodes.filter((node) => !OTHER_NODES.includes(node.getName())));
  const discord = discordNode === undefined ? undefined : reader.discord(discordNode);
  return {
    routes,
    discord,
    settings: readSettingsNodes(nodes, file),
    sandbox: sandboxNode === undefined ? undefined : reader.block("sandbox", sandboxNode, "mode"),
    workspace: workspaceNode === undefined ? undefined : reader.block("workspace", workspaceNode),
    lanes: lanesNode === undefined ? undefined : reader.block("lanes", lanesNode),
    warnings: reader.warnings,
  };
}

class Reader {
  readonly warnings: string[] = [];
  constructor(readonly file: string) {}

  fail(line: number, what: string): never {
    return failAt(this.file, line, what);
  }

  routes(nodes: Node[]): Partial<Record<RouteName, RawBlock>> {
    const routes: Partial<Record<RouteName, RawBlock>> = {};
    for (const node of nodes) {
      const line = lineOf(node);
      if (node.getName() !== "llm") {
        const known = `llm, ${OTHER_NODES.slice(0, -1).join(", ")} or ${OTHER_NODES.at(-1)}`;
        this.fail(line, `unknown node, expected ${known} (got ${node.getName()})`);
      }
      const args = node.getArguments();
      const name = args[0] ?? "main";
      if (args.length > 1 || node.getProperties().size > 0) {
        this.fail(line, `llm: expected one route name and a block (got ${args.map(show)})`);
      }
      if (!ROUTE_NAMES.includes(name as RouteName)) {
        this.fail(line, `llm: unknown route name, expected main, fast or long (got ${show(name)})`);
      }
      const role = name as RouteName;
      const earlier = routes[role];
      if (earlier !== undefined) {
        this.fail(line, `llm "${role}": declared twice (got lines ${earlier.line} and ${line})`);
      }
      routes[role] = this.route(role, node);
    }
    return routes;
  }

  route(role: RouteName, node: Node): RawBlock {
    const raw: RawBlock = { line: lineOf(node), fields: {}, lines: new Map() };
    const where = `llm "${role}"`;
    readFields(node, raw, {
      file: this.file,
      where,
      special: (field, child) =>
        field === "extra_options"
          ? this.extraOptions(`${where} ${field}`, child, raw.lines)
          : undefined,
    });
    return raw;
  }

  /** Reads the `discord` block: `channels` takes one or more values, every other field one. */
  discord(node: Node): RawBlock {
    const raw: RawBlock = { line: lineOf(node), fields: {}, lines: new Map() };
    if (node.getArguments().length > 0 || node.getProperties().size > 0) {
      this.fail(raw.line, `discord: expected a block (got values)`);
    }
    readFields(node, raw, {
      file: this.file,
      where: "discord",
      special: (field, child, line) =>
        field === "channels" ? this.channels(child, line) : undefined,
    });
    return raw;
  }

  /** Reads `discord`'s `channels`: one or more values. */
  channels(node: Node, line: number): unknown[] {
    const args = node.getArguments();
    if (args.length === 0 || node.getProperties().size > 0 || node.children !== null) {
      this.fail(line, `discord channels: expected one or more values (got ${args.length} values)`);
    }
    return args;
  }

  /**
   * Reads a block of one-value fields; `argument`, when given, names the field the node's
   * one optional argument fills (`sandbox "required" { … }`).
   */
  block(name: string, node: Node, argument?: string): RawBlock {
    const raw: RawBlock = { line: lineOf(node), fields: {}, lines: new Map() };
    const args = node.getArguments();
    if (node.getProperties().size > 0 || args.length > (argument === undefined ? 0 : 1)) {
      const shape = argument === undefined ? "a block" : `at most one ${argument} and a block`;
      this.fail(raw.line, `${name}: expected ${shape} (got ${args.map(show).join(" ")})`);
    }
    if (argument !== undefined && args.length === 1) {
      raw.fields[argument] = args[0];
      raw.lines.set(argument, raw.line);
    }
    readFields(node, raw, { file: this.file, where: name });
    return raw;
  }

  extraOptions(where: string, node: Node, lines: Map<string, number>): Record<string, unknown> {
    if (node.getArguments().length > 0 || node.getProperties().size > 0) {
      this.fail(lineOf(node), `${where}: expected a block of options (got values)`);
    }
    const options: Record<string, unknown> = {};
    const removed: string[] = [];
    for (const child of node.children?.nodes ?? []) {
      const key = child.getName();
      const line = lineOf(child);
      if ((CACHE_FIELDS as readonly string[]).includes(key)) {
        removed.push(key);
        continue;
      }
      if (RUNTIME_FIELDS.includes(key)) {
        this.fail(line, `${where}.${key}: set by the runtime, not by extra_options (got ${key})`);
      }
      if (Object.hasOwn(SWITCH_FIELDS, key)) {
        const use = SWITCH_FIELDS[key];
        this.fail(
          line,
          `${where}.${key}: set by the route's ${use} field, not by extra_options (got ${key})`,
        );
      }
      if (Object.hasOwn(options, key)) this.fail(line, `${where}.${key}: given twice (got ${key})`);
      lines.set(`extra_options.${key}`, line);
      options[key] = this.json(`${where}.${key}`, child);
    }
    if (removed.length > 0) {
      // A warning, not an error: the route still works, it just never gets those fields.
      this.warnings.push(
        `config ${this.file}:${lineOf(node)}: ${where}: removed ${
          removed.join(", ")
        }; only cache_profile adds cache fields`,
      );
    }
    return options;
  }

  /** Reads an option node as JSON: one value, a list of values, properties or a block. */
  json(where: string, node: Node): unknown {
    const args = node.getArguments();
    const props = node.getProperties();
    const kids = node.children?.nodes;
    const shapes = [args.length > 0, props.size > 0, kids !== undefined].filter(Boolean).length;
    if (shapes === 0) this.fail(lineOf(node), `${where}: needs a value (got nothing)`);
    if (shapes > 1) {
      this.fail(
        lineOf(node),
        `${where}: give values, properties or a block, not several (got ${shapes})`,
      );
    }
    // KDL's #inf, #-inf and #nan (and a number too large for a double) have no JSON form.
    const infinite = [...args, ...props.values()].find((v) =>
      typeof v === "number" && !Number.isFinite(v)
    );
    if (infinite !== undefined) {
      this.fail(
        lineOf(node),
        `${where}: expected a finite number, JSON has no #inf, #-inf or #nan (got ${infinite})`,
      );
    }
    if (args.length > 0) return args.length === 1 ? args[0] : args;
    if (props.size > 0) return Object.fromEntries(props);
    const object: Record<string, unknown> = {};
    const lines = new Map<string, number>();
    for (const kid of kids ?? []) {
      const [key, line] = [kid.getName(), lineOf(kid)];
      // A second value would replace the first without a word, as nowhere else in the file.
      if (lines.has(key)) {
        this.fail(line, `${where}.${key}: given twice (got lines ${lines.get(key)} and ${line})`);
      }
      lines.set(key, line);
      object[key] = this.json(`${where}.${key}`, kid);
    }
    return object;
  }
}
