/**
 * The hook that re-renders a component when its {@linkcode LaneClient} changes.
 *
 * @module
 */

import { useEffect, useState } from "preact/hooks";
import type { LaneClient } from "./lane_client.ts";

/** Subscribes to `client`; returns its version so memos can depend on it. */
export function useClient(client: LaneClient): number {
  const [version, setVersion] = useState(client.version);
  useEffect(() => {
    setVersion(client.version);
    return client.subscribe(() => setVersion(client.version));
  }, [client]);
  return version;
}
