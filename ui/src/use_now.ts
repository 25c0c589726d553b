/**
 * A clock hook for running timers ("running · 12 s") and fading banners.
 *
 * @module
 */

import { useEffect, useState } from "preact/hooks";

/** The current time, refreshed every `intervalMs` while `active`. */
export function useNow(intervalMs: number, active: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return;
    setNow(Date.now());
    const timer = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs, active]);
  return now;
}
