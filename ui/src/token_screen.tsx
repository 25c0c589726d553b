/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * What the page shows when the daemon will not let it in: how to get the token
 * (`deno task klbr url`), a field to paste it, and the daemon's reason. Also the header's
 * badge saying whether the workbench is confined.
 *
 * @module
 */

import type { JSX } from "preact";
import { useState } from "preact/hooks";
import type { SandboxInfo } from "./lane_client.ts";
import { StateBadge } from "./state_badge.tsx";

/** Props of {@linkcode TokenScreen}. */
export interface TokenScreenProps {
  /** The daemon's reason for refusing the lane. */
  reason: string | undefined;
  /** Why a token the page tried was refused. */
  refused: string | undefined;
  /** Exchanges a pasted token for a session cookie. */
  onToken: (token: string) => void;
}

/** The form that takes a pasted token. */
export function TokenForm(
  props: { onToken: (token: string) => void; error?: string },
): JSX.Element {
  const [value, setValue] = useState("");
  return (
    <form
      class="token-form"
      onSubmit={(event) => {
        event.preventDefault();
        if (value.trim() !== "") props.onToken(value.trim());
        setValue("");
      }}
    >
      {props.error !== undefined && (
        <p class="error-text" role="alert">Token refused: {props.error}</p>
      )}
      <label for="operator-token">Operator token</label>
      <input
        id="operator-token"
        type="password"
        autoComplete="off"
        value={value}
        onInput={(event) => setValue((event.currentTarget as HTMLInputElement).value)}
      />
      <button type="submit">Use token</button>
      <p class="hint">
        The page trades it once for a session cookie and does not keep it. Opening the address{" "}
        <code>deno task klbr url</code> prints (<code>#token=…</code>) does the same.
      </p>
    </form>
  );
}

/** The page without a token: how to get one, instead of an empty chat. */
export function TokenScreen(props: TokenScreenProps): JSX.Element {
  return (
    <main class="token-screen" aria-labelledby="h-token">
      <section class="panel">
        <h2 id="h-token">This page needs the operator token</h2>
        <p>
          klbr lets only its owner in. On the machine that runs the daemon, run
        </p>
        <pre class="text"><code>deno task klbr url</code></pre>
        <p>
          and open the address it prints, or paste the token below. The token is in the state
          directory's <code>operator.token</code>; keep it private.
        </p>
        {props.reason !== undefined && <p class="hint" data-field="auth-reason">{props.reason}</p>}
        <TokenForm onToken={props.onToken} error={props.refused} />
      </section>
    </main>
  );
}

/** The header's word on confinement: a cell is sandboxed, or it can reach everything. */
export function SandboxBadge(
  { sandbox }: { sandbox: SandboxInfo | undefined },
): JSX.Element | null {
  if (sandbox === undefined) return null;
  if (sandbox.mode === "bwrap") {
    return (
      <span data-sandbox="bwrap" title="The workbench runs inside bubblewrap">
        <StateBadge
          tone="ok"
          label={`sandboxed${sandbox.network ? " · network on" : " · no network"}`}
        />
      </span>
    );
  }
  return (
    <span data-sandbox="none" title={sandbox.reason ?? "bubblewrap cannot run here"}>
      <StateBadge
        tone="error"
        label="workbench unconfined"
        title={sandbox.reason ?? "bubblewrap cannot run here"}
      />
    </span>
  );
}
