/**
 * Markdown of explicit sends, rendered to sanitised HTML: `marked` parses, `DOMPurify` keeps
 * only inert markup. Images, styles, forms and embedded content are dropped, so a send can
 * neither run script nor make the page fetch anything; links open in a new tab without a
 * referrer. Fenced code is highlighted by `highlight.ts`.
 *
 * @module
 */

import { Marked } from "marked";
import DOMPurify from "dompurify";
import { highlight, knownLanguage } from "./highlight.ts";

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    // Fenced code is highlighted (escaped text in `<span class>`); its language is a class.
    code({ text, lang }) {
      const language = (lang ?? "").trim().split(/\s+/)[0].toLowerCase();
      const known = knownLanguage(language);
      const cls = known ? `hljs language-${language}` : "hljs";
      return `<pre><code class="${cls}">${
        highlight(text, known ? language : undefined)
      }</code></pre>\n`;
    },
  },
});

const FORBID_TAGS = [
  "style",
  "img",
  "picture",
  "source",
  "video",
  "audio",
  "iframe",
  "frame",
  "object",
  "embed",
  "form",
  "input",
  "button",
  "textarea",
  "select",
  "svg",
  "math",
  "link",
  "meta",
  "base",
];

let hooked = false;

function escapeHtml(source: string): string {
  return source.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * Renders Markdown to HTML that is safe to insert into the page.
 *
 * Without a DOM (where `DOMPurify` cannot work) it returns the source escaped, never raw.
 *
 * @example
 * ```ts
 * element.innerHTML = renderMarkdown("**done** <script>x()</script>"); // "<p><strong>done</strong> </p>"
 * ```
 */
export function renderMarkdown(source: string): string {
  if (!DOMPurify.isSupported) return `<p>${escapeHtml(source)}</p>`;
  return sanitizeHtml(marked.parse(source, { async: false }));
}

/**
 * Keeps of `html` what is safe to insert into the page, by the same rules as Markdown: no
 * scripts, event handlers, styles, forms or embedded documents; links open a new tab. Without a
 * DOM it returns the source escaped.
 *
 * @example
 * ```ts
 * element.innerHTML = sanitizeHtml('<b onclick="x()">hi</b>'); // "<b>hi</b>"
 * ```
 */
export function sanitizeHtml(html: string): string {
  if (!DOMPurify.isSupported) return escapeHtml(html);
  if (!hooked) {
    DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A" && node.hasAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer nofollow");
      }
    });
    hooked = true;
  }
  return DOMPurify.sanitize(html, {
    FORBID_TAGS,
    FORBID_ATTR: ["style", "srcset", "formaction", "background"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#|\/(?!\/))/i,
  });
}
