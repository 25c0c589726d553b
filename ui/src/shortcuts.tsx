/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * Keyboard shortcuts and the dialog that lists them. One table, {@linkcode SHORTCUTS}, is both
 * what the dialog shows and what {@linkcode useShortcuts} answers, so the list cannot drift from
 * the keys. Keys that are also typed (`/`, `?`) act only outside text fields; the message box's
 * own keys (Enter, Shift+Enter) are the composer's.
 *
 * @module
 */

import type { JSX } from "preact";
import { useEffect, useRef } from "preact/hooks";

/** What a shortcut does, as the page's handlers name it. */
export type ShortcutAction = "send" | "newline" | "search" | "cancel" | "help" | "close";

/** One shortcut: its keys as a person presses them, and what it does. */
export interface Shortcut {
  keys: readonly string[];
  does: string;
  action: ShortcutAction;
}

/** Every shortcut of the page, in the order the help dialog lists them. */
export const SHORTCUTS: readonly Shortcut[] = [
  { keys: ["Enter"], does: "sends the message (in the message box)", action: "send" },
  {
    keys: ["Shift", "Enter"],
    does: "starts a new line (in the message box)",
    action: "newline",
  },
  { keys: ["/"], does: "moves to the search box", action: "search" },
  {
    keys: ["Ctrl", "."],
    does: "cancels the newest running cell (operator; ⌘ . on a Mac)",
    action: "cancel",
  },
  { keys: ["?"], does: "shows this list", action: "help" },
  { keys: ["Escape"], does: "closes a dialog or the menu", action: "close" },
];

/** What the page does for the shortcuts that are not the composer's own. */
export type ShortcutHandlers = Record<"search" | "cancel" | "help" | "close", () => void>;

/** Whether `target` takes typed text, so `/` and `?` belong to it, not to the page. */
function isTextField(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  if (target.isContentEditable || target instanceof HTMLTextAreaElement) return true;
  if (!(target instanceof HTMLInputElement)) return false;
  return !["button", "checkbox", "radio", "submit", "reset"].includes(target.type);
}

/**
 * Whether an input method takes `event`: a key of a composition, or the one that confirms it.
 * Safari ends the composition before the keydown of the confirming Enter, which then says
 * `isComposing: false`; only its keyCode, 229, tells that the input method took it.
 */
export function inputMethodKey(event: KeyboardEvent): boolean {
  return event.isComposing || event.keyCode === 229;
}

/** The page action `event` asks for, or undefined when it is no shortcut of the page. */
export function shortcutOf(event: KeyboardEvent): keyof ShortcutHandlers | undefined {
  if (inputMethodKey(event)) return undefined;
  if (event.key === "." && (event.ctrlKey || event.metaKey)) return "cancel";
  if (event.key === "Escape") return "close";
  if (event.ctrlKey || event.metaKey || event.altKey || isTextField(event.target)) {
    return undefined;
  }
  if (event.key === "/") return "search";
  if (event.key === "?") return "help";
  return undefined;
}

/** Answers the page's shortcuts with `handlers` while the calling component is mounted. */
export function useShortcuts(handlers: ShortcutHandlers): void {
  const current = useRef(handlers);
  current.current = handlers;
  useEffect(() => {
    function onShortcutKey(event: KeyboardEvent): void {
      const action = shortcutOf(event);
      if (action === undefined) return;
      // Escape also reaches an open dialog, which closes itself; nothing is taken from it.
      if (action !== "close") event.preventDefault();
      current.current[action]();
    }
    document.addEventListener("keydown", onShortcutKey);
    return () => document.removeEventListener("keydown", onShortcutKey);
  }, []);
}

/**
 * Clicks the Cancel button of the newest running cell on the page, so the shortcut goes the
 * way the button does (and shows "Cancelling…"); whether there was one.
 */
export function cancelNewestRunningCell(): boolean {
  const buttons = document.querySelectorAll<HTMLButtonElement>(
    ".cell-running .cell-cancel button:not([disabled])",
  );
  const newest = buttons[buttons.length - 1];
  newest?.click();
  return newest !== undefined;
}

/** Props of {@linkcode ShortcutHelp}. */
export interface ShortcutHelpProps {
  open: boolean;
  onClose: () => void;
}

/** The dialog listing {@linkcode SHORTCUTS}; Escape or its button closes it. */
export function ShortcutHelp({ open, onClose }: ShortcutHelpProps): JSX.Element {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const element = dialog.current;
    if (element === null) return;
    if (open && !element.open) element.showModal();
    if (!open && element.open) element.close();
  }, [open]);
  return (
    <dialog
      ref={dialog}
      class="shortcut-help"
      aria-labelledby="h-shortcuts"
      onClose={onClose}
    >
      <h2 id="h-shortcuts">Keyboard shortcuts</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Keys</th>
            <th scope="col">What it does</th>
          </tr>
        </thead>
        <tbody>
          {SHORTCUTS.map((shortcut) => (
            <tr key={shortcut.action}>
              <td>
                {shortcut.keys.map((key, i) => (
                  <span key={key}>
                    {i > 0 && " + "}
                    <kbd>{key}</kbd>
                  </span>
                ))}
              </td>
              <td>{shortcut.does}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <button type="button" onClick={onClose} autofocus>Close</button>
    </dialog>
  );
}

/** The header's button that opens {@linkcode ShortcutHelp}. */
export function ShortcutButton({ onOpen }: { onOpen: () => void }): JSX.Element {
  return (
    <button type="button" class="shortcut-button" aria-keyshortcuts="?" onClick={onOpen}>
      Shortcuts
    </button>
  );
}
