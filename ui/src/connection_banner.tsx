/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The banner that says when the daemon is unreachable and when it is back.
 *
 * @module
 */

import type { JSX } from "preact";
import { useState } from "preact/hooks";
import { duration, when } from "./format.ts";
import type { ConnectionState } from "./lane_socket.ts";
import { useNow } from "./use_now.ts";

/** How long the "back" banner stays, in ms. */
export const BACK_BANNER_MS = 15_000;

/** Props of {@linkcode ConnectionBanner}. */
export interface ConnectionBannerProps {
  connection: Readonly<ConnectionState>;
  lastSeq: number;
  onRetry: () => void;
}

/** The banner; renders nothing while all is well. */
export function ConnectionBanner(props: ConnectionBannerProps): JSX.Element | null {
  const c = props.connection;
  const [dismissed, setDismissed] = useState<number | undefined>(undefined);
  const showBack = c.phase === "open" && c.recoveredAt !== undefined &&
    dismissed !== c.recoveredAt;
  const now = useNow(1000, c.phase === "unreachable" || showBack);
  if (c.phase === "unreachable" || c.phase === "gave_up") {
    const since = c.downSince === undefined ? "" : ` since ${when(c.downSince)}`;
    const wait = c.retryAt === undefined ? 0 : Math.max(0, c.retryAt - now);
    return (
      <div class="banner banner-down" role="alert" data-banner="unreachable">
        <span aria-hidden="true" class="badge-icon">✕</span>
        <span>
          <strong>The daemon is unreachable{since}.</strong> {c.phase === "gave_up"
            ? "Retrying stopped; the records shown so far are kept."
            : `Retrying in ${duration(wait)} (attempt ${c.failures + 1}). Nothing shown is lost.`}
        </span>
        <button type="button" onClick={props.onRetry}>Retry now</button>
      </div>
    );
  }
  if (showBack && c.recoveredAt !== undefined && now - c.recoveredAt < BACK_BANNER_MS) {
    return (
      <div class="banner banner-back" role="status" data-banner="back">
        <span aria-hidden="true" class="badge-icon">✓</span>
        <span>
          <strong>The daemon is back</strong> (since{" "}
          {when(c.recoveredAt)}); the page resumed after record #{props.lastSeq}.
        </span>
        <button type="button" onClick={() => setDismissed(c.recoveredAt)}>Dismiss</button>
      </div>
    );
  }
  return null;
}
