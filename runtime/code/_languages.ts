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

/** How one language is parsed and outlined. */
export interface LanguageSpec {
  id: LanguageId;
  /** File name extensions, lower case, with the dot. */
  extensions: readonly string[];
  /** The grammar's `.wasm`: a file in `runtime/code/grammars/` (see its README). */
  wasm: string;
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

/** Every language, by id. */
export const LANGUAGES: Readonly<Record<LanguageId, LanguageSpec>> = {
  python: {
    id: "python",
    extensions: [".py", ".pyi"],
    wasm: "tree-sitter-python.wasm",
    outline: PYTHON,
    wrappers: ["decorated_definition"],
    leading: [],
    wrap: "only",
  },
  typescript: {
    id: "typescript",
    extensions: [".ts", ".mts", ".cts"],
    wasm: "tree-sitter-typescript.wasm",
    outline: TYPESCRIPT,
    wrappers: ["export_statement"],
    leading: [],
    wrap: "only",
  },
  tsx: {
    id: "tsx",
    extensions: [".tsx"],
    wasm: "tree-sitter-tsx.wasm",
    outline: TYPESCRIPT,
    wrappers: ["export_statement"],
    leading: [],
    wrap: "only",
  },
  javascript: {
    id: "javascript",
    extensions: [".js", ".mjs", ".cjs", ".jsx"],
    wasm: "tree-sitter-javascript.wasm",
    outline: JAVASCRIPT,
    wrappers: ["export_statement"],
    leading: [],
    wrap: "only",
  },
  rust: {
    id: "rust",
    extensions: [".rs"],
    wasm: "tree-sitter-rust.wasm",
    outline: RUST,
    wrappers: [],
    leading: ["attribute_item"],
    wrap: "only",
  },
  go: {
    id: "go",
    extensions: [".go"],
    wasm: "tree-sitter-go.wasm",
    outline: GO,
    wrappers: ["type_declaration", "const_declaration", "var_declaration"],
    leading: [],
    wrap: "only",
  },
  json: {
    id: "json",
    extensions: [".json"],
    wasm: "tree-sitter-json.wasm",
    outline: JSON_OUTLINE,
    wrappers: [],
    leading: [],
    wrap: "only",
  },
  markdown: {
    id: "markdown",
    extensions: [".md", ".markdown"],
    // The block grammar of tree-sitter-grammars/tree-sitter-markdown (see docs/code.md).
    wasm: "tree-sitter-markdown.wasm",
    outline: MARKDOWN,
    wrappers: ["section"],
    leading: [],
    wrap: "first",
  },
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
  for (const spec of Object.values(LANGUAGES)) {
    if (spec.extensions.includes(ext)) return spec.id;
  }
  return null;
}
