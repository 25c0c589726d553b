/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * Light or dark: the page follows the system (`prefers-color-scheme`) unless the person picks
 * one with the header's button; the choice is kept in `localStorage` (`klbr:theme`) and set
 * as `data-theme` on the root element, which the stylesheet's variables follow.
 *
 * @module
 */

import type { JSX } from "preact";
import { useState } from "preact/hooks";

/** A theme choice: the system's, or one fixed by the person. */
export type Theme = "system" | "light" | "dark";

const KEY = "klbr:theme";
const ORDER: Theme[] = ["system", "light", "dark"];

/** The stored choice; `system` when none (or storage is denied). */
export function storedTheme(): Theme {
  try {
    const value = localStorage.getItem(KEY);
    return value === "light" || value === "dark" ? value : "system";
  } catch {
    return "system";
  }
}

/** Sets `theme` on the page and keeps it for the next load. */
export function applyTheme(theme: Theme): void {
  const root = document.documentElement;
  if (theme === "system") delete root.dataset.theme;
  else root.dataset.theme = theme;
  try {
    if (theme === "system") localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, theme);
  } catch { /* storage denied: the choice lasts as long as the page */ }
}

/** The header's button: system → light → dark → system. */
export function ThemeButton(): JSX.Element {
  const [theme, setTheme] = useState<Theme>(storedTheme);
  const next = ORDER[(ORDER.indexOf(theme) + 1) % ORDER.length];
  return (
    <button
      type="button"
      class="theme-button"
      title={`Switch to the ${next === "system" ? "system's" : next} theme`}
      onClick={() => {
        applyTheme(next);
        setTheme(next);
      }}
    >
      Theme: {theme === "system" ? "as the system" : theme}
    </button>
  );
}
