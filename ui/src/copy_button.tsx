/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * A button that copies a text (a message, a cell's code) to the clipboard and says so.
 *
 * @module
 */

import type { JSX } from "preact";
import { useState } from "preact/hooks";

/** Copies `text`; `what` names it for the button's accessible name ("the message"). */
export function CopyButton({ text, what }: { text: string; what: string }): JSX.Element {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  return (
    <button
      type="button"
      class="copy-button link-button"
      onClick={() => {
        const clipboard = globalThis.navigator?.clipboard;
        if (clipboard === undefined) return setState("failed");
        clipboard.writeText(text).then(() => setState("copied"), () => setState("failed"));
      }}
    >
      {state === "copied" ? "Copied" : state === "failed" ? "Copy refused" : "Copy"}
      <span class="sr-only">{` ${what}`}</span>
    </button>
  );
}
