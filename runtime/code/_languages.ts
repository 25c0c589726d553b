/**
 * The languages the code domain parses: which files each takes, where its grammar's `.wasm`
 * is (a file committed in `runtime/code/grammars/`, with its licence and checksum), and the
 * query that finds its symbols.
 *
 * Outline queries capture each definition as `@<kind>` and its name as `@name`; Go methods
 * also capture `@receiver`, which qualifies the name. Nesting (and so qualified names) comes
 * from which definition contains which.
 *
 * @module
 */

import { extname } from "node:path";

/** The ids of the languages with a grammar. */
export const LANGUAGE_IDS = [
  "python",
  "typescript",
  "tsx",
  "javascript",
  "rust",
  "go",
  "json",
  "markdown",
] as const;
/** A language with a grammar. */
export type LanguageId = (typeof LANGUAGE_IDS)[number];

/** How one language is parsed and outlined; its grammar is `grammars/tree-sitter-<id>.wasm`. */
export interface LanguageSpec {
  /** File name extensions, lower case, with the dot. */
  extensions: readonly string[];
  /** The tree-sitter query whose matches are the outline. */
  outline: string;
  /**
   * Node types that wrap a definition and belong to it (decorators, `export`, a Markdown
   * section): the definition is widened to its parent of such a type when it is the parent's
   * only child of its type (`only`) or its first named child (`first`).
   */
  wrappers: readonly string[];
  wrap: "only" | "first";
  /** Node types that, directly before a definition, belong to it (Rust attributes). */
  leading: readonly string[];
}

/** A language's spec; what it does not say is `wrap: "only"` and no wrappers or leading nodes. */
function spec(
  extensions: readonly string[],
  outline: string,
  shape: Partial<Pick<LanguageSpec, "wrappers" | "wrap" | "leading">> = {},
): LanguageSpec {
  return { extensions, outline, wrappers: [], wrap: "only", leading: [], ...shape };
}

const PYTHON = `
(class_definition name: (identifier) @name) @class
(function_definition name: (identifier) @name) @function
(module (expression_statement (assignment left: (identifier) @name)) @variable)
(class_definition body: (block (expression_statement (assignment left: (identifier) @name)) @field))
`;

// Shared by JavaScript, TypeScript and TSX; the TypeScript-only patterns are added below.
const JS_COMMON = `
(function_declaration name: (identifier) @name) @function
(generator_function_declaration name: (identifier) @name) @function
(method_definition name: (_) @name) @method
(lexical_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @function
(variable_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @function
(program (lexical_declaration (variable_declarator name: (identifier) @name)) @variable)
(program (export_statement declaration: (lexical_declaration (variable_declarator name: (identifier) @name)) @variable))
(program (variable_declaration (variable_declarator name: (identifier) @name)) @variable)
`;

const JAVASCRIPT = JS_COMMON + `
(class_declaration name: (identifier) @name) @class
(field_definition property: (property_identifier) @name) @field
`;

const TYPESCRIPT = JS_COMMON + `
(class_declaration name: (type_identifier) @name) @class
(abstract_class_declaration name: (type_identifier) @name) @class
(interface_declaration name: (type_identifier) @name) @interface
(type_alias_declaration name: (type_identifier) @name) @type
(enum_declaration name: (identifier) @name) @enum
(method_signature name: (_) @name) @method
(abstract_method_signature name: (_) @name) @method
(public_field_definition name: (_) @name) @field
(internal_module name: (_) @name) @namespace
(module name: (_) @name) @namespace
`;

const RUST = `
(function_item name: (identifier) @name) @function
(function_signature_item name: (identifier) @name) @function
(struct_item name: (type_identifier) @name) @struct
(union_item name: (type_identifier) @name) @struct
(enum_item name: (type_identifier) @name) @enum
(trait_item name: (type_identifier) @name) @trait
(impl_item type: (_) @name) @impl
(mod_item name: (identifier) @name) @module
(const_item name: (identifier) @name) @constant
(static_item name: (identifier) @name) @constant
(type_item name: (type_identifier) @name) @type
(macro_definition name: (identifier) @name) @macro
`;

const GO = `
(function_declaration name: (identifier) @name) @function
(method_declaration receiver: (parameter_list (parameter_declaration type: (_) @receiver)) name: (field_identifier) @name) @method
(type_spec name: (type_identifier) @name type: (struct_type)) @struct
(type_spec name: (type_identifier) @name type: (interface_type)) @interface
(type_spec name: (type_identifier) @name type: [(type_identifier) (qualified_type) (generic_type) (pointer_type) (slice_type) (map_type) (array_type) (function_type) (channel_type)]) @type
(type_alias name: (type_identifier) @name) @type
(source_file (const_declaration (const_spec name: (identifier) @name) @constant))
(source_file (var_declaration (var_spec name: (identifier) @name) @variable))
`;

const JSON_OUTLINE = `
(pair key: (string (string_content) @name)) @key
`;

const MARKDOWN = `
(atx_heading heading_content: (_) @name) @heading
(setext_heading heading_content: (_) @name) @heading
`;

const EXPORTED = { wrappers: ["export_statement"] };

/** Every language, by id. */
export const LANGUAGES: Readonly<Record<LanguageId, LanguageSpec>> = {
  python: spec([".py", ".pyi"], PYTHON, { wrappers: ["decorated_definition"] }),
  typescript: spec([".ts", ".mts", ".cts"], TYPESCRIPT, EXPORTED),
  tsx: spec([".tsx"], TYPESCRIPT, EXPORTED),
  javascript: spec([".js", ".mjs", ".cjs", ".jsx"], JAVASCRIPT, EXPORTED),
  rust: spec([".rs"], RUST, { leading: ["attribute_item"] }),
  go: spec([".go"], GO, { wrappers: ["type_declaration", "const_declaration", "var_declaration"] }),
  json: spec([".json"], JSON_OUTLINE),
  // The block grammar of tree-sitter-grammars/tree-sitter-markdown (see docs/code.md).
  markdown: spec([".md", ".markdown"], MARKDOWN, { wrappers: ["section"], wrap: "first" }),
};

/**
 * Returns the language of a file by its extension, or null when none has a grammar.
 *
 * @example
 * ```ts
 * languageOf("src/app.tsx"); // "tsx"
 * ```
 */
export function languageOf(path: string): LanguageId | null {
  const ext = extname(path).toLowerCase();
  return LANGUAGE_IDS.find((id) => LANGUAGES[id].extensions.includes(ext)) ?? null;
}
