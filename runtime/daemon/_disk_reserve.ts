/**
 * A reserve of disk space for the store: a preallocated file in the state directory
 * (`disk.reserve`, 64 MiB or a tenth of the free space, whichever is less), released the first
 * time the store finds the disk full. A cell that fills the workspace's file system — the state
 * directory's too, in the default layout — then costs the inputs of that moment a retriable
 * refusal, not every input until a person deletes the file: the released space lets the store
 * commit again, and the agent can be told to clean up. `/health` says "disk full" and names the
 * file system's directories until the next start, which makes the reserve again.
 *
 * @module
 */

import { join } from "node:path";
import type { Logger } from "../core/mod.ts";
import { formatBytes, runShell } from "../sandbox/mod.ts";

/** The reserve's file in the state directory. */
export const RESERVE_FILE = "disk.reserve";

/** The largest reserve; a tenth of the free space when that is less. */
export const RESERVE_BYTES = 64 * 2 ** 20;

/** What `/health` says about the disk. */
export interface DiskReport {
  /** `full` from the store's first "disk full" on. */
  state: "ok" | "full";
  /** The state directory, on the file system that filled. */
  dir: string;
  /** The workspace, when it lies on that same file system (then it may be what grew). */
  workspace: string | null;
  /** The reserve's size when made (0 when none could be). */
  reserve_bytes: number;
  /** Whether the reserve was released for the store. */
  reserve_released: boolean;
}

/** The state directory's reserve and whether the disk has filled. */
export class DiskReserve {
  readonly #path: string;
  readonly #stateDir: string;
  readonly #workspace: string;
  readonly #log: Logger;
  #bytes = 0;
  #full = false;
  #released = false;
  #shared = false;

  /** Watches the file system of `stateDir` (and says whether `workspace` shares it). */
  constructor(stateDir: string, workspace: string, log: Logger) {
    this.#stateDir = stateDir;
    this.#workspace = workspace;
    this.#path = join(stateDir, RESERVE_FILE);
    this.#log = log;
  }

  /**
   * Makes the reserve when it is missing (`fallocate`: the blocks are the file's, none is
   * written) and notes whether the workspace shares the file system. Never throws: without a
   * reserve the store simply has none, and the log says so.
   */
  async prepare(): Promise<void> {
    const [state, ws] = await Promise.all([
      Deno.stat(this.#stateDir).catch(() => null),
      Deno.stat(this.#workspace).catch(() => null),
    ]);
    this.#shared = state?.dev !== undefined && state.dev === ws?.dev;
    const existing = await Deno.stat(this.#path).catch(() => null);
    if (existing !== null && existing.size > 0) {
      this.#bytes = existing.size;
      return;
    }
    const out = await runShell(
      "a=$(df -Pk -- \"$1\" | awk 'NR==2 {print $4}') || exit 1; " +
        'n=$((a * 1024 / 10)); [ "$n" -gt "$2" ] && n=$2; [ "$n" -gt 0 ] || exit 1; ' +
        'fallocate -l "$n" -- "$1/' + RESERVE_FILE + '" && echo "$n"',
      [this.#stateDir, String(RESERVE_BYTES)],
    ).catch((error) => ({ code: 1, stdout: "", stderr: String(error) }));
    this.#bytes = out.code === 0 ? Number(out.stdout.trim()) || 0 : 0;
    if (this.#bytes === 0) {
      await Deno.remove(this.#path).catch(() => {});
      this.#log.warn(
        "disk.no_reserve",
        `no disk reserve for the store in ${this.#stateDir} (${
          out.stderr.trim().slice(0, 200) || "no free space"
        }); a full disk stops admission until space is freed`,
      );
    }
  }

  /**
   * Notes that the store found the disk full and releases the reserve (once), so the next
   * commit finds room.
   */
  full(): void {
    if (this.#full) return;
    this.#full = true;
    // Synchronous: the reserve is gone before the refused input's answer leaves, so the next
    // commit finds room and `/health` already says it was released.
    this.#released = this.#bytes > 0 && removed(this.#path);
    this.#log.error(
      "disk.full",
      `disk full: ${this.#where()}; ${
        this.#released
          ? `the store's reserve (${formatBytes(this.#bytes)}) was released so it can commit`
          : "there was no reserve to release"
      }; free space there (deno task serve makes the reserve again at the next start)`,
      { dir: this.#stateDir, workspace: this.#shared ? this.#workspace : null },
    );
  }

  /** The disk as `/health` shows it. */
  report(): DiskReport {
    return {
      state: this.#full ? "full" : "ok",
      dir: this.#stateDir,
      workspace: this.#shared ? this.#workspace : null,
      reserve_bytes: this.#bytes,
      reserve_released: this.#released,
    };
  }

  /** The `/health` reason while the disk is full, else null. */
  reason(): string | null {
    return this.#full ? `disk full: ${this.#where()}; free space there` : null;
  }

  #where(): string {
    return `the file system of the state directory ${this.#stateDir} is full${
      this.#shared ? ` (the workspace ${this.#workspace} is on it too, and may be what grew)` : ""
    }`;
  }
}

/** Removes `path`; false when it could not be removed. */
function removed(path: string): boolean {
  try {
    Deno.removeSync(path);
    return true;
  } catch {
    return false;
  }
}
