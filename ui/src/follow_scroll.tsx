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
import { useLayoutEffect, useRef, useState } from "preact/hooks";

/** How close to the bottom (px) still counts as "at the bottom". */
const NEAR_BOTTOM_PX = 48;

/** Props of {@linkcode FollowScroll}. */
export interface FollowScrollProps {
  /** Changes whenever new content arrives (e.g. the newest seq and the item count). */
  contentKey: string;
  /** What the lane holds, for the button's accessible name ("messages"). */
  what: string;
  children: ComponentChildren;
}

/** The scrolling area of a lane. */
export function FollowScroll(props: FollowScrollProps): JSX.Element {
  const ref = useRef<HTMLDivElement>(null);
  const following = useRef(true);
  const lastKey = useRef<string | undefined>(undefined);
  const [newBelow, setNewBelow] = useState(false);

  const atBottom = (el: HTMLElement) =>
    el.scrollHeight - el.scrollTop - el.clientHeight <= NEAR_BOTTOM_PX;
  const jump = () => {
    const el = ref.current;
    if (el === null) return;
    el.scrollTop = el.scrollHeight;
    following.current = true;
    setNewBelow(false);
  };

  useLayoutEffect(() => {
    const el = ref.current;
    if (el === null || lastKey.current === props.contentKey) return;
    const first = lastKey.current === undefined;
    lastKey.current = props.contentKey;
    if (following.current) {
      el.scrollTop = el.scrollHeight;
    } else if (!first && el.scrollHeight > el.clientHeight) setNewBelow(true);
  }, [props.contentKey]);

  return (
    <div
      class="lane-scroll"
      ref={ref}
      // Keyboard users scroll the lane too (arrow keys once it has focus).
      tabIndex={0}
      onScroll={(event) => {
        const near = atBottom(event.currentTarget);
        following.current = near;
        if (near && newBelow) setNewBelow(false);
      }}
    >
      {props.children}
      {newBelow && (
        <button type="button" class="new-below" onClick={jump}>
          <span aria-hidden="true">↓</span> New {props.what} below
        </button>
      )}
    </div>
  );
}
