/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * A lane's scrolling area that follows the newest item: while the person is at the bottom,
 * new content scrolls into view; once they scroll up, it stays where they are and a "new
 * below" button appears that jumps down.
 *
 * @module
 */

import type { ComponentChildren, JSX } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";

/** How close to the bottom (px) still counts as "at the bottom". */
const NEAR_BOTTOM_PX = 48;

/** Props of {@linkcode FollowScroll}. */
export interface FollowScrollProps {
  /** Changes whenever new content arrives (e.g. the newest seq and the item count). */
  contentKey: string;
  /** What the lane holds, for the button's accessible name ("messages"). */
  what: string;
  children: ComponentChildren;
  /** Called while the person scrolls within a screen of the top (to show earlier items). */
  onNearTop?: () => void;
  /** Called while the person scrolls within a screen of the bottom; `true` at the bottom. */
  onNearBottom?: (atBottom: boolean) => void;
  /** Called while the person scrolls away from the bottom (no longer following). */
  onAway?: () => void;
  /** Jumps to the newest item; also given the job of showing it (a windowed list). */
  onJump?: () => void;
}

/** The scrolling area of a lane. */
export function FollowScroll(props: FollowScrollProps): JSX.Element {
  const ref = useRef<HTMLDivElement>(null);
  const following = useRef(true);
  const lastKey = useRef<string | undefined>(undefined);
  const [newBelow, setNewBelow] = useState(false);

  const atBottom = (el: HTMLElement) =>
    el.scrollHeight - el.scrollTop - el.clientHeight <= NEAR_BOTTOM_PX;
  // A jump also shows the newest rows (a windowed list renders them after the jump).
  const jumpPending = useRef(false);
  const jump = () => {
    const el = ref.current;
    if (el === null) return;
    props.onJump?.();
    jumpPending.current = true;
    el.scrollTop = el.scrollHeight;
    following.current = true;
    setNewBelow(false);
  };
  // While following, every render (and every change of the content's size) keeps the newest
  // item in view: content that grows after a render cannot leave the list short of its bottom.
  useLayoutEffect(() => {
    const el = ref.current;
    if (el === null || !(following.current || jumpPending.current)) return;
    jumpPending.current = false;
    el.scrollTop = el.scrollHeight;
  });
  useEffect(() => {
    const el = ref.current;
    const content = el?.firstElementChild;
    if (el === null || content === null || content === undefined) return;
    const observer = new ResizeObserver(function stick() {
      if (following.current) el.scrollTop = el.scrollHeight;
    });
    observer.observe(content);
    return () => observer.disconnect();
  }, []);

  useLayoutEffect(() => {
    const el = ref.current;
    if (el === null || lastKey.current === props.contentKey) return;
    const first = lastKey.current === undefined;
    lastKey.current = props.contentKey;
    if (!following.current && !first && el.scrollHeight > el.clientHeight) setNewBelow(true);
  }, [props.contentKey]);

  return (
    <div
      class="lane-scroll"
      ref={ref}
      // Keyboard users scroll the lane too (arrow keys once it has focus).
      tabIndex={0}
      onScroll={(event) => {
        const el = event.currentTarget;
        const near = atBottom(el);
        following.current = near;
        if (near && newBelow) setNewBelow(false);
        if (el.scrollTop < el.clientHeight) props.onNearTop?.();
        if (!near) props.onAway?.();
        if (el.scrollHeight - el.scrollTop - el.clientHeight < el.clientHeight) {
          props.onNearBottom?.(near);
        }
      }}
    >
      <div class="follow-content">{props.children}</div>
      {newBelow && (
        <button type="button" class="new-below" onClick={jump}>
          <span aria-hidden="true">↓</span> New {props.what} below
        </button>
      )}
    </div>
  );
}
