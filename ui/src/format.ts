/**
 * Text forms of times, durations and sizes the lanes show.
 *
 * @module
 */

/** Commit times are Unix milliseconds; a value that looks like seconds is scaled. */
export function toMillis(at: number): number {
  return at > 0 && at < 1e11 ? at * 1000 : at;
}

/** The local wall-clock time of `at`, e.g. `14:03:07`. */
export function clockTime(at: number): string {
  const date = new Date(toMillis(at));
  if (Number.isNaN(date.getTime())) return "?";
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/**
 * When `at` was, as a person reads it: the clock time today, with the day and month on another
 * day, and the year too in another year.
 *
 * @example
 * ```ts
 * when(Date.now()); // "14:03:07"
 * when(Date.parse("2024-01-12T09:30:00")); // "12 Jan 2024 09:30:00"
 * ```
 */
export function when(at: number, now: number = Date.now()): string {
  const date = new Date(toMillis(at));
  if (Number.isNaN(date.getTime())) return "?";
  const today = new Date(now);
  const clock = clockTime(at);
  if (date.toDateString() === today.toDateString()) return clock;
  const day = `${date.getDate()} ${MONTHS[date.getMonth()]}`;
  return date.getFullYear() === today.getFullYear()
    ? `${day} ${clock}`
    : `${day} ${date.getFullYear()} ${clock}`;
}

/**
 * A token count in words: `1,204`, or `not reported` when the provider did not say.
 *
 * @example
 * ```ts
 * tokenCount(undefined); // "not reported"
 * ```
 */
export function tokenCount(count: number | undefined): string {
  return count === undefined ? "not reported" : count.toLocaleString("en-US");
}

/** An ISO timestamp of `at`, for `<time datetime>`. */
export function isoTime(at: number): string {
  const date = new Date(toMillis(at));
  return Number.isNaN(date.getTime()) ? "" : date.toISOString();
}

/**
 * A duration in words: `41 ms`, `1.2 s`, `2 min 3 s`, `1 h 4 min`.
 *
 * @example
 * ```ts
 * duration(1234); // "1.2 s"
 * ```
 */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "?";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/**
 * A byte count in words: `812 bytes`, `118.3 KiB`, `2.0 MiB`.
 *
 * @example
 * ```ts
 * byteSize(121_140); // "118.3 KiB"
 * ```
 */
export function byteSize(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return "?";
  if (bytes < 1024) return `${Math.round(bytes)} byte${bytes === 1 ? "" : "s"}`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/**
 * The words that say an output was spooled: its size and the artifact holding all of it.
 *
 * @example
 * ```ts
 * spooledLabel("stdout", { id: "art_1", bytes: 20480 });
 * // "stdout spooled: 20.0 KiB in artifact art_1; an excerpt is shown"
 * ```
 */
export function spooledLabel(name: string, spooled: { id: string; bytes?: number }): string {
  const size = spooled.bytes === undefined ? "" : `${byteSize(spooled.bytes)} `;
  return `${name} spooled: ${size}in artifact ${spooled.id}; an excerpt is shown`;
}
