/**
 * The floor the daemon's start-up and idle size are compared with: a bare `Deno.serve` that
 * answers `/health`. Run as `deno run --allow-net=127.0.0.1 floor_server.ts <port>`; SIGTERM
 * ends it.
 *
 * @module
 */

if (import.meta.main) {
  const port = Number(Deno.args[0]);
  Deno.serve(
    { hostname: "127.0.0.1", port, onListen: () => {} },
    () => Response.json({ ok: true }),
  );
}
