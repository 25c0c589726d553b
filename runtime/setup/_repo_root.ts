/**
 * Where the checkout is: `behavior/`, `skills/`, `ui/`, `workbench/` and `main.ts`.
 *
 * A module of its own so the `serve` launcher can name it without loading the daemon.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root, absolute. */
export const REPO_ROOT: string = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
