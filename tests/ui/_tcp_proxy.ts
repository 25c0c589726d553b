/**
 * A loopback TCP forwarder with a stable port, so a page keeps one origin while the daemon
 * behind it is killed and restarted on another port (the test daemon always binds port 0).
 *
 * @module
 */

/** A running forwarder. */
export interface TcpProxy {
  /** The stable port the page talks to. */
  readonly port: number;
  /** Where new connections go from now on. */
  setTarget(port: number): void;
  /** Stops listening and closes every forwarded connection. */
  close(): Promise<void>;
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch { /* already closed */ }
}

/**
 * Forwards each connection on a fresh 127.0.0.1 port to `127.0.0.1:<target>`; a connection
 * whose target does not answer is closed at once, as a dead daemon's port would refuse it.
 */
export function startTcpProxy(target: number): TcpProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  const tasks = new Set<Promise<void>>();
  let current = target;

  const forward = async (client: Deno.Conn) => {
    open.add(client);
    let upstream: Deno.Conn | undefined;
    try {
      upstream = await Deno.connect({ hostname: "127.0.0.1", port: current });
      open.add(upstream);
      const up = upstream;
      // When either side ends, both are closed: a killed daemon drops the page's socket.
      await Promise.race([
        client.readable.pipeTo(up.writable).catch(() => {}),
        up.readable.pipeTo(client.writable).catch(() => {}),
      ]);
    } catch {
      /* target refused: close the client below */
    } finally {
      closeQuietly(client);
      open.delete(client);
      if (upstream !== undefined) {
        closeQuietly(upstream);
        open.delete(upstream);
      }
    }
  };

  const accepting = (async () => {
    for await (const conn of listener) {
      const task = forward(conn);
      tasks.add(task);
      task.finally(() => tasks.delete(task));
    }
  })().catch(() => {});

  return {
    port: (listener.addr as Deno.NetAddr).port,
    setTarget(port) {
      current = port;
    },
    async close() {
      listener.close();
      for (const conn of open) closeQuietly(conn);
      await accepting;
      await Promise.all(tasks);
    },
  };
}
