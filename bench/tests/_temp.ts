/**
 * Temporary directories for the bench's tests that are removed when the test process ends, whatever the
 * test did with them (a daemon may be restarted on one after a kill, so no single test step can
 * own its removal). A full `deno task test` leaves nothing of them behind.
 *
 * @module
 */

const made = new Set<string>();

globalThis.addEventListener("unload", () => {
  for (const dir of made) {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch { /* already gone, or removed by its test */ }
  }
});

/**
 * Makes a temporary directory, removed when the test process ends.
 *
 * @example
 * ```ts
 * const state = await tempDir("klbr-state-");
 * ```
 */
export async function tempDir(prefix = "klbr-test-"): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix });
  made.add(dir);
  return dir;
}
