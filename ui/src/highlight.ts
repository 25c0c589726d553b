/**
 * Syntax highlighting of code in cells and sends with `highlight.js` (its core and a few
 * languages, bundled; nothing is fetched). The output is the code escaped, wrapped in
 * `<span class="hljs-…">`; `ui/static/style.css` colours the classes.
 *
 * @module
 */

import hljs from "highlight.js/lib/core";
import python from "highlight.js/lib/languages/python";
import json from "highlight.js/lib/languages/json";
import bash from "highlight.js/lib/languages/bash";
import typescript from "highlight.js/lib/languages/typescript";
import diff from "highlight.js/lib/languages/diff";

hljs.registerLanguage("python", python);
hljs.registerLanguage("json", json);
hljs.registerLanguage("bash", bash);
hljs.registerLanguage("typescript", typescript);
hljs.registerLanguage("diff", diff);
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["sh", "shell", "console"], { languageName: "bash" });
hljs.registerAliases(["ts", "js", "javascript", "tsx"], { languageName: "typescript" });

/** Longest code highlighted; longer code is shown plain (escaped), to keep the page quick. */
const MAX_CHARS = 100_000;

function escapeHtml(source: string): string {
  return source.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Whether `language` (or an alias) is one this page highlights. */
export function knownLanguage(language: string | undefined): boolean {
  return language !== undefined && language !== "" && hljs.getLanguage(language) !== undefined;
}

/**
 * Highlights `code` as `language` and returns HTML safe to insert: the code's text is
 * escaped and only `<span class>` is added. An unknown language or very long code comes back
 * escaped and plain.
 *
 * @example
 * ```ts
 * highlight("print(1)", "python"); // '<span class="hljs-built_in">print</span>(<span class="hljs-number">1</span>)'
 * ```
 */
export function highlight(code: string, language: string | undefined): string {
  if (!knownLanguage(language) || code.length > MAX_CHARS) return escapeHtml(code);
  return hljs.highlight(code, { language: language!, ignoreIllegals: true }).value;
}
