/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The page's entry: reads the token from `#token=…` (then removes it from the address bar),
 * keeps a stable client id in `localStorage`, opens the lane socket and renders the app.
 *
 * @module
 */

import { render } from "preact";
import { App } from "./app.tsx";
import { LaneClient } from "./lane_client.ts";

const TOKEN_KEY = "klbr:token";
const CLIENT_KEY = "klbr:client";

function readStored(key: string): string | undefined {
  try {
    return localStorage.getItem(key) ?? undefined;
  } catch {
    return undefined;
  }
}

function writeStored(key: string, value: string | undefined): void {
  try {
    if (value === undefined) localStorage.removeItem(key);
    else localStorage.setItem(key, value);
  } catch { /* storage denied: the value lives as long as the page */ }
}

/** Takes a token from the URL fragment, stores it and removes it from the address bar. */
function tokenFromLocation(): string | undefined {
  const match = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (match === null) return undefined;
  const token = decodeURIComponent(match[1]);
  writeStored(TOKEN_KEY, token);
  history.replaceState(null, "", location.pathname + location.search);
  return token;
}

function clientId(): string {
  let id = readStored(CLIENT_KEY);
  if (id === undefined || !/^[A-Za-z0-9_-]{1,100}$/.test(id)) {
    id = `web-${crypto.randomUUID()}`;
    writeStored(CLIENT_KEY, id);
  }
  return id;
}

function start(): void {
  const params = new URLSearchParams(location.search);
  const token = tokenFromLocation() ?? readStored(TOKEN_KEY);
  const client = new LaneClient({
    url: `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v2`,
    session: params.get("session") ?? "default",
    clientId: clientId(),
    token,
    storage: sessionStorage,
    onTokenRejected: () => writeStored(TOKEN_KEY, undefined),
  });
  const onToken = (value: string | undefined) => {
    writeStored(TOKEN_KEY, value);
    client.setToken(value);
  };
  addEventListener("pagehide", () => client.persistNow());
  const root = document.getElementById("app");
  if (root === null) throw new Error("klbr: the page has no #app element");
  root.textContent = "";
  render(<App client={client} onToken={onToken} />, root);
  client.start();
}

start();
