/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * Long text (code, output, drafts) shown as its first lines with a button that opens the rest.
 *
 * @module
 */

import type { JSX } from "preact";
import { useState } from "preact/hooks";
import { highlight } from "./highlight.ts";
import { CopyButton } from "./copy_button.tsx";

/** Props of {@linkcode CollapsibleText}. */
export interface CollapsibleTextProps {
  text: string;
  /** What the text is, for the button's label ("stdout", "code"). */
  label: string;
  /** Lines shown while collapsed. @default {12} */
  lines?: number;
  /** Characters shown while collapsed. @default {1500} */
  chars?: number;
  /** Extra class of the `<pre>`. */
  class?: string;
  /** Highlights the text as this language (`python`, `json`, `bash`, …). */
  language?: string;
  /** Offers a Copy button for the whole text. */
  copy?: boolean;
}

/** Shows `text` in a `<pre>`, collapsed past `lines` lines or `chars` characters. */
export function CollapsibleText(props: CollapsibleTextProps): JSX.Element {
  const { text, label } = props;
  const maxLines = props.lines ?? 12;
  const maxChars = props.chars ?? 1500;
  const [open, setOpen] = useState(false);
  const allLines = text.split("\n");
  const long = allLines.length > maxLines || text.length > maxChars;
  let shown = text;
  if (long && !open) {
    shown = allLines.slice(0, maxLines).join("\n");
    if (shown.length > maxChars) shown = shown.slice(0, maxChars);
  }
  const cls = ["text", props.class ?? "", long && !open ? "collapsed" : ""].join(" ").trim();
  return (
    <div class="collapsible">
      {props.language === undefined
        ? <pre class={cls} tabIndex={long ? 0 : undefined}>{shown}{long && !open ? "\n…" : ""}</pre>
        : (
          <pre
            class={`${cls} hljs language-${props.language}`}
            tabIndex={long ? 0 : undefined}
            // highlight() escapes the text and adds only `<span class>`.
            dangerouslySetInnerHTML={{
              __html: highlight(shown, props.language) + (long && !open ? "\n…" : ""),
            }}
          />
        )}
      {props.copy && text !== "" && <CopyButton text={text} what={label} />}
      {long && (
        <button
          type="button"
          class="link-button"
          aria-expanded={open}
          onClick={() => setOpen(!open)}
        >
          {open
            ? `Collapse ${label}`
            : `Show all ${label} (${allLines.length} lines, ${text.length} characters)`}
        </button>
      )}
    </div>
  );
}
